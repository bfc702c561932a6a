"""recursive_map and with_rngs share the original's Variables (flax.nnx's randomness guide: a
counter updated in a scan over a ``with_rngs`` copy counts on the original cell)."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Count(nnx.Variable):
  pass


class Cell(nnx.Module):
  def __init__(self, rngs):
    self.count = Count(jnp.array(0, jnp.uint32))
    self.drop = nnx.Dropout(0.1, rngs=rngs, rng_collection="recurrent_dropout")

  def __call__(self, h, x):
    h = self.drop(h)
    self.count[...] = self.count[...] + 1
    return h + x, h


def test_recursive_map_keeps_variables_and_copies_modules():
  m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  for graph in (True, False):
    new = nnx.recursive_map(lambda path, x: x, m, graph=graph)
    assert new is not m and new.kernel is m.kernel and new.bias is m.bias


@pytest.mark.parametrize("graph", [True, False])
def test_scan_over_with_rngs_copy_updates_the_original(graph):
  cell = Cell(nnx.Rngs(recurrent_dropout=1))
  traces = []

  @nnx.jit(graph=graph)
  def forward(cell, x):
    traces.append(1)
    b = nnx.with_rngs(cell, broadcast=x.shape[1], graph=graph, graph_updates=False)
    axes = nnx.prefix(b, {"recurrent_dropout": 0, ...: None}, graph=graph)

    @nnx.scan(in_axes=(axes, nnx.Carry, 1), out_axes=(nnx.Carry, 1), graph=graph)
    def unroll(cell, h, x):
      return cell(h, x)

    return unroll(b, jnp.ones((4, 3)), x)[1]

  y = forward(cell, jnp.ones((4, 5, 3)))
  assert y.shape == (4, 5, 3)
  masks = [bool(jnp.all((y[:, 0] == 0) == (y[:, i] == 0))) for i in range(5)]
  assert all(masks)  # broadcast stream: the same dropout mask on every step
  assert int(cell.count[...]) == 5
  forward(cell, jnp.ones((4, 5, 3)))
  assert int(cell.count[...]) == 10
  assert len(traces) == 1


def test_error_inside_scan_leaves_the_original_count():
  cell = Cell(nnx.Rngs(recurrent_dropout=1))
  b = nnx.with_rngs(cell, broadcast=2, graph_updates=False)
  axes = nnx.prefix(b, {"recurrent_dropout": 0, ...: None})

  @nnx.scan(in_axes=(axes, nnx.Carry, 1), out_axes=(nnx.Carry, 1))
  def unroll(cell, h, x):
    h, y = cell(h, x)
    if x.shape[-1] == 3:
      raise ValueError("bad step")
    return h, y

  with pytest.raises(ValueError, match="bad step"):
    unroll(b, jnp.ones((4, 3)), jnp.ones((4, 2, 3)))
  assert int(cell.count[...]) == 0
  assert jax.tree.leaves(cell.count)[0].dtype == jnp.uint32

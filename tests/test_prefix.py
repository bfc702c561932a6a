"""nnx.prefix: per-leaf axes/shardings from filters, usable as in_axes/out_axes
of nnx.vmap and as in_shardings of nnx.jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(3, 4, rngs=rngs)
    self.count = nnx.BatchStat(jnp.array(0))


def test_prefix_values_follow_filters_in_order():
  m = Block(nnx.Rngs(0))
  filters = {nnx.PathContains("kernel"): 0, nnx.Param: 1, ...: None}
  axes = nnx.prefix(m, filters, graph=True)  # graph mode: a TreeState of values
  assert isinstance(axes, nnx.extract.TreeState)
  assert axes.state["linear"]["kernel"] == 0 and axes.state["linear"]["bias"] == 1
  assert axes.state["count"] is None
  copy = nnx.prefix(m, filters, graph=False)  # tree mode: the Module's shape, values as leaves
  assert (copy.linear.kernel, copy.linear.bias, copy.count) == (0, 1, None)


def test_prefix_of_containers_and_callable():
  d = {"a": nnx.Param(jnp.array(2)), "b": nnx.BatchStat(jnp.arange(5))}
  px = nnx.prefix(d, lambda path, x: 0 if "b" in path else None)
  assert px == {"a": None, "b": 0}
  y = nnx.vmap(lambda d: d["a"] * d["b"], in_axes=(px,))(d)
  assert y.tolist() == [0, 2, 4, 6, 8]


def test_prefix_as_vmap_axes_matches_state_axes():
  @nnx.split_rngs(splits=3)
  @nnx.vmap(in_axes=0, out_axes=nnx.StateAxes({nnx.Param: 0, ...: None}))
  def make(rngs):
    return Block(rngs)

  stack = make(nnx.Rngs(0))
  axes = nnx.prefix(stack, {nnx.Param: 0, ...: None})
  x = jnp.ones((2, 3))
  f = nnx.vmap(lambda m, x: m.linear(x), in_axes=(axes, None))
  g = nnx.vmap(lambda m, x: m.linear(x), in_axes=(nnx.StateAxes({nnx.Param: 0, ...: None}), None))
  assert_trees_close(f(stack, x), g(stack, x))


def test_prefix_as_jit_in_shardings():
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",))
  rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "d"))
  m = Block(nnx.Rngs(0))
  sh = nnx.prefix(m, {nnx.PathContains("kernel"): rows, ...: None})
  nnx.jit(lambda m: None, in_shardings=(sh,))(m)
  assert m.linear.kernel.value.sharding == rows


def test_prefix_no_match_raises():
  m = Block(nnx.Rngs(0))
  with pytest.raises(ValueError, match="No filter matched leaf at path linear/bias"):
    nnx.prefix(m, {nnx.PathContains("kernel"): 0, nnx.BatchStat: None})


@pytest.mark.parametrize("graph", [True, False])
def test_prefix_in_both_modes_as_vmap_axes_and_for_aliased_arguments(graph):
  @nnx.split_rngs(splits=4)
  @nnx.vmap(in_axes=0, out_axes=0)
  def make(rngs):
    return nnx.Linear(2, 3, rngs=rngs)

  model = make(nnx.Rngs(0))
  x = jnp.ones((2,))
  axes = nnx.prefix(model, {nnx.Param: 0}, graph=graph)
  y = nnx.vmap(lambda m, x: m(x), in_axes=(axes, None), graph=graph)(model, x)
  assert y.shape == (4, 3)
  if graph:  # the same model twice: the second prefix refers to the first
    a1, a2 = nnx.prefix((model, model), {nnx.Param: 0}, graph=True)
    f = nnx.vmap(lambda m1, m2, x: m1(x) + m2(x), in_axes=(a1, a2, None))
    assert_trees_close(f(model, model, x), 2 * y)


def test_graph_nodes_variables_and_stateaxes_in_the_wrong_mode_are_refused():
  m = nnx.Dict(a=nnx.Param(jnp.ones(2)))
  with pytest.raises(ValueError, match="Graph nodes are not allowed as prefixes"):
    nnx.vmap(lambda x: x, in_axes=m)
  with pytest.raises(ValueError, match="Variables prefixes are not supported"):
    nnx.vmap(lambda v: v, in_axes=(nnx.Variable(0),), graph=False)
  with pytest.raises(ValueError, match="cannot contain `StateAxes` objects"):
    nnx.vmap(lambda x: x, in_axes=nnx.StateAxes({...: 0}), graph=False)
  with pytest.raises(ValueError, match="cannot contain `StateSharding` objects"):
    nnx.jit(lambda x: x, in_shardings=nnx.StateSharding({...: None}), graph=False)
  with pytest.raises(ValueError, match="cannot contain `DiffState` objects"):
    nnx.grad(lambda x: x, argnums=nnx.DiffState(0, ...), graph=False)


@pytest.mark.devices(2)
@pytest.mark.parametrize("graph", [True, False])
def test_prefix_as_jit_out_shardings_of_a_module_made_inside(graph):
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",))
  cols = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "d"))
  rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
  like = nnx.Linear(4, 6, rngs=nnx.Rngs(0))
  sh = nnx.prefix(like, {nnx.PathContains("kernel"): cols, ...: rows}, graph=graph)
  traces = []

  @nnx.jit(out_shardings=sh, graph=graph)
  def make():
    traces.append(1)
    return nnx.Linear(4, 6, rngs=nnx.Rngs(0))

  m = make()
  make()
  assert m.kernel.value.sharding == cols and m.bias.value.sharding == rows
  assert_trees_close(m.kernel.value, like.kernel.value)
  assert len(traces) == 1

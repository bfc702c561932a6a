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
  axes = nnx.prefix(m, {nnx.PathContains("kernel"): 0, nnx.Param: 1, ...: None})
  assert axes.map_prefix(("linear", "kernel"), m.linear.kernel) == 0
  assert axes.map_prefix(("linear", "bias"), m.linear.bias) == 1
  assert axes.map_prefix(("count",), m.count) is None


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
  with pytest.raises(nnx.AxisSpecError, match="no filter matches the leaf at linear/bias"):
    nnx.prefix(m, {nnx.PathContains("kernel"): 0, nnx.BatchStat: None})

"""nnx.shard_map's eager results carry the specs the user wrote (as an eager
jax.shard_map call): outputs the out_specs, changed state its in_specs, also
where jax.jit would report the replicated normal form P()."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
)

pytestmark = pytest.mark.devices(8)  # (8,) and (4, 2) meshes

P = jax.sharding.PartitionSpec


def _mesh(*shape_names):
  shape = tuple(n for n, _ in shape_names)
  devices = np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape)
  return jax.sharding.Mesh(devices, tuple(a for _, a in shape_names))


class Counted(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.arange(16.0).reshape(8, 2))
    self.count = nnx.BatchStat(jnp.zeros((2,)))


@pytest.mark.parametrize("out_spec", [P(None), P(None, None), P(), P("d"), P("d", None)])
def test_output_spec_is_the_given_out_specs(out_spec):
  mesh = _mesh((8, "d"))
  sharded = out_spec != P() and out_spec[0] == "d"
  counter = TraceCounter()

  @nnx.shard_map(mesh=mesh, in_specs=P("d"), out_specs=out_spec)
  @counter
  def f(x):
    y = x * 2.0
    return y if sharded else jax.lax.psum(y, "d")

  x = jnp.arange(16.0).reshape(8, 2)
  y = f(x)
  assert y.sharding.spec == out_spec
  assert_trees_close(y, x * 2.0 if sharded else (x * 2.0).sum(0, keepdims=True))
  with assert_no_retrace(counter):
    assert f(x).sharding.spec == out_spec


def test_out_specs_prefix_of_a_tuple_output():
  mesh = _mesh((8, "d"))

  @nnx.shard_map(mesh=mesh, in_specs=P("d"), out_specs=(P(None), P("d", None)))
  def f(x):
    return jax.lax.psum(x.sum(0), "d"), {"a": x, "b": x + 1.0}

  total, parts = f(jnp.ones((8, 2)))
  assert total.sharding.spec == P(None)
  assert parts["a"].sharding.spec == P("d", None) and parts["b"].sharding.spec == P("d", None)


def test_changed_state_keeps_its_in_specs_without_retrace():
  mesh = _mesh((8, "d"))
  m = Counted()
  specs = nnx.StateSharding({nnx.PathContains("count"): P(None), ...: P("d", None)})
  counter = TraceCounter()

  @nnx.shard_map(mesh=mesh, in_specs=(specs,), out_specs=P(None))
  @counter
  def step(m):
    m.count[...] = m.count[...] + 1.0
    m.w[...] = m.w[...] * 2.0
    return jax.lax.psum(m.w[...].sum(0), "d")

  out = step(m)
  assert out.sharding.spec == P(None)
  assert m.count.value.sharding.spec == P(None)
  assert m.w.value.sharding.spec == P("d", None)
  with assert_no_retrace(counter):
    step(m)
  assert m.count.value.sharding.spec == P(None)
  assert_trees_close(m.count.value, jnp.full((2,), 2.0))
  assert_trees_close(m.w.value, jnp.arange(16.0).reshape(8, 2) * 4.0)


def test_partially_manual_output_keeps_the_automatic_axis():
  mesh = _mesh((4, "a"), (2, "b"))
  x = jax.device_put(jnp.ones((8, 4)), jax.sharding.NamedSharding(mesh, P("a", "b")))

  @nnx.shard_map(mesh=mesh, in_specs=P("a"), out_specs=P("a"), axis_names={"a"})
  def f(x):
    return x * 2.0

  eager = jax.shard_map(
    lambda x: x * 2.0, mesh=mesh, in_specs=P("a"), out_specs=P("a"), axis_names={"a"}
  )
  assert f(x).sharding.spec == eager(x).sharding.spec


def test_error_in_body_leaves_module_unchanged():
  mesh = _mesh((8, "d"))
  m = Counted()

  @nnx.shard_map(mesh=mesh, in_specs=(P(),), out_specs=P(None))
  def bad(m):
    m.count[...] = m.count[...] + 1.0
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    bad(m)
  assert_trees_equal(m.count.value, jnp.zeros((2,)))

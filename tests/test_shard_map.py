"""nnx.shard_map: Modules see their shards, the result matches the unsharded
computation, changed state comes back with its input spec, no retrace,
atomic on error, StateSharding built from a State of specs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close

P = jax.sharding.PartitionSpec
N = 1 << (min(4, jax.device_count()).bit_length() - 1)  # 4, 2 or 1 devices: all divide 8


@pytest.fixture
def mesh():
  return jax.sharding.Mesh(np.array(jax.devices()[:N]), ("m",))


class Counted(nnx.Module):
  def __init__(self):
    self.linear = nnx.Linear(3, 8, rngs=nnx.Rngs(0))
    self.count = nnx.BatchStat(jnp.array(0))


SPEC = nnx.StateSharding({nnx.PathContains("kernel"): P(None, "m"), ...: P()})


def test_shards_inside_and_same_result_as_unsharded(mesh):
  m = Counted()
  counter = TraceCounter()

  @nnx.shard_map(mesh=mesh, in_specs=(SPEC, P()), out_specs=P(None, "m"))
  @counter
  def f(m, x):
    assert m.linear.kernel.value.shape == (3, 8 // N)
    m.count += 1
    return x @ m.linear.kernel.value

  x = jnp.ones((5, 3))
  y = f(m, x)
  assert_trees_close(y, x @ m.linear.kernel.value)
  with assert_no_retrace(counter):
    f(m, x)
  assert int(m.count.value) == 2
  assert isinstance(m.linear.kernel.value.sharding, jax.sharding.NamedSharding)
  assert m.linear.kernel.value.sharding.spec == P(None, "m")


def test_state_sharding_from_state_of_specs(mesh):
  specs = nnx.State({"kernel": P(None, "m"), "bias": P()})
  m = nnx.Linear(3, 8, rngs=nnx.Rngs(0))

  @nnx.shard_map(mesh=mesh, in_specs=(nnx.StateSharding(specs),), out_specs=P())
  def f(m):
    return jnp.array([m.kernel.value.shape[1], m.bias.value.shape[0]])

  assert f(m).tolist() == [8 // N, 8]


def test_structural_change_raises_and_leaves_module_unchanged(mesh):
  m = Counted()

  @nnx.shard_map(mesh=mesh, in_specs=(SPEC,), out_specs=P())
  def f(m):
    m.count += 1
    m.extra = nnx.Variable(jnp.zeros(()))
    return m.count.value

  with pytest.raises(nnx.LiftedStructureError, match="nnx.shard_map"):
    f(m)
  assert int(m.count.value) == 0 and not hasattr(m, "extra")


def test_exception_leaves_module_unchanged(mesh):
  m = Counted()

  @nnx.shard_map(mesh=mesh, in_specs=(SPEC,), out_specs=P())
  def f(m):
    m.count += 1
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    f(m)
  assert int(m.count.value) == 0

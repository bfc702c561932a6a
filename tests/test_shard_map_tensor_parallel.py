"""Tensor parallelism inside nnx.shard_map: layers see their local kernel shards."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close

P = jax.sharding.PartitionSpec


class MLP(nnx.Module):
  def __init__(self, rngs):
    self.linear1 = nnx.Linear(2, 64, use_bias=False, rngs=rngs)
    self.linear2 = nnx.Linear(64, 3, use_bias=False, rngs=rngs)

  def __call__(self, x):
    return self.linear2(jax.nn.relu(self.linear1(x)))


@pytest.mark.devices(8)
def test_linear_runs_on_local_kernel_shards_inside_shard_map():
  mesh = jax.sharding.Mesh(jax.devices()[:8], ("model",))
  m = MLP(nnx.Rngs(0))
  x = jnp.ones((32, 2))
  sharding = nnx.StateSharding(
    {nnx.PathContains("linear1"): P(None, "model"), nnx.PathContains("linear2"): P("model")}
  )
  counter = TraceCounter()

  @nnx.shard_map(mesh=mesh, in_specs=(sharding, P()), out_specs=P())
  @counter
  def f(m, x):
    assert m.linear1.kernel.shape == (2, 8) and m.linear2.kernel.shape == (8, 3)
    return jax.lax.psum(m(x), "model")

  y = f(m, x)
  assert_trees_close(y, m(x), rtol=1e-5, atol=1e-5)
  with assert_no_retrace(counter):
    f(m, x)


def test_linear_still_refuses_an_input_that_does_not_fit_its_kernel():
  m = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
  with pytest.raises(nnx.InputShapeError, match="has 3 features on axis -1.*expects 4"):
    m(jnp.ones((1, 3)))


@pytest.mark.devices(8)
def test_a_state_of_specs_shards_a_state_argument_by_path():
  mesh = jax.sharding.Mesh(jax.devices()[:8], ("a",))
  m = nnx.Linear(16, 32, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(m)
  specs = nnx.State({"kernel": P(None, "a"), "bias": P()})  # key order differs from `state`
  counter = TraceCounter()

  @nnx.shard_map(mesh=mesh, in_specs=(specs, P()), out_specs=P(None, "a"))
  @counter
  def f(s, x):
    local = nnx.merge(graphdef, s)
    assert local.kernel.shape == (16, 4) and local.bias.shape == (32,)
    return x @ local.kernel[...]

  x = jnp.ones((2, 16))
  assert_trees_close(f(state, x), x @ m.kernel[...], rtol=1e-5, atol=1e-5)
  with assert_no_retrace(counter):
    f(state, x)

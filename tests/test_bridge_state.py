"""eqx.nn.State / StateIndex <-> Variables: BatchNorm, user StateIndex, Rngs, errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

X = jax.random.normal(jax.random.key(0), (4, 3, 2))


def batch_call(model, x, state):
  return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def nnx_batch_call(m, x):
  return nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name="batch")(m, x)


@pytest.mark.parametrize("mode", ["batch", "ema"])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_exact_both_ways_over_several_steps(mode, affine):
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(
    3, "batch", mode=mode, momentum=0.8, channelwise_affine=affine
  )
  m = nnx.from_eqx(bn, state)
  names = ("counter", "mean", "var") if mode == "batch" else ("first_time", "mean", "var")
  assert sorted(nnx.state(m, nnx.BatchStat)) == sorted(names)
  for step in range(3):
    x = X + step
    y, state = batch_call(bn, x, state)
    assert_trees_close(nnx_batch_call(m, x), y)
    assert_trees_close(nnx.to_eqx_with_state(m), (bn, state))
  # Inference uses the debiased running averages (batch mode divides by 1 - momentum**counter).
  m.eval()
  bn_eval = eqx.nn.inference_mode(bn)
  y, _ = batch_call(bn_eval, X, state)
  assert_trees_close(nnx_batch_call(m, X), y)
  assert nnx.to_eqx_with_state(m)[0].inference is True
  if mode == "batch":
    assert int(m.counter.value) == 3


def test_from_eqx_with_state_roundtrips_after_updates():
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  _, state = batch_call(bn, X, state)
  m = nnx.from_eqx(bn, state)
  assert int(m.counter.value) == 1
  assert_trees_equal(nnx.to_eqx_with_state(m), (bn, state))


def test_state_is_a_placeholder_on_the_nnx_side():
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  m = nnx.from_eqx(bn, state)
  y, s = nnx.vmap(lambda m, x: m(x, None), in_axes=(None, 0), axis_name="batch")(m, X)
  assert s is None and int(m.counter.value) == 1
  with pytest.raises(nnx.NnxError, match="keeps its state in its own Variables"):
    nnx.vmap(lambda m, x: m(x, state), in_axes=(None, 0), axis_name="batch")(m, X)


def test_mutating_under_plain_jax_vmap_raises_trace_error():
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  m = nnx.from_eqx(bn, state)
  with pytest.raises(nnx.TraceContextError):
    jax.vmap(m, axis_name="batch")(X)


class Counter(eqx.Module):
  """A user's stateful layer (the StateIndex example of Equinox's docs)."""

  index: eqx.nn.StateIndex
  scale: jax.Array

  def __init__(self):
    self.index = eqx.nn.StateIndex(jnp.array(0.0))
    self.scale = jnp.array(2.0)

  def __call__(self, x, state):
    current = state.get(self.index)
    return x * self.scale + current, state.set(self.index, current + 1)


def test_user_state_index_becomes_eqx_state_variable():
  model, state = eqx.nn.make_with_state(Counter)()
  m = nnx.from_eqx(model, state)
  assert type(m.index) is nnx.bridge.EqxState and type(m.scale) is nnx.Param
  y, s = m(jnp.ones(2), None)  # Equinox's signature; the state lives in m.index
  assert s is None and float(m.index.value) == 1.0
  y2 = m(jnp.ones(2))  # called without state: the output alone
  assert_trees_equal(y2, jnp.full(2, 3.0))
  assert float(m.index.value) == 2.0
  ye, state = model(jnp.ones(2), state)
  ye, state = model(jnp.ones(2), state)
  assert_trees_close(y2, ye)
  assert_trees_equal(nnx.to_eqx_with_state(m), (model, state))


def test_user_state_index_under_nnx_jit():
  model, state = eqx.nn.make_with_state(Counter)()
  m = nnx.from_eqx(model, state)
  f = nnx.jit(lambda m, x: m(x))
  for _ in range(3):
    f(m, jnp.ones(2))
  assert float(m.index.value) == 3.0


def test_initial_state_is_used_without_make_with_state():
  m = nnx.from_eqx(Counter())  # StateIndex still holds its initial value
  assert float(m.index.value) == 0.0


def test_missing_state_errors_name_the_path():
  model, state = eqx.nn.make_with_state(Counter)()
  with pytest.raises(nnx.bridge.MissingStateError, match=r"StateIndex at root.index has no value"):
    nnx.from_eqx(model)
  other, other_state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(2, "batch", mode="batch")
  with pytest.raises(
    nnx.bridge.MissingStateError, match=r"has no entry for the StateIndex at root.index"
  ):
    nnx.from_eqx(model, other_state)
  with pytest.raises(nnx.bridge.MissingStateError, match="must be an eqx.nn.State"):
    nnx.from_eqx(model, {"index": 0})
  _, new = model(jnp.ones(2), state)  # `state` is now stale
  with pytest.raises(nnx.bridge.MissingStateError, match="old state"):
    nnx.from_eqx(model, state)
  assert isinstance(nnx.bridge.MissingStateError("x"), KeyError)


def test_to_eqx_on_stateful_module_points_to_with_state():
  class M(nnx.Module):
    def __init__(self):
      self.w = nnx.Param(jnp.ones(2))
      self.stats = nnx.BatchStat(jnp.zeros(2))

  with pytest.raises(nnx.bridge.StatefulModuleError, match=r"root.stats.*nnx.to_eqx_with_state"):
    nnx.to_eqx(M())
  model, state = nnx.to_eqx_with_state(M())
  assert state.get(model.stats).shape == (2,)


def test_nnx_state_carried_in_eqx_state_through_sequential():
  class Count(nnx.Module):
    def __init__(self):
      self.n = nnx.Variable(jnp.array(0))

    def __call__(self, x):
      self.n += 1
      return x + 1

  bn, bn_state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(2, "batch", mode="batch")
  m = nnx.Sequential([Count(), nnx.from_eqx(bn, bn_state), Count()])
  e, state = nnx.to_eqx_with_state(m)
  x = jnp.ones((3, 2))

  def run(e, state, x):
    return e(x, state)

  # The Equinox form is a stateful layer: eqx.nn.Sequential threads the state through.
  seq = eqx.nn.Sequential([eqx.nn.Lambda(lambda x: x * 2), e])
  y, state = jax.vmap(seq, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)
  back = nnx.from_eqx(e, state)
  assert int(back[0].n.value) == 1 and int(back[2].n.value) == 1 and int(back[1].counter.value) == 1
  y_nnx = nnx.vmap(lambda m, x: m(x * 2), in_axes=(None, 0), axis_name="batch")(m, x)
  assert_trees_close(y, y_nnx)


def test_rngs_counts_are_state():
  class Noisy(nnx.Module):
    def __init__(self):
      self.drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=1))

    def __call__(self, x):
      return self.drop(x)

  m = Noisy()
  e, state = nnx.to_eqx_with_state(m)
  y1, state = e(jnp.ones(8), state)
  y2, state = e(jnp.ones(8), state)
  assert_trees_equal(y1, m(jnp.ones(8)))
  assert_trees_equal(y2, m(jnp.ones(8)))  # the counts advanced alike
  back = nnx.from_eqx(e, state)
  assert int(back.drop.rngs.count.value) == int(m.drop.rngs.count.value) == 2

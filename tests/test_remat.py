"""nnx.remat and nnx.Remat: same values and gradients, the same program as a
hand-written jax.checkpoint (alone and inside a scan), state updates, options,
trace counts."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  hlo_equal,
)


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(4, 4, rngs=rngs)
    self.calls = nnx.Variable(jnp.array(0))

  def __call__(self, x):
    self.calls += 1
    return jnp.tanh(self.linear(x))


X = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)


def pure_grads(f):
  """An nnx.jit train-step-like function returning plain arrays."""

  @nnx.jit
  def step(m, x):
    loss, grads = nnx.value_and_grad(lambda m: f(m, x))(m)
    return loss, grads.to_pure_dict()

  return step


def test_values_gradients_and_updates_match_plain_call():
  a, b = Block(nnx.Rngs(0)), Block(nnx.Rngs(0))
  loss_remat = pure_grads(lambda m, x: jnp.sin(nnx.remat(lambda m, x: m(x))(m, x)).sum())
  loss_plain = pure_grads(lambda m, x: jnp.sin(m(x)).sum())
  la, ga = loss_remat(a, X)
  lb, gb = loss_plain(b, X)
  assert_trees_close(la, lb)
  assert_trees_close(ga, gb)
  assert int(a.calls.value) == int(b.calls.value) == 1


def test_program_equals_hand_written_checkpoint():
  model = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
  graphdef, params = nnx.split(model)
  policy = jax.checkpoint_policies.dots_saveable
  ours = pure_grads(lambda m, x: jnp.sin(nnx.remat(lambda m, x: m(x), policy=policy)(m, x)).sum())

  def ref(p, x):
    inner = jax.checkpoint(lambda p, x: nnx.merge(graphdef, p)(x), policy=policy)
    return jnp.sin(inner(p, x)).sum()

  ref_step = jax.jit(
    lambda p, x: (lambda lg: (lg[0], lg[1].to_pure_dict()))(jax.value_and_grad(ref)(p, x))
  )
  assert hlo_equal(ours.lower(model, X), ref_step.lower(params, X))


def test_remat_in_scan_equals_hand_written_and_memory_matches():
  @nnx.split_rngs(splits=6)
  @nnx.vmap(in_axes=0, out_axes=0)
  def make(rngs):
    return nnx.Linear(4, 4, rngs=rngs)

  layers = make(nnx.Rngs(0))

  @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
  @nnx.remat
  def body(layer, x):
    return jnp.tanh(layer(x))

  ours = pure_grads(lambda m, x: body(m, x).sum()).lower(layers, X)
  graphdef, params = nnx.split(layers)
  ckpt = jax.checkpoint(lambda p, x: jnp.tanh(nnx.merge(graphdef, p)(x)))

  def ref_loss(p, x):
    return jax.lax.scan(lambda x, p: (ckpt(p, x), None), x, p)[0].sum()

  ref = jax.jit(
    lambda p, x: (lambda lg: (lg[0], lg[1].to_pure_dict()))(jax.value_and_grad(ref_loss)(p, x))
  ).lower(params, X)
  assert hlo_equal(ours, ref)
  mem = ours.compile().memory_analysis()
  ref_mem = ref.compile().memory_analysis()
  if mem is not None and ref_mem is not None:
    assert mem.temp_size_in_bytes == ref_mem.temp_size_in_bytes


def test_static_argnums_and_no_retrace():
  m = Block(nnx.Rngs(0))
  counter = TraceCounter()

  @nnx.remat(static_argnums=2)
  @counter
  def apply(m, x, power):
    return m(x) ** power

  y = apply(m, X, 2)
  with assert_no_retrace(counter):
    apply(m, X, 2)
  assert_trees_close(y, jnp.tanh(m.linear(X)) ** 2)
  apply(m, X, 3)  # a new static value traces once more
  assert counter.count == 2 and int(m.calls.value) == 3


def test_decorated_method_and_init_left_alone():
  class Net(nnx.Module):
    @nnx.remat
    def __init__(self, rngs):
      self.block = Block(rngs)

    @nnx.remat
    def __call__(self, x):
      return self.block(x)

  net = Net(nnx.Rngs(0))
  net(X)
  net(X)
  assert int(net.block.calls.value) == 2


def test_error_leaves_module_unchanged():
  m = Block(nnx.Rngs(0))
  before = nnx.state(m)

  def bad(m, x):
    m(x)
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    nnx.remat(bad)(m, X)
  assert_trees_equal(nnx.state(m), before)


def test_seed_remat_wrapper_and_call_proxy():
  class Seed(nnx.Module):
    def __init__(self, *, rngs):
      self.block = Block(rngs)

    def __call__(self, x, *, rngs=None):
      return self.block(x)

    def twice(self, x):
      return 2 * self.block(x)

  wrapped = nnx.Remat(Seed)(rngs=nnx.Rngs(0))
  y = wrapped(X)
  assert_trees_close(wrapped.call.twice(X), 2 * y)
  assert int(wrapped.remat_module.block.calls.value) == 2
  assert isinstance(nnx.remat(Seed)(rngs=nnx.Rngs(0)), nnx.Remat)

"""A State held as Pytree/Module data is walked like a container of its Variables:
split/merge and the lifted transforms find them, and sharing with the model is kept
(flax.nnx's FSDP example builds its optimizer this way)."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close


class SGDState(nnx.Variable):
  pass


class SGD(nnx.Pytree):
  def __init__(self, params: nnx.State, lr: float, decay: float = 0.9):
    self.lr, self.decay = lr, decay
    self.params = nnx.data(params)
    self.momentum = nnx.data(
      jax.tree.map(
        lambda v: SGDState(jnp.zeros_like(v.value)),
        self.params,
        is_leaf=lambda x: isinstance(x, nnx.Variable),
      )
    )

  def update(self, grads: nnx.State) -> None:
    def step(p, m, g):
      m[...] = self.decay * m[...] + (1 - self.decay) * g[...]
      p[...] -= self.lr * m[...]

    jax.tree.map(
      step, self.params, self.momentum, grads, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )


def _setup():
  model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
  return model, SGD(nnx.variables(model, nnx.Param), 0.1)


def _paths(state) -> list:
  return sorted(p for p, _ in nnx.to_flat_state(state))


def _loss(model, x, y):
  return jnp.mean((model(x) - y) ** 2)


def test_split_finds_the_variables_of_a_held_state_and_keeps_sharing():
  model, opt = _setup()
  graphdef, state = nnx.split((model, opt))
  # the model's Params appear once (shared), the momentum Variables are new leaves
  assert _paths(state) == [
    (0, "bias"),
    (0, "kernel"),
    (1, "momentum", "bias"),
    (1, "momentum", "kernel"),
  ]
  m2, o2 = nnx.merge(graphdef, state)
  assert o2.params["kernel"] is m2.kernel and o2.params["bias"] is m2.bias
  assert isinstance(o2.momentum["kernel"], SGDState)


def test_jit_updates_the_state_variables_in_place_without_retrace():
  model, opt = _setup()
  kernel, momentum = model.kernel, opt.momentum["kernel"]
  counter = TraceCounter()

  @nnx.jit
  @counter
  def train_step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(_loss)(model, x, y)
    opt.update(grads)
    return loss

  x, y = jnp.ones((4, 2)), jnp.zeros((4, 1))
  expected_model, expected_opt = _setup()
  expected_loss, grads = nnx.value_and_grad(_loss)(expected_model, x, y)
  expected_opt.update(grads)

  loss = train_step(model, opt, x, y)
  assert_trees_close(loss, expected_loss)
  assert model.kernel is kernel and opt.params["kernel"] is kernel
  assert opt.momentum["kernel"] is momentum
  assert_trees_close(model.kernel.value, expected_model.kernel.value)
  assert_trees_close(opt.momentum["kernel"].value, expected_opt.momentum["kernel"].value)
  with assert_no_retrace(counter):
    train_step(model, opt, x, y)


def test_an_error_inside_jit_leaves_the_held_state_unchanged():
  model, opt = _setup()
  before = jax.tree.map(lambda a: a, nnx.state(opt))

  @nnx.jit
  def bad(opt):
    opt.momentum["kernel"][...] = jnp.ones((2, 1))
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    bad(opt)
  assert_trees_close(nnx.state(opt), before)


def test_a_state_created_inside_jit_comes_out_with_shared_variables():
  @nnx.jit
  def create():
    return _setup()

  model, opt = create()
  assert opt.params["kernel"] is model.kernel
  assert isinstance(opt.momentum["bias"], SGDState)


def test_a_data_marked_state_of_raw_arrays_round_trips():
  class Holder(nnx.Pytree):
    def __init__(self):
      self.s = nnx.data(nnx.State({"a": jnp.ones(2), "b": {"c": jnp.zeros(3)}}))

  h = Holder()
  graphdef, state = nnx.split(h)
  assert _paths(state) == [("s", "a"), ("s", "b", "c")]
  h2 = nnx.merge(graphdef, state)
  assert isinstance(h2.s, nnx.State)
  assert_trees_close(h2.s["b"]["c"], jnp.zeros(3))

  @nnx.jit
  def bump(h):
    h.s["a"] = h.s["a"] + 1

  bump(h)
  assert_trees_close(h.s["a"], jnp.full(2, 2.0))

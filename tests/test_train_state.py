"""TrainState over optax (seed helpers.py): exact equality with a hand-written optax loop."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


class MLP(nnx.Module):
  def __init__(self, rngs):
    self.l1 = nnx.Linear(3, 8, rngs=rngs)
    self.l2 = nnx.Linear(8, 1, rngs=rngs)

  def __call__(self, x):
    return self.l2(jax.nn.relu(self.l1(x)))


def forward(p, x):
  h = jax.nn.relu(x @ p["l1"]["kernel"] + p["l1"]["bias"])
  return h @ p["l2"]["kernel"] + p["l2"]["bias"]


DATA = (
  jax.random.normal(jax.random.key(1), (16, 3)),
  jax.random.normal(jax.random.key(2), (16, 1)),
)


@pytest.mark.parametrize(
  "make_tx", [lambda: optax.sgd(0.05, momentum=0.9), lambda: optax.rmsprop(1e-2)]
)
def test_train_state_matches_a_hand_written_optax_loop_exactly(make_tx):
  tx = make_tx()
  graphdef, params = nnx.split(MLP(nnx.Rngs(0)), nnx.Param)
  state = nnx.TrainState(graphdef, params=params, tx=tx)
  counter = TraceCounter()

  @jax.jit
  @counter
  def train_step(state, x, y):
    def loss_fn(params):
      y_pred, _ = state.apply(params)(x)
      return jnp.mean((y_pred - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss

  @jax.jit
  def reference_step(p, opt_state, x, y):
    loss, g = jax.value_and_grad(lambda p: jnp.mean((forward(p, x) - y) ** 2))(p)
    updates, opt_state = tx.update(g, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, loss

  p = params.to_pure_dict()
  opt_state = tx.init(p)
  state, loss = train_step(state, *DATA)
  p, opt_state, ref_loss = reference_step(p, opt_state, *DATA)
  assert loss == ref_loss
  with assert_no_retrace(counter):
    for _ in range(4):
      state, loss = train_step(state, *DATA)
      p, opt_state, ref_loss = reference_step(p, opt_state, *DATA)
      assert loss == ref_loss
  assert int(state.step) == 5 and state.step.dtype == jnp.int32
  assert_trees_equal(state.params.to_pure_dict(), p)  # exact (rtol=atol=0)
  assert_trees_equal(jax.tree.leaves(state.opt_state), jax.tree.leaves(opt_state))
  assert float(loss) < float(jnp.mean((forward(params.to_pure_dict(), DATA[0]) - DATA[1]) ** 2))


def test_fields_children_static_and_immutability():
  graphdef, params = nnx.split(MLP(nnx.Rngs(0)), nnx.Param)
  tx = optax.sgd(0.1)
  state = nnx.TrainState(graphdef, params=params, tx=tx, step=3)
  assert state.moduledef is state.graphdef is graphdef and state.tx is tx
  assert isinstance(state.params, nnx.State) and int(state.step) == 3
  n_params = len(jax.tree.leaves(params))
  assert len(jax.tree.leaves(state)) == n_params + 1  # sgd without momentum: empty opt state
  other = nnx.TrainState(graphdef, params=params, tx=tx, step=0)
  assert jax.tree.structure(state) == jax.tree.structure(other)
  with pytest.raises(
    nnx.ImmutableError, match=r"TrainState is immutable: cannot set attribute 'step'"
  ):
    state.step = 0
  with pytest.raises(nnx.UnknownFieldError, match=r"\['batch_stat'\]"):
    state.apply_gradients(grads=params, batch_stat=params)


class WithBatchNorm(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(3, 4, rngs=rngs)
    self.bn = nnx.BatchNorm(4, rngs=rngs)

  def __call__(self, x):
    return self.bn(self.linear(x)).sum(axis=-1, keepdims=True)


def test_extra_fields_apply_by_name_and_update_with_apply_gradients():
  graphdef, params, batch_stats = nnx.split(WithBatchNorm(nnx.Rngs(0)), nnx.Param, nnx.BatchStat)
  state = nnx.TrainState(graphdef, params=params, tx=optax.sgd(0.1), batch_stats=batch_stats)
  assert len(jax.tree.leaves(state)) == 6 + 1  # params (4) + batch stats (2) + step

  @jax.jit
  def train_step(state, x, y):
    def loss_fn(params):
      y_pred, (updates, _) = state.apply(params, "batch_stats")(x)
      return jnp.mean((y_pred - y) ** 2), updates.filter(nnx.BatchStat)

    grads, batch_stats = jax.grad(loss_fn, has_aux=True)(state.params)
    return state.apply_gradients(grads=grads, batch_stats=batch_stats)

  new = train_step(state, *DATA)
  assert int(new.step) == 1
  assert not np.array_equal(new.batch_stats.bn.mean.value, state.batch_stats.bn.mean.value)
  y_named, _ = new.apply("params", "batch_stats")(DATA[0])
  y_states, _ = new.graphdef.apply(new.params, new.batch_stats)(DATA[0])
  assert_trees_equal(y_named, y_states)

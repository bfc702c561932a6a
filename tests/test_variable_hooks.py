"""Variable get_value/set_value overrides seen by indexing, raw access, nnx.as_pure,
and Optimizer.update returning a State of updates for State grads."""

import jax
import jax.numpy as jnp
import optax

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal


class Plus3(nnx.Param):
  def get_value(self):
    return super().get_value() + 3


class Plus7OnSet(nnx.Param):
  def set_value(self, new):
    super().set_value(new + 7)


def test_indexing_reads_through_get_value_and_raw_bypasses_it():
  x = Plus3(jnp.array(1))
  assert int(x[...]) == 4 and int(x.get_raw_value()) == 1


def test_item_assignment_writes_through_set_value():
  x = Plus7OnSet(jnp.array(1))
  x[...] = 5
  assert int(x.get_raw_value()) == 12
  y = Plus7OnSet(jnp.zeros(3))
  y[1] = 1.0
  assert_trees_close(y.get_raw_value(), jnp.array([7.0, 8.0, 7.0]))
  y.set_raw_value(jnp.ones(3))
  assert_trees_equal(y.get_raw_value(), jnp.ones(3))


def test_as_pure_drops_variables():
  state = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
  pure = nnx.as_pure(state)
  assert isinstance(pure, nnx.State)
  assert not any(
    isinstance(x, nnx.Variable)
    for x in jax.tree.leaves(pure, is_leaf=lambda x: isinstance(x, nnx.Variable))
  )
  assert_trees_equal(pure["kernel"], state["kernel"].value)


def test_optimizer_update_returns_state_for_state_grads():
  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.sgd(0.5), wrt=nnx.Param)
  grads = nnx.grad(lambda m: m(jnp.ones((1, 2))).sum())(model)
  updates = opt.update(model, grads)
  assert isinstance(updates, nnx.State)
  assert_trees_close(updates["bias"], -0.5 * nnx.as_pure(grads)["bias"])

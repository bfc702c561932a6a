"""Variable get_value/set_value overrides seen by indexing, raw access, nnx.as_pure,
and Optimizer.update returning a State of updates for State grads; ref mode and with_vars."""

import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.graph.variables import _hijax
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


def test_ref_mode_variables_read_and_write_through_the_ref():
  v = nnx.Variable(jnp.array(1), ref=True)
  assert v.ref and isinstance(v.get_raw_value(), jax.Ref) and int(v[...]) == 1
  ref = v.get_raw_value()
  v += 1
  assert v.get_raw_value() is ref and int(v.value) == 2
  assert not v.copy(ref=False).ref and v.copy().get_raw_value() is not ref
  assert not v.hijax
  if _hijax.AVAILABLE:
    assert isinstance(nnx.Variable(1.0, hijax=True), nnx.variablelib.HijaxVariable)
  else:
    with pytest.raises(nnx.JaxVersionError, match=r"jax>=0\.10\.2"):
      nnx.Variable(1.0, hijax=True)
  with nnx.var_defaults(ref=True):
    assert nnx.Variable(jnp.ones(1)).ref
  assert not nnx.Variable(jnp.ones(1)).ref


def test_with_vars_converts_selected_variables_in_a_copy():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  r = nnx.with_vars(m, ref=True, only=lambda path, v: path[-1] == "kernel")
  assert r.kernel.ref and not r.bias.ref and r.bias is m.bias and not m.kernel.ref
  assert_trees_close(r(jnp.ones((1, 2))), m(jnp.ones((1, 2))))
  shared = nnx.Variable(jnp.ones(1))
  with pytest.raises(ValueError, match="Found duplicate at paths 0 and 1"):
    nnx.with_vars([shared, shared], ref=True)
  both = nnx.with_vars([shared, shared], ref=True, allow_duplicates=True)
  assert both[0] is both[1] and both[0].ref

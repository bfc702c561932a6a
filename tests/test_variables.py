"""Variables: value access, operators, in-place updates, metadata, pytree behaviour."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


def test_operators_act_on_the_value():
  w = nnx.Param(jnp.arange(6.0).reshape(2, 3))
  x = jnp.ones((1, 2))
  assert_trees_equal(x @ w, x @ w.value)
  assert_trees_equal(w + 1, w.value + 1)
  assert_trees_equal(2 * w, 2 * w.value)
  assert_trees_equal(-w, -w.value)
  assert_trees_equal(w[0], w.value[0])
  assert w.shape == (2, 3) and w.dtype == jnp.float32 and w.ndim == 2 and w.size == 6
  assert bool((w > 2).any())


def test_inplace_updates_keep_identity():
  c = nnx.Variable(jnp.array(0))
  same = c
  c += 1
  c *= 3
  assert c is same and int(c.value) == 3


def test_setitem_updates_functionally():
  v = nnx.Variable(jnp.zeros(3))
  v[1] = 5.0
  assert_trees_equal(v.value, [0.0, 5.0, 0.0])


def test_metadata_kept_through_split_merge():
  m = nnx.Module()
  m.w = nnx.Param(jnp.ones((2, 2)), sharding=("a", None), note="x")
  g, s = nnx.split(m)
  assert s.w.sharding == ("a", None) and s.w.note == "x"
  m2 = nnx.merge(g, s)
  assert m2.w.sharding == ("a", None)
  leaves, treedef = jax.tree_util.tree_flatten(m)
  assert jax.tree_util.tree_unflatten(treedef, leaves).w.note == "x"


def test_with_metadata_initializer():
  init = nnx.with_metadata(jax.nn.initializers.zeros, sharding=("embed",))
  p = nnx.Param(init(jax.random.key(0), (4,), jnp.float32))
  assert p.sharding == ("embed",) and p.value.shape == (4,)


def test_variable_is_pytree_of_its_value():
  p = nnx.Param(jnp.ones(2), tag="t")
  leaves, treedef = jax.tree_util.tree_flatten(p)
  assert len(leaves) == 1
  q = jax.tree_util.tree_unflatten(treedef, [jnp.zeros(2)])
  assert type(q) is nnx.Param and q.tag == "t"


def test_user_subclass_is_its_own_collection():
  class Count(nnx.Variable):
    pass

  m = nnx.Module()
  m.c = Count(jnp.array(0))
  m.p = nnx.Param(jnp.ones(1))
  assert list(nnx.state(m, Count).to_flat_dict()) == [("c",)]
  g, s = nnx.split(m)
  assert type(nnx.merge(g, s).c) is Count


def test_replace_and_copy():
  p = nnx.Param(jnp.zeros(2), tag="a")
  q = p.replace(jnp.ones(2))
  assert q is not p and q.tag == "a" and float(q.value.sum()) == 2.0
  assert p.copy().value is p.value


def test_unknown_attribute_message():
  with pytest.raises(AttributeError, match="no metadata or value attribute 'nope'"):
    _ = nnx.Param(jnp.ones(1)).nope


def test_jax_functions_read_the_value():
  # ``__jax_array__``: jnp functions take a Variable as they take its value (as in flax.nnx).
  p = nnx.Param(jnp.arange(3.0))
  assert_trees_equal(jnp.sin(p), jnp.sin(p.value))
  assert_trees_equal(jnp.dot(p, p), jnp.dot(p.value, p.value))
  assert_trees_equal(jnp.asarray(p), p.value)
  ref = nnx.Param(jnp.arange(3.0), ref=True)
  assert_trees_equal(jnp.cos(ref), jnp.cos(jnp.arange(3.0)))
  # Inside a trace the value is the tracer: one trace, no write-back needed.
  traces = []

  @jax.jit
  def f(m):
    traces.append(1)
    return jnp.tanh(m.kernel) @ jnp.ones(3)

  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  assert f(m).shape == (2,)
  f(m)
  assert len(traces) == 1


def test_value_typevar_is_exported():
  class Tagged(nnx.Variable[nnx.A]):
    pass

  assert nnx.A is nnx.variablelib.A
  assert Tagged(jnp.ones(2)).value.shape == (2,)


def test_variable_holding_a_callable_proxies_calls():
  scale = nnx.Variable(lambda x, k=1: x * k)
  assert scale(3) == 3 and scale(3, k=2) == 6


def test_set_metadata_on_a_module_only_touches_the_filtered_variables():
  m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  m.count = nnx.BatchStat(jnp.array(0))
  nnx.set_metadata(m, tag="x")
  nnx.set_metadata(m, frozen=True, only=nnx.Param)
  assert m.kernel.get_metadata("tag") == "x" and m.count.get_metadata("tag") == "x"
  assert m.kernel.get_metadata("frozen") is True
  assert m.count.get_metadata("frozen", None) is None

"""Node and Static containers, register_node_type and is_node_leaf (seed 0.0.7 containers/nodes)."""

import copy
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


class Holder(nnx.Module):
  def __init__(self, node, mask):
    self.w = nnx.Param(jnp.ones(2))
    self.node = nnx.Node(node)
    self.mask = nnx.Static(mask)


def test_node_value_is_a_state_leaf_and_round_trips():
  m = Holder([4, 5], np.array([1.0, 0.0]))
  graphdef, state = nnx.split(m)
  assert sorted(state) == ["node", "w"]
  assert type(state.node) is nnx.Node and state.node.value == [4, 5]
  assert repr(state.node) == "Node(value=[4, 5])"
  assert sorted(nnx.state(m, nnx.Node)) == ["node"]
  m2 = nnx.merge(graphdef, state, copy=True)
  assert m2.node.value == [4, 5] and m2.node is not m.node
  assert nnx.merge(graphdef, state).node is m.node
  assert isinstance(m.node, nnx.Variable)


def test_node_value_is_traced_and_updated_through_nnx_jit():
  m = Holder(jnp.array([1.0, 2.0]), np.zeros(2))

  @nnx.jit
  def double(m):
    m.node.value = m.node.value * 2

  double(m)
  double(m)
  assert_trees_equal(m.node.value, [4.0, 8.0])


def test_static_array_lives_in_the_graphdef_and_is_a_compile_time_constant():
  a = Holder([1], np.array([1.0, 0.0]))
  b = Holder([1], np.array([1.0, 0.0]))
  c = Holder([1], np.array([0.0, 1.0]))
  assert "mask" not in nnx.state(a)
  assert nnx.graphdef(a) == nnx.graphdef(b) and hash(nnx.graphdef(a)) == hash(nnx.graphdef(b))
  assert nnx.graphdef(a) != nnx.graphdef(c)
  counter = TraceCounter()

  @nnx.jit
  @counter
  def masked(m):
    return m.w.value * m.mask.value.astype(jnp.float32)

  assert_trees_equal(masked(a), [1.0, 0.0])
  with assert_no_retrace(counter):
    assert_trees_equal(masked(b), [1.0, 0.0])  # equal content: cache hit
  assert_trees_equal(masked(c), [0.0, 1.0])
  assert counter.count == 2
  assert nnx.merge(*nnx.split(c)).mask.value.tolist() == [0.0, 1.0]


def test_static_is_immutable_hashable_and_leafless():
  s = nnx.Static({"a": 1})
  assert jax.tree.leaves(s) == [] and jax.tree.map(lambda x: x, s) is s
  assert nnx.Static(nnx.Static(3)) == nnx.Static(3)
  assert nnx.Static(3) != nnx.Static(4) and nnx.Static(3) != 3
  assert hash(nnx.Static(np.ones(2))) == hash(nnx.Static(np.ones(2)))
  assert nnx.Static(np.ones(2)) != nnx.Static(np.ones(2, np.float32))
  unhashable = [1, 2]
  assert nnx.Static(unhashable) == nnx.Static(unhashable)  # same object
  with pytest.raises(nnx.ImmutableError, match="nnx.Static is immutable; cannot set 'value'"):
    nnx.Static(1).value = 2
  assert pickle.loads(pickle.dumps(nnx.Static((1, 2)))) == nnx.Static((1, 2))
  assert copy.deepcopy(nnx.Static(np.ones(2))) == nnx.Static(np.ones(2))


def test_static_rejects_graph_nodes_and_tracers():
  with pytest.raises(nnx.GraphStructureError, match="nnx.Static cannot hold a Param"):
    nnx.Static(nnx.Param(jnp.ones(1)))
  with pytest.raises(nnx.GraphStructureError, match="nnx.Static cannot hold a Linear"):
    nnx.Static(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))

  @jax.jit
  def f(x):
    return hash(nnx.Static(x))

  with pytest.raises(nnx.GraphStructureError, match="holds a traced array"):
    f(jnp.ones(2))


class _Point:
  def __init__(self, x, y):
    self.x, self.y = x, y


jax.tree_util.register_pytree_node(_Point, lambda p: ((p.x, p.y), None), lambda _, c: _Point(*c))
nnx.register_node_type(_Point)


def test_register_node_type_makes_user_objects_state_leaves():
  m = nnx.Module()
  m.p = _Point(jnp.ones(2), jnp.zeros(2))
  m.w = nnx.Param(jnp.ones(1))
  assert nnx.is_node_leaf(m.p) and not nnx.is_node(m.p)
  graphdef, points, rest = nnx.split(m, _Point, ...)
  assert list(points) == ["p"] and list(rest) == ["w"]
  assert len(jax.tree.leaves(points)) == 2

  @nnx.jit
  def shift(m):
    m.p = _Point(m.p.x + 1, m.p.y)

  shift(m)
  assert_trees_equal(m.p.x, [2.0, 2.0])


def test_is_node_and_is_node_leaf_semantics():
  lin = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  x = jnp.ones(1)
  # nnx.is_node: identity-tracked objects (Variables and graph nodes).
  assert nnx.is_node(nnx.Param(x)) and nnx.is_node(lin) and not nnx.is_node(x)
  # nnx.is_node_leaf: the seeds' is_node (stored in the State).
  assert nnx.is_node_leaf(x) and nnx.is_node_leaf(np.ones(1)) and nnx.is_node_leaf(nnx.Node(1))
  assert nnx.is_node_leaf(lin.partition())
  assert not nnx.is_node_leaf(lin) and not nnx.is_node_leaf(3) and not nnx.is_node_leaf([x])
  assert not nnx.is_node_leaf(nnx.Static(x))


@given(hnp.arrays(hnp.floating_dtypes(sizes=(32, 64)), hnp.array_shapes(max_dims=2, max_side=3)))
def test_static_equality_law(a):
  b = a.copy()
  assert nnx.Static(a) == nnx.Static(b) and hash(nnx.Static(a)) == hash(nnx.Static(b))
  changed = np.concatenate([a.ravel(), np.zeros(1, a.dtype)])
  assert nnx.Static(a) != nnx.Static(changed)


nested = st.recursive(
  st.integers(-5, 5) | st.floats(-1, 1, width=32),
  lambda inner: (
    st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
  ),
  max_leaves=6,
)


@given(nested)
def test_node_split_merge_round_trip_law(value):
  m = nnx.Module()
  m.node = nnx.Node(value)
  graphdef, state = nnx.split(m)
  assert nnx.merge(graphdef, state).node.value == value
  leaves, treedef = jax.tree.flatten(state)
  rebuilt = jax.tree.unflatten(treedef, leaves)
  assert nnx.merge(graphdef, rebuilt).node.value == value

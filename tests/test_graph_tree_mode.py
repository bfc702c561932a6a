"""Tree mode (graph=False) of the graph API, splitting single leaves, GraphDef views."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx import graphlib


def _shared():
  v = nnx.Param(jnp.array(1))
  return [v, v]


def _cycle():
  a = nnx.List([1])
  b = nnx.List([2, a])
  a.append(b)
  return a


@pytest.mark.parametrize(
  "call",
  [
    lambda g: nnx.split(g, graph=False),
    lambda g: nnx.state(g, graph=False),
    lambda g: nnx.graphdef(g, graph=False),
    lambda g: nnx.clone(g, graph=False),
    lambda g: list(nnx.iter_graph(g, graph=False)),
    lambda g: nnx.recursive_map(lambda p, x: x, g, graph=False),
  ],
)
def test_tree_mode_rejects_a_shared_variable_naming_both_paths(call):
  with pytest.raises(nnx.SharedReferenceError, match=r"found at paths 0 and 1 \(a shared"):
    call(_shared())


def test_tree_mode_rejects_a_cycle():
  msg = r"Duplicate List: the same object is found at paths <root> and 1/1 \(a ref"
  with pytest.raises(ValueError, match=msg):
    list(nnx.iter_graph(_cycle(), graph=False))


def test_tree_mode_default_comes_from_set_graph_mode():
  with nnx.set_graph_mode(False):
    with pytest.raises(nnx.SharedReferenceError, match="use graph mode"):
      nnx.split(_shared())
  graphdef, state = nnx.split(_shared())  # graph mode keeps the sharing
  out = nnx.merge(graphdef, state)
  assert out[0] is out[1]


def test_tree_mode_split_of_a_tree_round_trips():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(m, graph=False)
  (node,) = graphdef.nodes
  assert isinstance(node, graphlib.TreeNodeDef) and node.type is nnx.Linear
  assert [p for p, _ in node.path_index] == [("bias",), ("kernel",)]
  m2 = nnx.merge(graphdef, state)
  assert m2 is not m and m2.kernel is m.kernel  # the State's own Variables, as flax.nnx 0.12
  m3 = nnx.merge(graphdef, state, copy=True)
  assert (m3.kernel.value == m.kernel.value).all() and m3.kernel is not m.kernel


@pytest.mark.parametrize("graph", [True, False])
def test_split_of_a_variable(graph):
  v = nnx.Param(jnp.array(1))
  graphdef, batch_stats, params, rest = nnx.split(v, nnx.BatchStat, nnx.Param, ..., graph=graph)
  expected = graphlib.VariableDef if graph else graphlib.TreeNodeDef
  assert isinstance(graphdef.nodes[0], expected)
  assert isinstance(params, nnx.Param) and params is v  # the graph's own Variable, as flax.nnx 0.12
  assert len(batch_stats) == 0 and len(rest) == 0
  assert nnx.merge(graphdef, batch_stats, params, rest) is params
  params.value = jnp.array(5)
  nnx.update(v, batch_stats, params, rest)
  assert int(v.value) == 5


def test_merge_of_a_variable_graphdef_with_a_raw_value_makes_a_variable():
  graphdef, _ = nnx.split(nnx.BatchStat(jnp.array(1.0)))
  out = nnx.merge(graphdef, jnp.array(2.0))
  assert type(out) is nnx.BatchStat and float(out.value) == 2.0


def test_merge_of_a_leaf_graphdef_needs_exactly_one_state():
  graphdef, _ = nnx.split(jnp.ones(2))
  with pytest.raises(nnx.StateMismatchError, match="single leaf, but 2 non-empty states"):
    nnx.merge(graphdef, jnp.ones(2), jnp.ones(2))


@pytest.mark.parametrize("leaf", [42, jnp.arange(3)])
def test_split_of_a_value_returns_it_as_the_state(leaf):
  graphdef, state = nnx.split(leaf)
  assert state is leaf
  assert nnx.merge(graphdef, state) is leaf


def test_merge_without_a_state_is_a_type_error():
  graphdef = nnx.graphdef(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))
  with pytest.raises(TypeError, match="missing 1 required positional argument: 'state'"):
    nnx.merge(graphdef)


def test_merge_copy_decides_whether_variables_are_new():
  m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(m)
  out = nnx.merge(graphdef, state, copy=True)
  assert out.kernel is not state["kernel"] and out.kernel is not m.kernel
  out = nnx.merge(graphdef, state, copy=False)
  assert out.kernel is state["kernel"] is m.kernel


def test_graphdef_is_subscriptable_and_lists_its_nodes():
  m = nnx.Module()
  m.a = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  m.b = m.a
  assert nnx.GraphDef[nnx.Module].__origin__ is nnx.GraphDef
  nodes = nnx.graphdef(m).nodes
  assert [type(n).__name__ for n in nodes] == [
    "NodeDef",
    "NodeDef",
    "VariableDef",
    "VariableDef",
    "NodeRef",
  ]
  assert nodes[0].attributes == ("a", "b") and nodes[4].index == 1
  assert nnx.graphdef(m) != nnx.graphdef(m).as_tree()


def test_path_contains_substring_match():
  m = nnx.Module()
  m.backbone1 = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  m.head = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  assert list(nnx.state(m, nnx.PathContains("backbone", exact=False))) == ["backbone1"]
  assert list(nnx.state(m, nnx.PathContains("backbone"))) == []


@pytest.mark.parametrize("graph", [True, False])
def test_map_replaces_every_leaf_and_keeps_the_input(graph):
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  seen = []

  def zero(path, v):
    seen.append(path)
    return jnp.zeros_like(v)

  out = nnx.map(zero, m, graph=graph)
  assert sorted(seen) == [("bias",), ("kernel",)]
  assert type(out.kernel) is nnx.Param and float(abs(out.kernel.value).sum()) == 0.0
  assert float(abs(m.kernel.value).sum()) > 0.0


def test_map_keeps_sharing_in_graph_mode_and_rejects_it_in_tree_mode():
  m = nnx.Module()
  m.a = nnx.Param(jnp.ones(1))
  m.b = m.a
  out = nnx.map(lambda p, v: v.replace(v.value * 3), m)
  assert out.a is out.b and float(out.a.value[0]) == 3.0
  with pytest.raises(nnx.SharedReferenceError, match=r"nnx.map\(graph=False\)"):
    nnx.map(lambda p, v: v, m, graph=False)


def test_map_without_recreating_variables_leaves_plain_values():
  out = nnx.map(lambda p, x: 0, nnx.Rngs(0), recreate_variables=False)
  assert out.default.count == 0 and not isinstance(out.default.count, nnx.Variable)
  m = nnx.Module()
  m.a = nnx.Param(jnp.ones(1))
  m.b = m.a
  with pytest.raises(nnx.GraphStructureError, match="Variable at a is also reached at b"):
    nnx.map(lambda p, x: 0, m, recreate_variables=False)


def test_iter_graph_is_post_order_with_nodes_once_and_arrays_at_every_path():
  arr = jnp.zeros(1)
  var = nnx.Variable(jnp.zeros(1))
  child = nnx.Module()
  child.a, child.b, child.c = var, arr, var
  root = nnx.Module()
  root.x, root.y, root.z = child, arr, child
  got = [(p, n) for p, n in nnx.iter_graph(root)]
  assert [p for p, _ in got] == [("x", "a"), ("x", "b"), ("x",), ("y",), ()]
  assert [n for _, n in got][2] is child and got[-1][1] is root and got[3][1] is arr


def test_tree_mode_rejects_a_shared_jax_ref_in_a_plain_container():
  ref = jax.new_ref(jnp.array(1.0))
  msg = r"Duplicate Ref: the same object is found at paths 0 and 1"
  with pytest.raises(nnx.SharedReferenceError, match=msg):
    nnx.split([ref, ref], graph=False)
  nnx.split([ref, ref])  # graph mode accepts it


class _NotAPytree(nnx.Pytree, pytree=False):
  def __init__(self):
    self.x = nnx.Param(jnp.ones(1))


@pytest.mark.parametrize(
  "call",
  [
    lambda g: nnx.split(g, graph=False),
    lambda g: nnx.graphlib.flatten(g, graph=False),
    lambda g: list(nnx.iter_graph(g, graph=False)),
    lambda g: nnx.recursive_map(lambda p, x: x, g, graph=False),
  ],
)
def test_tree_mode_refuses_pytree_false_classes_naming_the_path(call):
  with pytest.raises(nnx.GraphModeRequiredError, match=r"pytree=False.*Found at path 0"):
    call(nnx.List([_NotAPytree()]))
  call_graph_mode = nnx.split(nnx.List([_NotAPytree()]))  # graph mode accepts it
  assert len(call_graph_mode) == 2


def test_iter_children_in_tree_mode_refuses_pytree_false():
  with pytest.raises(nnx.GraphModeRequiredError, match="pytree=False"):
    list(nnx.iter_children(_NotAPytree(), graph=False))
  assert list(nnx.iter_children(_NotAPytree())) == []

"""nnx.graphlib: flatten/unflatten, reference maps, split/merge/update contexts."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx import graphlib
from nnx_eqx.testing import all_paths, graphs, same_graph

N = 100  # examples per law


def _identities(node) -> set[int]:
  return {id(obj) for _, obj in all_paths(node)}


@settings(max_examples=N)
@given(graphs())
def test_flatten_unflatten_rebuilds_the_graph_with_new_objects(m):
  graphdef, flat = graphlib.flatten(m)
  assert flat.paths == graphdef.paths
  m2 = graphlib.unflatten(graphdef, flat)
  assert same_graph(m2, m)
  assert not (_identities(m2) & _identities(m))


@settings(max_examples=N)
@given(graphs())
def test_flatten_refmap_and_unflatten_indexmap_are_inverse_by_index(m):
  refs = graphlib.RefMap()
  graphdef, leaves = graphlib.flatten(m, ref_index=refs, with_paths=False)
  assert isinstance(leaves, list) and len(leaves) == len(graphdef.paths)
  built = graphlib.IndexMap()
  m2 = graphlib.unflatten(graphdef, leaves, index_ref=built)
  assert sorted(built) == sorted(refs.values()) == list(range(len(refs)))
  for obj, i in refs.items():
    assert type(built[i]) is type(obj)
  assert built[0] is m2


@settings(max_examples=N)
@given(graphs())
def test_outer_indices_update_the_outer_graph_in_place(m):
  outer_refs = graphlib.RefMap()
  graphdef, flat = graphlib.flatten(m, ref_index=outer_refs)
  inner_built = graphlib.IndexMap()
  inner = graphlib.unflatten(graphdef, flat, index_ref=inner_built)
  inner_to_outer = graphlib.RefMap.from_indexmap(inner_built)
  graphdef2, flat2 = graphlib.flatten(inner, ref_outer_index=inner_to_outer)
  out = graphlib.unflatten(
    graphdef2, flat2, outer_index_outer_ref=graphlib.IndexMap.from_refmap(outer_refs)
  )
  assert out is m
  assert graphdef2.outer == tuple(range(graphdef.n_nodes))


def test_flatten_returns_the_graphs_own_variables():
  v = nnx.Param(jnp.array(2))
  graphdef, flat = graphlib.flatten({"a": 1, "b": v})
  assert flat[0] == (("b",), v) and flat[0][1] is v
  assert isinstance(flat, graphlib.FlatState) and len(flat) == 1
  assert flat.to_nested_state()["b"] is v


@pytest.mark.parametrize("graph", [True, False])
def test_flatten_of_a_value_has_it_as_the_only_leaf(graph):
  x = jnp.array(1.0)
  graphdef, flat = graphlib.flatten(x, graph=graph)
  assert flat[0] == ((), x) and flat[0][1] is x
  assert nnx.merge(graphdef, flat) is x
  assert graphlib.unflatten(graphdef, flat) is x


def test_unflatten_checks_the_number_of_leaves():
  graphdef, _ = graphlib.flatten(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))
  with pytest.raises(ValueError, match="Incorrect number of leaves: the GraphDef has 2, the st"):
    graphlib.unflatten(graphdef, nnx.State({}))
  with pytest.raises(nnx.StateMismatchError, match="has 2, the state 1"):
    graphlib.unflatten(graphdef, [jnp.ones(1)])


def test_unflatten_needs_a_graphdef():
  with pytest.raises(nnx.GraphStructureError, match="unflatten expects a GraphDef first"):
    graphlib.unflatten(nnx.State({}), [])


def test_flat_state_is_a_pytree():
  flat = graphlib.FlatState([(("a",), jnp.ones(2)), (("b",), jnp.zeros(1))])
  doubled = jax.tree.map(lambda x: x + 1, flat)
  assert doubled.paths == flat.paths and float(doubled.leaves[1][0]) == 1.0
  assert flat[1:].paths == (("b",),)


def test_pytree_children_round_trip():
  children, treedef = graphlib._flatten_pytree({"b": 1, "a": 2})
  assert children == [("a", 2), ("b", 1)]
  assert graphlib._unflatten_pytree(children, treedef) == {"a": 2, "b": 1}


def test_split_context_refers_to_earlier_objects():
  inner = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  outer = nnx.Module()
  outer.layer = inner
  with nnx.split_context() as ctx:
    g1, s1 = ctx.split(outer)
    g2, s2 = ctx.split(inner)
  assert isinstance(g1.nodes[0], graphlib.NodeDef)
  assert g2.nodes == [graphlib.NodeRef(1)] and len(s2) == 0 and len(nnx.to_flat_state(s1)) == 2
  with nnx.merge_context() as ctx:
    o = ctx.merge(g1, s1)
    i = ctx.merge(g2, s2)
  assert i is o.layer and o is not outer


def test_update_context_writes_structural_changes_back():
  m = nnx.Module()
  m.a = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  a = m.a

  @nnx.update_context("swap")
  def run():
    with nnx.split_context("swap") as ctx:
      graphdef, state = ctx.split(m)

    @jax.jit
    def f(graphdef, state):
      with nnx.merge_context("swap", True) as ctx:
        inner = ctx.merge(graphdef, state)
      inner.b = inner.a  # a new shared reference
      inner.a.bias.value = inner.a.bias.value + 1
      with nnx.split_context("swap") as ctx:
        return ctx.split(inner)

    graphdef, state = f(graphdef, state)
    with nnx.merge_context("swap", False) as ctx:
      return ctx.merge(graphdef, state)

  out = run()
  assert out is m and m.a is a and m.b is a
  assert float(a.bias.value[0]) == 1.0


def test_update_context_exited_twice_raises():
  ctx = nnx.update_context("x")
  with ctx:
    pass
  with pytest.raises(graphlib.UpdateContextError, match=r"update_context\('x'\) exited"):
    ctx.__exit__(None, None, None)


def test_graphlib_split_with_filters_of_a_value():
  x = jnp.array(1.0)
  graphdef, arrays, rest = graphlib.split(x, jax.Array, ..., graph=False)
  assert arrays is x and len(rest) == 0
  assert graphlib.merge(graphdef, arrays, rest) is x

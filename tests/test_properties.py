"""Round-trip laws of the graph engine, property-tested on random module graphs."""

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import all_paths, assert_trees_equal, graphs, same_graph
from nnx_eqx.testing._graphs import Counter

FILTER_POOL = [
  nnx.Param,
  nnx.BatchStat,
  nnx.Cache,
  Counter,
  nnx.Variable,
  nnx.Not(nnx.Param),
  nnx.All(nnx.Variable, nnx.Not(nnx.Cache)),
  nnx.Any(nnx.Intermediate, nnx.BatchStat),
  nnx.PathContains("m2"),
  nnx.buffers,
  "params",
  lambda path, value: len(path) > 2,
  None,
]


def _identities(node, variables: bool) -> set[int]:
  return {id(obj) for _, obj in all_paths(node) if isinstance(obj, nnx.Variable) == variables}


@given(graphs())
def test_split_merge_reproduces_structure_values_and_sharing(m):
  graphdef, state = nnx.split(m)
  m2 = nnx.merge(graphdef, state)
  assert same_graph(m2, m)
  assert not (_identities(m2, False) & _identities(m, False)), "merge must build new nodes"
  assert _identities(m2, True) == _identities(m, True), "merge keeps the State's Variables"
  assert nnx.graphdef(m2) == graphdef and hash(nnx.graphdef(m2)) == hash(graphdef)
  m3 = nnx.merge(graphdef, state, copy=True)
  assert same_graph(m3, m)
  assert not (_identities(m3, True) & _identities(m, True)), "copy=True makes new Variables"


@given(graphs(), st.lists(st.sampled_from(FILTER_POOL), max_size=4))
def test_exhaustive_filters_partition_the_state(m, filters):
  graphdef, *parts = nnx.split(m, *filters, ...)
  assert len(parts) == len(filters) + 1
  all_paths_ = set(nnx.state(m).to_flat_dict())
  seen: set = set()
  for part in parts:
    paths = set(part.to_flat_dict())
    assert not (paths & seen), "a leaf landed in two states"
    seen |= paths
  assert seen == all_paths_
  assert same_graph(nnx.merge(graphdef, *parts), m)


@given(graphs())
def test_pytree_flatten_unflatten_preserves_sharing(m):
  leaves, treedef = jax.tree_util.tree_flatten(m)
  assert len(leaves) == nnx.graphdef(m).num_leaves
  m2 = jax.tree_util.tree_unflatten(treedef, leaves)
  assert same_graph(m2, m)
  m3 = jax.tree.map(lambda x: x, m)
  assert same_graph(m3, m)


@given(graphs())
def test_state_is_a_pytree_and_pure_dict_round_trips(m):
  state = nnx.state(m)
  assert_trees_equal(jax.tree.map(lambda x: x, state), state)
  pure = state.to_pure_dict()
  fresh = nnx.state(nnx.clone(m))
  fresh.replace_by_pure_dict(pure)
  assert_trees_equal(fresh, state)


@given(graphs())
def test_update_writes_values_back(m):
  twin = nnx.clone(m)
  assert same_graph(twin, m)
  doubled = jax.tree.map(lambda x: x if x.dtype == np.bool_ else x + x, nnx.state(m))
  nnx.update(twin, doubled)
  assert_trees_equal(nnx.state(twin), doubled)
  nnx.update(twin, nnx.state(m))
  assert same_graph(twin, m)


@given(graphs(cycles=False))
def test_clone_is_independent(m):
  c = nnx.clone(m)
  assert same_graph(c, m)
  before = nnx.state(m)
  for _, v in nnx.iter_graph(c):
    if isinstance(v, nnx.Variable) and hasattr(v.value, "dtype") and v.value.size:
      v.value = jax.numpy.zeros_like(v.value)
  assert_trees_equal(nnx.state(m), before)


@settings(max_examples=40)
@given(graphs(dtypes=("float32", "int32")))
def test_jit_identity_changes_nothing_and_matches_eager(m):
  before = nnx.state(m)
  nnx.jit(lambda node: None)(m)
  assert_trees_equal(nnx.state(m), before)

  def double(node):
    for _, v in nnx.iter_graph(node):
      if isinstance(v, nnx.Variable):
        v.value = v.value + v.value

  eager = nnx.clone(m)
  double(eager)
  nnx.jit(double)(m)
  assert same_graph(m, eager)

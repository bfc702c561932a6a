"""find_duplicates, statelib.diff, replace_by_pure_dict, graphs without leaves."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx.testing import graphs, sharing_classes


def _at(node, path):
  for k in path:
    node = node[k] if isinstance(node, dict) or isinstance(k, int) else getattr(node, k)
  return node


@settings(max_examples=100)
@given(graphs())
def test_find_duplicates_groups_the_paths_of_each_shared_object(m):
  found = nnx.find_duplicates(m)
  objects = [_at(m, paths[0]) for paths in found]
  assert len({id(o) for o in objects}) == len(found)  # one group per object
  for obj, paths in zip(objects, found):
    assert nnx.is_node(obj) and len(set(paths)) == len(paths) > 1
    assert all(_at(m, p) is obj for p in paths)
  has_sharing = any(len(c) > 1 for c in sharing_classes(m))
  assert bool(found) == has_sharing


def test_find_duplicates_with_only():
  m = nnx.Module()
  m.a = nnx.Param(jnp.ones(1))
  m.b = m.a
  m.c = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  m.d = m.c
  assert nnx.find_duplicates(m) == [[("a",), ("b",)], [("c",), ("d",)]]
  assert nnx.find_duplicates(m, only=nnx.Param) == [[("a",), ("b",)]]
  assert nnx.find_duplicates(nnx.Linear(1, 1, rngs=nnx.Rngs(0))) == []


def test_state_diff_keeps_paths_the_other_lacks():
  small = nnx.state(nnx.List([nnx.Linear(2, 2, rngs=nnx.Rngs(0))]))
  big = nnx.state(nnx.List([nnx.Linear(2, 2, rngs=nnx.Rngs(1)) for _ in range(2)]))
  assert nnx.statelib.diff(small, big) == nnx.State({})
  assert sorted(nnx.statelib.diff(big, small).to_flat_dict()) == [(1, "bias"), (1, "kernel")]


def test_replace_by_pure_dict_matches_string_indices_and_keeps_variable_types():
  model = nnx.List([nnx.Linear(2, 3, rngs=nnx.Rngs(0))])
  state = nnx.state(model)
  pure = {str(k): v for k, v in nnx.to_pure_dict(state).items()}
  nnx.replace_by_pure_dict(state, jax.tree.map(jnp.zeros_like, pure))
  assert type(state[0]["kernel"]) is nnx.Param
  nnx.update(model, state)
  assert float(abs(model[0].kernel.value).sum()) == 0.0


def test_replace_by_pure_dict_with_replace_fn_and_unknown_key():
  state = nnx.State({"w": nnx.Param(jnp.ones(2))})
  nnx.replace_by_pure_dict(state, {"w": jnp.zeros(2)}, lambda cur, v: nnx.BatchStat(v))
  assert type(state["w"]) is nnx.BatchStat
  with pytest.raises(nnx.StateMismatchError, match=r"key path \('x',\) is not in the State"):
    nnx.replace_by_pure_dict(state, {"x": 1})


@pytest.mark.parametrize("empty", [{}, [], (1, "a")])
def test_a_container_without_leaves_is_a_graph_with_an_empty_state(empty):
  graphdef, state = nnx.split(empty)
  assert state == nnx.State({}) and graphdef.num_leaves == 0
  assert nnx.merge(graphdef, state) == empty


def test_pop_removes_leaves_from_plain_containers_only():
  node = {"a": {"b": jnp.array(1), "c": nnx.Param(jnp.array(2)), "d": jnp.array(3.0)}}
  popped = nnx.pop(node, (nnx.Param, lambda _, x: x < 2))
  assert sorted(popped["a"]) == ["b", "c"] and list(node["a"]) == ["d"]


def test_pop_from_a_list_attribute_keeps_the_other_items():
  m = nnx.Module()
  m.items = [nnx.Param(jnp.ones(1)), nnx.Intermediate(jnp.ones(1)), nnx.Intermediate(jnp.ones(2))]
  popped = nnx.pop(m, nnx.Intermediate)
  assert sorted(popped["items"]) == [1, 2]
  assert len(m.items) == 1 and type(m.items[0]) is nnx.Param


def test_pop_from_a_tuple_names_the_path():
  m = nnx.Module()
  m.t = (nnx.Param(jnp.ones(1)), nnx.Intermediate(jnp.ones(1)))
  with pytest.raises(nnx.GraphStructureError, match="Cannot remove t/1: its parent is a tuple"):
    nnx.pop(m, nnx.Intermediate)


def test_update_sets_values_inside_plain_dicts():
  node = {"a": {"b": 1, "c": nnx.Param(jnp.array(2)), "d": 3}}
  c = node["a"]["c"]
  nnx.update(node, {"a": {"b": 4, "c": jnp.array(10)}})
  assert node["a"]["b"] == 4 and node["a"]["d"] == 3
  assert node["a"]["c"] is c and int(c.value) == 10


def test_state_function_forms():
  s = nnx.State({"w": nnx.Param(jnp.ones(1)), "y": nnx.Intermediate(jnp.ones(1))})
  inter, rest = nnx.split_state(s, nnx.Intermediate, ...)
  assert list(inter) == ["y"] and list(rest) == ["w"]
  assert list(nnx.filter_state(s, nnx.Param)) == ["w"]
  assert nnx.merge_state(inter, rest) == s
  with pytest.raises(nnx.FilterError, match="not matched: w"):
    nnx.split_state(s, nnx.Intermediate)


def test_restored_string_indices_update_a_model():
  model = nnx.List([nnx.Linear(2, 2, rngs=nnx.Rngs(0)) for _ in range(2)])
  pure = nnx.to_pure_dict(nnx.state(model))
  as_saved = {str(k): jax.tree.map(jnp.zeros_like, v) for k, v in pure.items()}
  restored = nnx.restore_int_paths(as_saved)
  assert sorted(restored) == [0, 1]
  nnx.update(model, restored)
  assert float(abs(model[1].kernel.value).sum()) == 0.0


def test_display_prints_reprs(capsys):
  nnx.display(nnx.State({"a": 1}), 3)
  out = capsys.readouterr().out
  assert out.startswith("State({") and out.endswith("3\n")


class Counter(nnx.Module):
  def __init__(self):
    self.count = nnx.Param(jnp.zeros(()))

  def inc(self):
    self.count.value += 1
    return 1


def test_call_is_functional_and_jittable():
  graph_state = nnx.split(Counter())

  @jax.jit
  def update(gs: nnx.PureState[Counter]):
    out, gs = nnx.call(gs).inc()
    return out, gs

  out, graph_state = update(graph_state)
  _, graph_state = update(graph_state)
  assert int(out) == 1 and float(nnx.merge(*graph_state).count.value) == 2.0


def test_call_with_item_access_leaves_the_input_unchanged():
  graphdef, state = nnx.split({"a": Counter(), "b": Counter()})
  _, (graphdef2, state2) = nnx.call((graphdef, state))["b"].inc()
  assert graphdef2 == graphdef
  assert float(state["b"]["count"].value) == 0.0
  nodes = nnx.merge(graphdef2, state2)
  assert float(nodes["a"].count.value) == 0.0 and float(nodes["b"].count.value) == 1.0


def test_state_equals_a_plain_mapping_with_the_same_items():
  # as any Mapping (flax's State too): nested States compare against nested dicts
  p = nnx.Param(jnp.ones(2))
  state = nnx.State({"a": {"b": p}})
  assert nnx.State({}) == {}
  assert state == {"a": {"b": p}}
  assert state != {"a": {"c": p}}
  assert state != {"a": p}
  assert (state == 3) is False

"""split / merge / state / update / pop / clone / iteration on hand-built graphs."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(2, 3, rngs=rngs)
    self.stat = nnx.BatchStat(jnp.zeros(3))
    self.buffer = jnp.arange(3)
    self.name = "block"


class Tied(nnx.Module):
  def __init__(self, rngs):
    self.enc = nnx.Linear(3, 3, rngs=rngs)
    self.dec = self.enc
    self.w = self.enc.kernel


def test_split_paths_sorted_and_filters():
  m = Block(nnx.Rngs(0))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  assert list(params.to_flat_dict()) == [("linear", "bias"), ("linear", "kernel")]
  assert list(rest.to_flat_dict()) == [("buffer",), ("stat",)]
  assert isinstance(params.linear.kernel, nnx.Param)
  assert isinstance(rest.buffer, jax.Array)
  m2 = nnx.merge(graphdef, params, rest)
  assert m2.name == "block" and isinstance(m2.linear, nnx.Linear)
  assert_trees_equal(m2.linear.kernel.value, m.linear.kernel.value)


def test_shared_objects_emitted_once_and_restored():
  m = Tied(nnx.Rngs(0))
  graphdef, state = nnx.split(m)
  assert list(state.to_flat_dict()) == [("dec", "bias"), ("dec", "kernel")]
  m2 = nnx.merge(graphdef, state)
  assert m2.enc is m2.dec and m2.w is m2.enc.kernel


def test_cycles():
  a = nnx.Module()
  a.child = nnx.Module()
  a.child.parent = a
  a.child.v = nnx.Param(jnp.ones(2))
  graphdef, state = nnx.split(a)
  b = nnx.merge(graphdef, state)
  assert b.child.parent is b


def test_state_holds_the_graphs_variables_and_update_writes_back():
  m = Block(nnx.Rngs(0))
  s = nnx.state(m, nnx.Param)
  assert s.linear.bias is m.linear.bias  # as flax.nnx 0.12
  s.linear.bias.value = jnp.ones(3)
  assert float(m.linear.bias.value.sum()) == 3.0
  snapshot = nnx.clone(nnx.state(m, nnx.Param))
  assert snapshot.linear.bias is not m.linear.bias
  snapshot.linear.bias.value = jnp.full(3, 2.0)
  assert float(m.linear.bias.value.sum()) == 3.0
  nnx.update(m, snapshot)
  assert float(m.linear.bias.value.sum()) == 6.0


def test_seed_partition_and_get_state_are_snapshots():
  m = Block(nnx.Rngs(0))
  (params, _), _ = m.partition(nnx.Param, ...)
  for s in (params, m.get_state().linear, m.filter(nnx.Param)):
    bias = s["linear"]["bias"] if "linear" in s else s["bias"]
    assert bias is not m.linear.bias
  m.linear.bias.value = jnp.ones(3)
  assert float(params.linear.bias.value.sum()) == 0.0


def test_merge_keeps_the_states_variables_unless_copy():
  m = Block(nnx.Rngs(0))
  graphdef, state = nnx.split(m)
  m2 = nnx.merge(graphdef, state)  # as flax.nnx 0.12: new Modules, the State's Variables
  assert m2 is not m and m2.linear is not m.linear
  assert m2.linear.bias is m.linear.bias and m2.stat is m.stat
  m3 = nnx.merge(graphdef, state, copy=True)
  assert m3.linear.bias is not m.linear.bias
  assert_trees_equal(nnx.state(m3), nnx.state(m))
  m3.linear.bias.value = jnp.ones(3)
  assert float(m.linear.bias.value.sum()) == 0.0
  c = nnx.clone(m)
  assert c.linear.bias is not m.linear.bias


def test_update_adds_new_leaves_under_existing_parent():
  m = Block(nnx.Rngs(0))
  nnx.update(m, nnx.State({"linear": {"y": nnx.Intermediate(jnp.ones(1))}}))
  assert isinstance(m.linear.y, nnx.Intermediate)


def test_graphdef_equal_and_hashable_across_builds():
  a, b = Block(nnx.Rngs(0)), Block(nnx.Rngs(1))
  assert nnx.graphdef(a) == nnx.graphdef(b)
  assert hash(nnx.graphdef(a)) == hash(nnx.graphdef(b))
  b.name = "other"
  assert nnx.graphdef(a) != nnx.graphdef(b)


def test_graphdef_cache_invalidated_by_structural_change():
  m = Block(nnx.Rngs(0))
  g1 = nnx.graphdef(m)
  assert nnx.graphdef(m) is g1  # cached
  m.linear.extra = nnx.Param(jnp.zeros(1))
  g2 = nnx.graphdef(m)
  assert g2 != g1 and ("linear", "extra") in g2.paths
  m.linear.kernel.value = jnp.zeros((2, 3))  # a value change keeps the cache
  assert nnx.graphdef(m) is g2
  m.buffer = jnp.zeros(3)  # array replaced by array: values only
  assert nnx.graphdef(m) is g2
  assert_trees_equal(nnx.state(m).buffer, jnp.zeros(3))


def test_list_mutation_invalidates_cache():
  m = nnx.Module()
  m.layers = [nnx.Linear(1, 1, rngs=nnx.Rngs(0))]
  assert isinstance(m.layers, nnx.List)
  n1 = nnx.graphdef(m).num_leaves
  m.layers.append(nnx.Linear(1, 1, rngs=nnx.Rngs(1)))
  assert nnx.graphdef(m).num_leaves == n1 + 2
  assert list(nnx.state(m).to_flat_dict())[-1] == ("layers", 1, "kernel")


def test_pop_removes_and_returns():
  m = Block(nnx.Rngs(0))
  m.linear.sow(nnx.Intermediate, "y", jnp.ones(3))
  popped = nnx.pop(m, nnx.Intermediate)
  assert list(popped.to_flat_dict()) == [("linear", "y")]
  assert not hasattr(m.linear, "y")
  assert nnx.state(m, nnx.Intermediate) == nnx.State({})


def test_clone_deep_copies_with_sharing():
  m = Tied(nnx.Rngs(0))
  c = nnx.clone(m)
  assert c.enc is c.dec and c.enc is not m.enc
  c.enc.kernel.value = c.enc.kernel.value * 0
  assert float(jnp.abs(m.enc.kernel.value).sum()) > 0


def test_iter_graph_and_modules():
  m = Tied(nnx.Rngs(0))
  paths = [p for p, _ in nnx.iter_graph(m)]
  assert paths == [("dec", "bias"), ("dec", "kernel"), ("dec",), ()]  # children first
  assert [p for p, _ in nnx.iter_modules(m)] == [("dec",), ()]


def test_tuple_and_dict_attributes_are_walked():
  m = nnx.Module()
  m.pair = (nnx.Param(jnp.ones(1)), 3)
  m.table = {"a": nnx.Linear(1, 1, rngs=nnx.Rngs(0))}
  assert isinstance(m.table, nnx.Dict)
  flat = list(nnx.state(m).to_flat_dict())
  assert flat == [("pair", 0), ("table", "a", "bias"), ("table", "a", "kernel")]
  m2 = nnx.merge(*nnx.split(m))
  assert isinstance(m2.pair, tuple) and m2.pair[1] == 3


def test_raw_array_inside_tuple_written_back_by_update():
  m = nnx.Module()
  m.pair = (jnp.zeros(2), "static")
  nnx.update(m, nnx.State({"pair": {0: jnp.ones(2)}}))
  assert_trees_equal(m.pair[0], jnp.ones(2))
  assert m.pair[1] == "static"


def test_variables_returns_live_references():
  m = Block(nnx.Rngs(0))
  v = nnx.variables(m, nnx.BatchStat)
  assert v.stat is m.stat


def test_deep_nesting_has_no_recursion_error():
  root = cur = nnx.Module()
  for _ in range(1000):
    cur.child = nnx.Module()
    cur = cur.child
  cur.w = nnx.Param(jnp.ones(1))
  graphdef, state = nnx.split(root)
  assert graphdef.num_leaves == 1
  root2 = nnx.merge(graphdef, state)
  assert len(nnx.state(root2).flat_state()) == 1
  # as a JAX pytree it would nest 1,000 levels: refused before JAX overflows
  with pytest.raises(nnx.PytreeDepthError, match="nnx.split"):
    jax.tree.leaves(root2)


def test_modules_are_pytrees_with_key_paths():
  m = Tied(nnx.Rngs(0))
  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(m)[0]]
  assert paths == [".dec.bias.value", ".dec.kernel.value"]
  m2 = jax.tree.map(lambda x: x + 1, m)
  assert m2.enc is m2.dec
  assert_trees_equal(m2.enc.bias.value, jnp.ones(3))


def test_merge_reads_states_of_any_split_and_reports_mismatches():
  m = Block(nnx.Rngs(0))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  again = nnx.merge(graphdef, rest, params)  # order of the States does not matter
  assert nnx.graphdef(again) == graphdef
  flat = params.to_flat_dict()
  some = next(iter(flat))
  # the same path twice: the later State wins, as for a flat update
  override = nnx.State.from_flat_path({some: nnx.Param(flat[some].value * 0)})
  merged = nnx.merge(graphdef, params, rest, override)
  assert float(abs(nnx.state(merged).to_flat_dict()[some].value).sum()) == 0.0
  plain = {k: v for k, v in params.items()}  # plain dicts of States are accepted
  assert nnx.graphdef(nnx.merge(graphdef, plain, rest)) == graphdef
  with pytest.raises(nnx.StateMismatchError, match="missing paths: "):
    nnx.merge(graphdef, params)
  extra = nnx.State.from_flat_path({("nope",): nnx.Param(jnp.ones(1))})
  with pytest.raises(nnx.StateMismatchError, match="unexpected paths: nope"):
    nnx.merge(graphdef, params, rest, extra)


def test_clone_arrays_copies_buffers_and_keeps_values_and_sharing():
  m = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
  m.tied = m.kernel
  same, fresh = nnx.clone(m), nnx.clone(m, arrays=True)
  assert same.kernel[...] is m.kernel[...]
  assert fresh.kernel[...] is not m.kernel[...] and fresh.tied is fresh.kernel
  assert (fresh.kernel[...] == m.kernel[...]).all()
  state = nnx.clone(nnx.state(m), arrays=True)
  assert state["kernel"][...] is not m.kernel[...]

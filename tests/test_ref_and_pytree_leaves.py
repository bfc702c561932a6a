"""Raw ``jax.Ref`` attributes and other registered JAX pytrees in the graph walk
(as flax.nnx 0.12): a Ref is a state leaf known by identity, a pytree (a
``register_dataclass`` class, an Equinox module, an ``OrderedDict``) is a
container whose Variables and arrays are part of the State."""

import collections
import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx import graphlib
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal, graphs


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Pair:
  left: Any
  right: Any
  name: str = dataclasses.field(default="pair", metadata=dict(static=True))


def _ref_module():
  m = nnx.Module()
  m.a = jax.new_ref(jnp.array(1.0))
  m.b = m.a
  m.w = nnx.Param(jnp.array(2.0))
  return m


# --------------------------------------------------------------------------
# raw jax.Ref attributes
# --------------------------------------------------------------------------
def test_raw_ref_is_one_leaf_known_by_identity():
  m = _ref_module()
  refs = graphlib.RefMap()
  graphdef, flat = graphlib.flatten(m, ref_index=refs)
  assert [p for p, _ in flat] == [("a",), ("w",)]
  assert flat[0][1] is m.a and refs[m.a] == 1 and len(refs) == 3  # Module, Ref, Param
  m2 = nnx.merge(*nnx.split(m))
  assert m2 is not m and m2.a is m2.b and m2.a is m.a  # the State holds the Ref itself


def test_raw_ref_shared_between_modules_stays_shared():
  r = jax.new_ref(jnp.zeros(2))
  root = nnx.Module()
  root.x, root.y = nnx.Module(), nnx.Module()
  root.x.r, root.y.r = r, r
  graphdef, state = nnx.split(root)
  assert list(state.flat_state().paths) == [("x", "r")]
  out = nnx.merge(graphdef, state)
  assert out.x.r is out.y.r is r
  assert graphdef == nnx.graphdef(nnx.merge(graphdef, state))


def test_tree_mode_rejects_a_shared_raw_ref():
  with pytest.raises(nnx.SharedReferenceError, match="found at paths a and b"):
    nnx.split(_ref_module(), graph=False)


def test_refmap_numbers_the_refs_of_ref_mode_variables_after_the_nodes():
  m = nnx.Module()
  m.a = nnx.Param(jnp.array(1.0), ref=True)
  m.b = nnx.Param(jnp.array(2.0), ref=True)
  m.c = m.a
  refs = graphlib.RefMap()
  graphdef, flat = graphlib.flatten(m, ref_index=refs)
  assert len(flat) == 2 and len(refs) == 5  # Module, two Params, their two Refs
  assert refs[m.a.get_raw_value()] == 3 and refs[m.b.get_raw_value()] == 4
  index = graphlib.IndexMap()
  out = graphlib.unflatten(graphdef, flat, index_ref=index)
  assert index[3] is out.a.get_raw_value() and out.a is out.c and len(index) == 5


def test_ref_shared_by_two_variables_and_an_attribute_stays_shared_after_merge():
  r = jax.new_ref(jnp.array(1.0))
  m = nnx.Module()
  m.p, m.q, m.raw = nnx.Param(r), nnx.BatchStat(r), r
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  out = nnx.merge(graphdef, params, rest)
  assert out.p.get_raw_value() is out.q.get_raw_value() is out.raw is r
  assert isinstance(out.q, nnx.BatchStat)


def test_raw_ref_updated_in_place_by_nnx_jit_without_retracing():
  m = _ref_module()
  counter = TraceCounter()

  @nnx.jit
  @counter
  def step(m, x):
    m.a[...] += x
    return m.w * m.b[...]

  out = step(m, jnp.array(1.0))
  with assert_no_retrace(counter):
    step(m, jnp.array(1.0))
  assert_trees_equal((out, m.a[...]), (jnp.array(4.0), jnp.array(3.0)))
  assert m.a is m.b and isinstance(m.a, jax.Ref)


def test_raw_ref_made_inside_nnx_jit_reaches_the_caller_as_a_ref():
  m = nnx.Module()

  @nnx.jit
  def build(m):
    m.r = jax.new_ref(jnp.array(5.0))

  build(m)
  assert isinstance(m.r, jax.Ref) and float(m.r[...]) == 5.0


def test_raw_ref_traced_by_jax_jit_is_still_a_shared_leaf():
  m = _ref_module()
  seen = []

  @jax.jit
  def f(m):
    graphdef, state = nnx.split(m)
    seen.append(list(state.flat_state().paths))
    out = nnx.merge(graphdef, state)
    assert out.a is out.b
    out.a[...] += 1.0

  f(m)
  m2 = _ref_module()
  f(m2)  # the same structure: no retrace
  assert seen == [[("a",), ("w",)]] and float(m.a[...]) == float(m2.a[...]) == 2.0


def test_module_with_a_shared_raw_ref_flattens_it_once_for_jax_jit():
  m = _ref_module()
  assert jax.tree.leaves(m) == [m.a, m.w[...]]
  assert float(jax.jit(lambda m: m.a[...] + m.b[...])(m)) == 2.0


# --------------------------------------------------------------------------
# registered JAX pytrees
# --------------------------------------------------------------------------
def _pair_module():
  m = nnx.Module()
  m.pair = nnx.data(Pair(nnx.Param(jnp.array(1.0)), jnp.array(2.0), "p"))
  return m


def test_registered_dataclass_held_as_data_is_traversed():
  m = _pair_module()
  graphdef, state = nnx.split(m)
  assert set(state["pair"]) == {"left", "right"}
  assert isinstance(state["pair"]["left"], nnx.Param)
  m2 = nnx.merge(graphdef, state)
  assert type(m2.pair) is Pair and m2.pair.name == "p" and m2.pair is not m.pair
  assert_trees_equal((m2.pair.left[...], m2.pair.right), (jnp.array(1.0), jnp.array(2.0)))
  assert nnx.graphdef(_pair_module()) == graphdef
  assert hash(nnx.graphdef(_pair_module())) == hash(graphdef)


def test_tree_mode_flatten_of_a_registered_dataclass_sorts_its_keys():
  graphdef, flat = graphlib.flatten(Pair(nnx.Param(jnp.array(1.0)), jnp.array(2.0)), graph=False)
  assert [p for p, _ in flat] == [("left",), ("right",)]
  out = graphlib.unflatten(graphdef, flat)
  assert type(out) is Pair and isinstance(out.left, nnx.Param)


def test_update_writes_a_raw_array_inside_an_immutable_pytree():
  m = _pair_module()
  state = nnx.state(m)
  state["pair"]["right"] = jnp.array(10.0)
  nnx.update(m, state)
  assert type(m.pair) is Pair and m.pair.name == "p"
  assert_trees_equal(m.pair.right, jnp.array(10.0))


def test_pytree_contents_updated_by_nnx_jit_without_retracing():
  m = _pair_module()
  counter = TraceCounter()

  @nnx.jit
  @counter
  def step(m):
    m.pair.left[...] += 1.0
    m.pair = Pair(m.pair.left, m.pair.right * 2, m.pair.name)

  step(m)
  with assert_no_retrace(counter):
    step(m)
  assert_trees_equal((m.pair.left[...], m.pair.right), (jnp.array(3.0), jnp.array(8.0)))


def test_grad_reaches_a_param_inside_a_pytree():
  m = _pair_module()
  grads = nnx.grad(lambda m: m.pair.left[...] * m.pair.right)(m)
  assert_trees_equal(grads["pair"]["left"][...], jnp.array(2.0))


def test_pytree_without_arrays_stays_static():
  m = nnx.Module()
  m.pair = nnx.data(Pair("a", 1))
  graphdef, state = nnx.split(m)
  assert not state.flat_state() and nnx.merge(graphdef, state).pair == Pair("a", 1)


def test_ordered_dict_and_equinox_module_are_traversed():
  m = nnx.Module()
  m.od = nnx.data(collections.OrderedDict(b=jnp.ones(1), a=nnx.Param(jnp.zeros(1))))
  m.lin = nnx.data(eqx.nn.Linear(2, 3, key=jax.random.key(0)))
  graphdef, state = nnx.split(m)
  assert sorted(state.flat_state().paths) == [
    ("lin", "bias"),
    ("lin", "weight"),
    ("od", "a"),
    ("od", "b"),
  ]
  m2 = nnx.merge(graphdef, state)
  assert type(m2.od) is collections.OrderedDict and list(m2.od) == ["b", "a"]
  assert type(m2.lin) is eqx.nn.Linear
  x = jnp.ones(2)
  assert_trees_equal(m2.lin(x), m.lin(x))


def test_is_pytree_node_follows_flax():
  assert graphlib.is_pytree_node(Pair(1, 2)) and graphlib.is_pytree_node(None)
  assert not graphlib.is_pytree_node(nnx.Module()) and not graphlib.is_pytree_node(jnp.ones(1))
  assert not graphlib.is_pytree_node(nnx.Param(1.0)) and not graphlib.is_pytree_node("x")


# --------------------------------------------------------------------------
# round-trip law
# --------------------------------------------------------------------------
@st.composite
def _graphs_with_refs_and_pytrees(draw):
  g = draw(graphs(max_modules=3, max_variables=3))
  modules = _modules(g)
  refs = [jax.new_ref(jnp.full((2,), float(i))) for i in range(draw(st.integers(0, 2)))]
  for i, r in enumerate(refs):
    for j in range(draw(st.integers(1, 2))):  # a second place shares the Ref
      setattr(modules[draw(st.integers(0, len(modules) - 1))], f"ref{i}_{j}", r)
  if draw(st.booleans()):
    pair = Pair(nnx.Param(jnp.arange(3.0)), jnp.ones(2), draw(st.sampled_from(["x", "y"])))
    setattr(modules[draw(st.integers(0, len(modules) - 1))], "pair", nnx.data(pair))
  return g


def _modules(g) -> list:
  return [m for _, m in nnx.iter_modules(g) if not isinstance(m, nnx.List)]


def _ref_places(g) -> dict:
  flat = graphlib.flatten(g)[1]
  return {p: v for p, v in flat if isinstance(v, jax.Ref)}


@given(_graphs_with_refs_and_pytrees())
def test_split_merge_round_trip_keeps_refs_and_pytrees(g):
  graphdef, state = nnx.split(g)
  out = nnx.merge(graphdef, state)
  assert nnx.graphdef(out) == graphdef
  assert _ref_places(out) == _ref_places(g)  # the same Ref objects, at the same first paths
  groups = lambda x: sorted(sorted(k for k, v in vars(x).items() if v is r) for r in _refs_of(x))
  for a, b in zip(_modules(g), _modules(out), strict=True):
    assert groups(a) == groups(b)
    if "pair" in vars(a):
      assert type(b.pair) is Pair and b.pair.name == a.pair.name
      assert_trees_equal((b.pair.left[...], b.pair.right), (a.pair.left[...], a.pair.right))
  leaves = lambda x: [v for _, v in graphlib.flatten(x)[1] if not isinstance(v, jax.Ref)]
  assert_trees_equal(leaves(out), leaves(g))


def _refs_of(module) -> list:
  seen: dict[int, Any] = {}
  for v in vars(module).values():
    if isinstance(v, jax.Ref):
      seen.setdefault(id(v), v)
  return list(seen.values())

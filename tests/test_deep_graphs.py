"""Graph work at any depth: 10,000-deep chains of Modules and nested containers
under Python's default recursion limit (explicit stacks, no setrecursionlimit)."""

import sys

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal, same_graph

DEEP = 10_000
COMPILED = 2_000
"""Depth for cases that compile a program with a leaf per level: XLA's compile
time, not the graph engine, dominates there."""


class Link(nnx.Module):
  pass


def chain(depth: int, every: int = 100) -> Link:
  """A chain of ``depth`` Modules, ``next`` to ``next``; a Param every ``every`` levels
  (and at the end), plus a static attribute on each."""
  root = cur = Link()
  for i in range(depth):
    cur.name = f"l{i % 3}"
    if i % every == 0:
      cur.w = nnx.Param(jnp.full((), i, jnp.float32))
    cur.next = cur = Link()
  cur.w = nnx.Param(jnp.ones(()))
  return root


def nested(depth: int) -> Link:
  """A Module holding lists and dicts nested ``depth`` deep, Variables at the bottom."""
  x: object = [nnx.Param(jnp.ones(2)), nnx.BatchStat(jnp.zeros(()))]
  for i in range(depth):
    x = [x, i] if i % 2 else {"a": x, "b": "static"}
  m = Link()
  m.deep = x
  return m


MAKERS = [pytest.param(chain, id="chain"), pytest.param(nested, id="nested")]


@pytest.fixture(autouse=True)
def _default_recursion_limit():
  assert sys.getrecursionlimit() <= 1000
  yield
  assert sys.getrecursionlimit() <= 1000  # nothing raised it


@pytest.mark.parametrize("make", MAKERS)
def test_split_merge_state_update_graphdef(make):
  m = make(DEEP)
  graphdef, state = nnx.split(m)
  other = nnx.graphdef(make(DEEP))
  assert other == graphdef and hash(other) == hash(graphdef)
  assert "GraphDef(" in repr(graphdef)
  m2 = nnx.merge(graphdef, state)
  assert same_graph(m2, m)
  # (jax.tree itself recurses through nested States, so stay flat here)
  flat = {p: v.replace(v.value * 2) for p, v in state.to_flat_dict().items()}
  nnx.update(m, nnx.State.from_flat_path(flat))
  assert_trees_equal(list(nnx.state(m).to_flat_dict().values()), list(flat.values()))
  assert same_graph(nnx.clone(m), m)


def test_chain_shares_and_cycles_at_depth():
  m = chain(DEEP)
  cur = m
  while hasattr(cur, "next"):
    cur = cur.next
  cur.back = m  # a cycle through the whole chain
  cur.tied = m.w  # a Variable shared between both ends
  m2 = nnx.merge(*nnx.split(m))
  cur2 = m2
  while hasattr(cur2, "next"):
    cur2 = cur2.next
  assert cur2.back is m2 and cur2.tied is m2.w


@pytest.mark.parametrize("make", MAKERS)
def test_pytree_and_tree_mode(make):
  m = make(DEEP)
  # A Module is a nested JAX pytree, and JAX's pytree functions recurse per level:
  # refused with the fix named, before JAX overflows (which can break the process).
  with pytest.raises(nnx.PytreeDepthError, match="nnx.split"):
    jax.tree.flatten(m)
  graphdef, state = nnx.split(m, graph=False)
  assert same_graph(nnx.merge(graphdef, state), m)


@pytest.mark.parametrize("make", MAKERS)
def test_jit_grad_vmap(make):
  m = make(COMPILED)
  counter = TraceCounter()

  @nnx.jit
  @counter
  def total(m):
    # (flat: jax.tree itself recurses through a deeply nested State)
    return sum(jnp.sum(v.value) for v in nnx.state(m, nnx.Param).to_flat_dict().values())

  want = total(m)
  with assert_no_retrace(counter):
    assert_trees_equal(total(m), want)
  grads = nnx.grad(lambda m: total(m))(m)
  assert all(jnp.all(g.value == 1) for g in grads.to_flat_dict().values())
  out = nnx.vmap(lambda m, x: x * 2, in_axes=(None, 0))(m, jnp.arange(3.0))
  assert_trees_equal(out, jnp.arange(3.0) * 2)


@pytest.mark.parametrize("make", MAKERS)
def test_pickle_graphdef_and_flat_state(make):
  import pickle

  m = make(DEEP)
  graphdef, state = nnx.split(m)
  g2, flat = pickle.loads(pickle.dumps((graphdef, state.flat_state())))
  assert g2 == graphdef and hash(g2) == hash(graphdef)
  assert same_graph(nnx.merge(g2, nnx.State.from_flat_path(flat)), m)


# --------------------------------------------------------------------------
# The Equinox bridge and checkpoints
# --------------------------------------------------------------------------
def _eqx_depth_and_arrays(tree) -> tuple[int, int]:
  """The nesting depth and array count of an Equinox pytree, one level at a time
  (jax.tree itself recurses, and overflows beyond about 900 levels)."""
  deepest, arrays = 0, 0
  todo = [(tree, 0)]
  while todo:
    x, d = todo.pop()
    deepest = max(deepest, d)
    if isinstance(x, jax.Array):
      arrays += 1
      continue
    kids, treedef = jax.tree_util.tree_flatten(x, is_leaf=lambda y, x=x: y is not x)
    if not jax.tree_util.treedef_is_leaf(treedef):
      todo.extend((k, d + 1) for k in kids)
  return deepest, arrays


def _values(m) -> list:
  return [v.value for v in nnx.state(m).to_flat_dict().values()]


@pytest.mark.parametrize("make", MAKERS)
def test_to_eqx_from_eqx(make):
  m = make(DEEP)
  e, eqx_state = nnx.to_eqx_with_state(m)
  depth, arrays = _eqx_depth_and_arrays(e)
  n_params = DEEP // 100 + 1 if make is chain else 1  # (BatchStats are in eqx_state)
  assert depth > DEEP and arrays == n_params
  if make is chain:
    assert nnx.to_eqx(m).next.next.name == "l2"
    cur, mcur, links = e, m, 0
    while hasattr(cur, "next"):
      cur, mcur, links = cur.next, mcur.next, links + 1
    assert links == DEEP and cur.w is mcur.w.value  # arrays are shared, not copied
  back = nnx.from_eqx(e, eqx_state)
  assert same_graph(back, m)  # (types, metadata, sharing, bitwise equal values)


def test_to_eqx_cycle_at_depth():
  m = chain(DEEP)
  cur = m
  while hasattr(cur, "next"):
    cur = cur.next
  cur.back = m
  with pytest.raises(nnx.bridge.CycleError, match=r"\.back refers back to its ancestor root"):
    nnx.to_eqx(m)


@pytest.mark.parametrize("make", MAKERS)
def test_checkpoint_save_restore(make, tmp_path):
  m = make(DEEP)
  flat = {p: v.replace(v.value * 2 + 1) for p, v in nnx.state(m).to_flat_dict().items()}
  nnx.update(m, nnx.State.from_flat_path(flat))
  path = nnx.checkpoint.save(tmp_path / "ckpt", m)
  target = make(DEEP)
  assert nnx.checkpoint.restore(path, target) is target
  assert_trees_equal(_values(target), [v.value for v in flat.values()])
  raw = nnx.checkpoint.restore(path)  # the nested dict, as for a shallow checkpoint
  for name, v in flat.items():
    d = raw
    for k in name:
      d = d[str(k)]
    assert_trees_equal(d, v.value)
  (path / "_CHECKPOINT_METADATA").unlink()  # holds the names of the flat layout
  with pytest.raises(nnx.CheckpointCorruptError, match="_CHECKPOINT_METADATA"):
    nnx.checkpoint.restore(path, make(DEEP))


def test_shallow_checkpoint_keeps_the_nested_layout(tmp_path):
  import orbax.checkpoint as ocp

  shallow, deep = chain(50), chain(200)
  for name, m in (("shallow", shallow), ("deep", deep)):
    nnx.checkpoint.save(tmp_path / name, m)
  handler = ocp.StandardCheckpointHandler()
  try:
    assert set(handler.metadata(tmp_path / "shallow").tree) == {"next", "w"}
    assert set(handler.metadata(tmp_path / "deep").tree) == {"0", "1", "2"}
  finally:
    handler.close()
  target = chain(50)
  nnx.checkpoint.restore(tmp_path / "shallow", target)
  assert_trees_equal(_values(target), _values(shallow))


def test_bridge_ties_and_state_below_the_recursive_levels():
  """Modules past the 40 levels converted by plain recursion go bottom-up; a Variable
  tied across the whole chain and a BatchStat at its end survive the round trip (120
  levels: deep enough for that, shallow enough for eqx.tree_at, which recurses)."""
  m = chain(120, every=7)
  cur = m
  while hasattr(cur, "next"):
    cur = cur.next
  cur.tied, cur.stat = m.w, nnx.BatchStat(jnp.zeros(3))
  e, eqx_state = nnx.to_eqx_with_state(m)
  assert type(e) is nnx.bridge.SharedRoot
  back = nnx.from_eqx(e, eqx_state)
  assert same_graph(back, m)
  end = back
  while hasattr(end, "next"):
    end = end.next
  assert end.tied is back.w


@pytest.mark.parametrize("make", MAKERS)
def test_repr_and_treescope_bounded_at_depth(make):
  treescope = pytest.importorskip("treescope")
  m = make(DEEP)
  graphdef, state = nnx.split(m)
  text = repr(m)
  assert text.startswith("Link(") and "(...)" in text and len(text) < 100_000
  text = repr(state)
  assert text.startswith("State({") and "State({...})" in text
  assert len(text) < 100_000  # elided past STATE_DEPTH, not 10,000 levels of indentation
  for obj in (m, graphdef, state):
    assert "(...)" in treescope.render_to_text(obj) or "<...>" in treescope.render_to_text(obj)
  nnx.display(state)


def test_deep_static_value_is_hashed_and_compared_at_depth():
  def config(depth):
    x: object = [1]
    for i in range(depth):
      x = [x, i] if i % 2 else {"a": x, "b": "static"}
    return x

  def holder(cfg):
    m = Link()
    m.cfg, m.w = cfg, nnx.Param(jnp.ones(()))
    return m

  graphdef, state = nnx.split(holder(config(DEEP)))
  same, other = nnx.graphdef(holder(config(DEEP))), nnx.graphdef(holder(config(DEEP - 1)))
  assert same == graphdef and hash(same) == hash(graphdef)
  assert other != graphdef
  assert nnx.graphdef(nnx.merge(graphdef, state)) == graphdef


@pytest.mark.parametrize("make", MAKERS)
def test_map_strips_variables_at_depth(make):
  m = make(DEEP)
  doubled = nnx.map(lambda path, v: v.value * 2, m)
  leaves = [getattr(v, "value", v) for v in nnx.state(doubled).to_flat_dict().values()]
  want = [v.value * 2 for v in nnx.state(m).to_flat_dict().values()]
  assert_trees_equal(leaves, want)


@pytest.mark.parametrize("make", MAKERS)
def test_recursive_map_and_iteration_at_depth(make):
  m = make(DEEP)
  seen = []

  def f(path, x):
    seen.append(len(path))
    return x

  copy = nnx.recursive_map(f, m)
  assert same_graph(copy, m) and copy is not m and max(seen) >= DEEP
  paths = [p for p, _ in nnx.graph.iter_graph(m)]
  assert max(map(len, paths)) >= DEEP and paths[-1] == ()  # children before their parent
  assert [k for k, _ in nnx.iter_module_children(m)] == ["next" if make is chain else "deep"]
  modules = [p for p, _ in nnx.iter_modules(m)]  # children first, as flax.nnx
  if make is chain:
    assert modules[-1] == () and len(modules) > DEEP and len(modules[0]) >= DEEP
  else:  # lists and dicts (nnx.List/nnx.Dict here) are not Modules in flax.nnx
    assert modules == [()]

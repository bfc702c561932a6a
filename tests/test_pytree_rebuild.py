"""Modules rebuilt by pytree operations (``jax.tree.map``, ``eqx.filter``,
``eqx.partition``/``combine``, ``eqx.apply_updates``, ``eqx.filter_jit``
outputs) are exact graphs: same structure and sharing as a fresh walk would
find, unchanged by re-flattening, invalidated by structural changes, freed
when dropped, and an Equinox-style training loop over them never retraces.
"""

from __future__ import annotations

import copy
import gc
import pickle
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx.graph import _version
from nnx_eqx.graph.api import _functional as _graph
from nnx_eqx.testing import (
  TraceCounter,
  assert_trees_close,
  assert_trees_equal,
  graphs,
  same_graph,
)


def _fresh(node):
  """Leaves and structure of ``node`` flattened with every record discarded."""
  _version.bump()  # records are valid for one structural version
  leaves, treedef = jax.tree.flatten(node)
  assert _graph.walk_uncached(node).leaves().__len__() == len(leaves)
  return leaves, treedef


def _check_flatten_is_fresh(node) -> None:
  leaves, treedef = jax.tree.flatten(node)  # from the records (a rebuilt graph's own)
  fresh_leaves, fresh_treedef = _fresh(node)
  assert treedef == fresh_treedef
  assert_trees_equal(leaves, fresh_leaves)


@given(graphs())
@settings(deadline=None)
def test_rebuilt_graph_is_the_same_graph_and_flattens_as_a_fresh_walk(m):
  once = jax.tree.map(lambda x: x, m)
  twice = jax.tree.map(lambda x: x, once)  # rebuilt from a rebuilt graph
  assert same_graph(once, m)
  assert same_graph(twice, m)
  _check_flatten_is_fresh(once)
  _check_flatten_is_fresh(twice)


@given(graphs())
@settings(deadline=None)
def test_partition_combine_and_filter_keep_graph_and_sharing(m):
  params, rest = eqx.partition(m, eqx.is_inexact_array)
  assert same_graph(eqx.combine(params, rest), m)
  kept = eqx.filter(m, eqx.is_inexact_array)
  assert same_graph(eqx.combine(kept, eqx.filter(m, eqx.is_inexact_array, inverse=True)), m)
  # filtered-out leaves are None leaves of the same structure, as in Equinox
  is_none = lambda x: x is None  # noqa: E731
  assert jax.tree.structure(kept, is_leaf=is_none) == jax.tree.structure(m)


class _Shared(nnx.Module):
  def __init__(self):
    rngs = nnx.Rngs(0)
    self.a = nnx.Linear(2, 2, rngs=rngs)
    self.b = self.a  # a shared submodule
    self.w = self.a.kernel  # a Variable shared with it
    self.count = nnx.BatchStat(jnp.array(0))  # an integer leaf
    self.raw = jnp.ones(2)  # a raw array attribute


def test_sharing_survives_filter_apply_updates_and_filter_jit():
  m = _Shared()
  grads = jax.tree.map(jnp.ones_like, eqx.filter(m, eqx.is_inexact_array))
  assert grads.count.value is None  # eqx.filter's None leaf, kept as a Variable's value
  new = eqx.apply_updates(m, grads)
  for out in (grads, new, eqx.filter_jit(lambda x: x)(new)):
    assert out.b is out.a and out.w is out.a.kernel
  assert_trees_equal(new.a.kernel.value, m.a.kernel.value + 1)
  assert_trees_equal(new.raw, m.raw + 1)
  assert_trees_equal(new.count.value, m.count.value)  # an int leaf: not updated


def test_rebuilt_module_sees_value_changes():
  r = jax.tree.map(lambda x: x, _Shared())
  r.a.bias.value = jnp.full(2, 7.0)
  r.raw = jnp.zeros(2)  # an array swap (not a structural change)
  assert_trees_equal(jax.tree.leaves(r), _fresh(r)[0])


def _add_param(r):
  r.a.extra = nnx.Param(jnp.ones(3))


def _retag(r):
  r.a.kernel.set_metadata(tag="x")


def _unshare(r):
  r.b = nnx.Linear(2, 2, rngs=nnx.Rngs(1))


@pytest.mark.parametrize("change", [_add_param, _retag, _unshare])
def test_structural_change_to_a_rebuilt_module_is_seen_by_the_next_flatten(change):
  r = jax.tree.map(lambda x: x, _Shared())
  before = jax.tree.structure(r)  # from the rebuilt graph's record, no walk
  change(r)  # nothing has walked r: the rebuild itself marked its nodes
  assert jax.tree.structure(r) != before
  _check_flatten_is_fresh(r)


class _Tagged(nnx.Module):
  def __init__(self):
    self.plain = nnx.Param(jnp.ones(2))  # no metadata
    self.tagged = nnx.Param(jnp.ones(2), tag="t")


_DEFAULT_MD = {"hijax": False, "ref": False, "eager_sharding": True}


def test_rebuilt_variables_metadata_is_their_own():
  m = _Tagged()
  r1, r2 = jax.tree.map(lambda x: x, m), jax.tree.map(lambda x: x, m)
  assert r1.plain.get_metadata() == _DEFAULT_MD and r1.plain.metadata == {}
  assert r1.tagged.get_metadata() == {"tag": "t", **_DEFAULT_MD}
  with pytest.raises(AttributeError, match="tag"):
    _ = r1.plain.tag
  r1.plain.tag = "a"  # attribute assignment
  r1.tagged.set_metadata("tag", "b")
  r2.plain.set_metadata(other=1)
  assert r1.plain.metadata == {"tag": "a"} and r1.tagged.tag == "b"
  assert r2.plain.metadata == {"other": 1} and r2.tagged.tag == "t"
  assert m.plain.metadata == {} and m.tagged.tag == "t"
  r3 = jax.tree.map(lambda x: x, m)  # the next rebuild starts from the GraphDef's metadata
  assert r3.plain.metadata == {} and r3.tagged.tag == "t"
  c = r3.plain.copy()
  c.tag = "c"
  assert r3.plain.metadata == {} and c.tag == "c"
  for back in (pickle.loads(pickle.dumps(r3)), copy.deepcopy(r3)):
    assert back.plain.metadata == {} and back.tagged.tag == "t"
    assert same_graph(back, m)
    _check_flatten_is_fresh(back)


def test_rebuilt_graph_is_freed_when_dropped_without_garbage_collection():
  m = nnx.from_eqx(eqx.nn.MLP(3, 3, 4, 2, key=jax.random.key(0)))
  gc.disable()
  try:
    r = jax.tree.map(lambda x: x, m)
    layer = weakref.ref(r.layers[0])
    del r
    assert layer() is None
  finally:
    gc.enable()


def test_structures_are_equal_per_graph_structure():
  m = nnx.from_eqx(eqx.nn.MLP(3, 3, 4, 2, key=jax.random.key(0)))
  other = nnx.from_eqx(eqx.nn.MLP(3, 3, 4, 2, key=jax.random.key(1)))
  treedef = jax.tree.structure(m)
  assert jax.tree.structure(other) == treedef and hash(jax.tree.structure(other)) == hash(treedef)
  assert jax.tree.structure(jax.tree.map(lambda x: x, m)) == treedef
  assert jax.tree.structure(nnx.from_eqx(eqx.nn.MLP(3, 3, 5, 2, key=jax.random.key(0)))) != (
    treedef  # a static attribute (width_size) differs
  )
  deeper = nnx.from_eqx(eqx.nn.MLP(3, 3, 4, 3, key=jax.random.key(0)))
  assert jax.tree.structure(deeper) != treedef


def test_inference_mode_on_a_rebuilt_module_flips_the_flag():
  m = nnx.from_eqx(
    eqx.nn.Sequential([eqx.nn.Linear(2, 2, key=jax.random.key(0)), eqx.nn.Dropout(0.5)])
  )
  r = jax.tree.map(lambda x: x, m)
  inf = eqx.nn.inference_mode(r)
  assert inf.layers[1].inference.value is True and r.layers[1].inference.value is False
  assert inf.layers[1].deterministic is True and r.layers[1].deterministic is False
  assert jax.tree.leaves(eqx.nn.inference_mode(inf, value=False)) == jax.tree.leaves(r)


class _Stack(nnx.Module):
  def __init__(self, depth: int):
    rngs = nnx.Rngs(0)
    self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(depth)])

  def __call__(self, x):
    for layer in self.layers:
      x = jax.nn.relu(layer(x))
    return x


def _train(model, forward, steps: int):
  counter = TraceCounter()
  opt = optax.sgd(1e-2, momentum=0.9)  # state: momentum modules of the same graph

  @eqx.filter_jit
  @counter
  def step(model, opt_state, x):
    loss, grads = eqx.filter_value_and_grad(lambda m: jnp.mean(forward(m, x) ** 2))(model)
    updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss

  opt_state = opt.init(eqx.filter(model, eqx.is_inexact_array))
  x = jnp.ones((3, 4))
  losses = []
  for _ in range(steps):
    model, opt_state, loss = step(model, opt_state, x)
    losses.append(loss)
  return model, losses, counter.count


def test_equinox_training_loop_over_nnx_modules_traces_once_and_matches_equinox():
  e = eqx.nn.MLP(4, 4, 4, 3, key=jax.random.key(0))
  batched = lambda m, x: jax.vmap(m)(x)  # noqa: E731
  e_out, e_losses, _ = _train(e, batched, 5)
  m_out, m_losses, traces = _train(nnx.from_eqx(e), batched, 5)
  assert traces == 1
  # different programs (NNX kernels are stored transposed): close, not bitwise
  assert_trees_close(jnp.stack(m_losses), jnp.stack(e_losses))
  assert_trees_close(jax.tree.leaves(nnx.to_eqx(m_out)), jax.tree.leaves(e_out))
  s_out, _, traces = _train(_Stack(3), lambda m, x: m(x), 5)
  assert traces == 1
  assert s_out.layers[0].kernel.value.shape == (4, 4)


class _Wide(nnx.Module):
  """A module whose children have names no generated code could hold as-is."""

  def __init__(self, names):
    for i, name in enumerate(names):
      setattr(self, name, nnx.Param(jnp.full((2,), float(i))))


@pytest.mark.parametrize(
  "names",
  [
    ["a", "b"],
    ["it's", 'say "x"', "two\nlines", "back\\slash"],  # quoted into generated code
    [f"p{i}" for i in range(300)],  # more children than one generated function holds
  ],
  ids=["plain", "odd-names", "300-children"],
)
def test_rebuilt_nodes_hold_every_child_under_its_own_name(names):
  m = _Wide(names)
  leaves, treedef = jax.tree.flatten(m)
  r = jax.tree.unflatten(treedef, [x + 1 for x in leaves])
  for i, name in enumerate(names):
    assert type(getattr(r, name)) is nnx.Param
    assert_trees_equal(getattr(r, name).value, jnp.full((2,), i + 1.0))
    assert_trees_equal(getattr(m, name).value, jnp.full((2,), float(i)))  # untouched
  assert jax.tree.structure(r) == treedef


def test_long_lists_rebuild_item_by_item():
  m = nnx.List([nnx.Param(jnp.full((1,), float(i))) for i in range(300)])
  r = jax.tree.map(lambda x: -x, m)
  assert [float(v.value[0]) for v in r] == [-float(i) for i in range(300)]


def test_modules_rebuilt_inside_a_trace_belong_to_it():
  """A node rebuilt while a transform traces gets that trace's token (so
  mutating it afterwards, outside, is refused as in flax.nnx), and a node rebuilt
  at the top level after that gets the top level's again."""
  m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  inside = []

  @jax.jit
  def f(m):
    inside.append(m)
    m.kernel.value = m.kernel.value * 2  # allowed: the copy belongs to this trace
    return m

  out = f(m)
  with pytest.raises(nnx.TraceContextError):
    inside[0].kernel.value = jnp.zeros((2, 2))
  out.kernel.value = jnp.zeros((2, 2))  # a top-level rebuild is mutable at the top level
  assert_trees_equal(out.kernel.value, jnp.zeros((2, 2)))

"""eqx.nn.Shared <-> shared Variables and Modules, in both directions."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  sharing_classes,
)

KEYS = jax.random.split(jax.random.key(1), 6)


class TiedLM(eqx.Module):
  shared: eqx.nn.Shared

  def __init__(self, key):
    k1, k2 = jax.random.split(key)
    emb, lin = eqx.nn.Embedding(7, 4, key=k1), eqx.nn.Linear(4, 7, key=k2)
    self.shared = eqx.nn.Shared((emb, lin), lambda t: t[1].weight, lambda t: t[0].weight)

  def __call__(self, tokens):
    emb, lin = self.shared()
    return jax.vmap(lin)(jax.vmap(emb)(tokens))


def test_tied_embedding_becomes_one_param():
  e = TiedLM(KEYS[0])
  m = nnx.from_eqx(e)
  emb, lin = m.shared.pytree
  assert emb.embedding is lin.weight  # one Variable, two paths
  assert type(lin) is nnx.bridge.Linear
  params = nnx.state(m, nnx.Param)
  assert len(jax.tree.leaves(params)) == 2  # embedding table + output bias
  tokens = jnp.array([0, 3, 6])
  assert_trees_equal(m(tokens), e(tokens))
  back = nnx.to_eqx(m)
  assert_trees_equal(back, e)
  assert back.shared.where is e.shared.where and back.shared.get is e.shared.get
  # the very same placeholder object: equal pytrees, no retrace in filter_jit
  assert back.shared.pytree[1].weight is e.shared.pytree[1].weight


def test_tied_gradient_accumulates_both_uses():
  e = TiedLM(KEYS[1])
  m = nnx.from_eqx(e)
  tokens = jnp.array([1, 2])
  g_eqx = eqx.filter_grad(lambda e: e(tokens).sum())(e)
  g_nnx = nnx.grad(lambda m: m(tokens).sum())(m)
  assert_trees_equal(g_nnx.shared.pytree[0].embedding.value, g_eqx.shared.pytree[0].weight)


def test_tied_linears_share_one_weight_and_subtrees_tie():
  lin = eqx.nn.Linear(3, 3, key=KEYS[2])
  other = eqx.nn.Linear(3, 3, key=KEYS[3])
  s = eqx.nn.Shared(
    (lin, other, lin),
    lambda t: (t[1].weight, t[2]),
    lambda t: (t[0].weight, t[0]),
  )
  m = nnx.from_eqx(s)
  a, b, c = m.pytree
  assert type(a) is nnx.bridge.Linear and a.weight is b.weight and c is a
  assert_trees_equal(nnx.to_eqx(m), s)
  native = nnx.from_eqx(s, native=True)  # NNX's own layer: one transposed kernel
  a, b, c = native.pytree
  assert type(a) is nnx.Linear and a.kernel is b.kernel and c is a
  assert_trees_equal(nnx.to_eqx(native, native=True), s)


def test_tied_embedding_keeps_equinox_layout_when_native_is_asked_for():
  e = TiedLM(KEYS[0])
  emb, lin = nnx.from_eqx(e, native=True).shared.pytree
  assert type(lin) is nnx.bridge.Linear and emb.embedding is lin.weight


def test_nnx_sharing_becomes_shared_root_and_back():
  a = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  b = nnx.Linear(2, 2, rngs=nnx.Rngs(1))
  b.kernel = a.kernel
  model = nnx.List([a, b, a])  # a shared Variable and a shared Module
  e = nnx.to_eqx(model)
  assert isinstance(e, nnx.bridge.SharedRoot) and isinstance(e.shared, eqx.nn.Shared)
  assert len([x for x in jax.tree.leaves(e) if eqx.is_array(x)]) == 3  # kernel once + 2 biases
  back = nnx.from_eqx(e)
  assert sharing_classes(back) == sharing_classes(model)
  assert_trees_equal(nnx.to_eqx(back), e)


def test_shared_root_forwards_methods_and_state():
  class Tied(nnx.Module):
    def __init__(self):
      self.a = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
      self.b = nnx.Linear(2, 2, rngs=nnx.Rngs(1))
      self.b.kernel = self.a.kernel
      self.n = nnx.BatchStat(jnp.array(0))

    def __call__(self, x):
      self.n += 1
      return self.b(self.a(x))

    def first(self, x):
      return self.a(x)

  model = Tied()
  e, state = nnx.to_eqx_with_state(model)
  assert isinstance(e, nnx.bridge.SharedRoot) and e.is_stateful()
  x = jnp.ones(2)
  y, state = e(x, state)
  assert_trees_close(y, model(x))
  y1, state = e.first(x, state)
  assert_trees_close(y1, model.first(x))
  assert int(nnx.from_eqx(e, state).n.value) == 1
  with pytest.raises(nnx.bridge.MissingStateError, match="keeps state in an eqx.nn.State"):
    e(x)


def test_repeated_conversions_do_not_retrace_filter_jit():
  counter = TraceCounter()
  f = eqx.filter_jit(counter(lambda m, x: m(x)))
  a = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  model = nnx.Sequential([a, nnx.Linear(2, 2, rngs=nnx.Rngs(1)), a])
  x = jnp.ones(2)
  f(nnx.to_eqx(model), x)
  with assert_no_retrace(counter):
    for _ in range(3):
      f(nnx.to_eqx(model), x)
  e1, e2 = nnx.to_eqx(model), nnx.to_eqx(model)
  assert e1.shared.where == e2.shared.where
  assert e1.shared.pytree[2] is e2.shared.pytree[2]  # the cached placeholder
  # a converted Equinox model converts back to an equal pytree: no retrace either
  tied = TiedLM(KEYS[0])
  g = eqx.filter_jit(counter(lambda m, t: m(t)))
  g(tied, jnp.array([1]))
  with assert_no_retrace(counter):
    g(nnx.to_eqx(nnx.from_eqx(tied)), jnp.array([1]))


def test_get_that_transforms_arrays_is_rejected():
  lin1, lin2 = eqx.nn.Linear(3, 3, key=KEYS[0]), eqx.nn.Linear(3, 3, key=KEYS[1])
  bad = eqx.nn.Shared((lin1, lin2), lambda t: t[1].weight, lambda t: jnp.transpose(t[0].weight))
  with pytest.raises(nnx.bridge.SharedConversionError, match=r"`get` of the eqx.nn.Shared at root"):
    nnx.from_eqx(bad)
  bad2 = eqx.nn.Shared((lin1, lin2), lambda t: t[1].weight, lambda t: t[0].weight[::-1])
  with pytest.raises(nnx.bridge.SharedConversionError, match="not a node of the shared pytree"):
    nnx.from_eqx(bad2)


def test_untied_nnx_positions_are_detected():
  m = nnx.from_eqx(TiedLM(KEYS[0]))
  m.shared.pytree[1].weight = nnx.Param(jnp.zeros((7, 4)))
  with pytest.raises(nnx.bridge.SharedConversionError, match="no longer the same object"):
    nnx.to_eqx(m)


def test_variable_shared_in_two_layouts_is_rejected():
  lin = nnx.Linear(3, 3, rngs=nnx.Rngs(0))
  emb = nnx.from_eqx(eqx.nn.Embedding(3, 3, key=KEYS[0]))
  emb.embedding = lin.kernel  # (3, 3) table used as-is, kernel kept as-is by default
  both = nnx.List([lin, emb])
  e = nnx.to_eqx(both)  # one array, tied by eqx.nn.Shared
  assert type(e.shared) is eqx.nn.Shared and len(e.shared.get.paths) == 1
  back = nnx.from_eqx(e)
  assert back[1].embedding is back[0].kernel
  with pytest.raises(nnx.bridge.SharedConversionError, match="different layouts"):
    nnx.to_eqx(both, native=True)  # eqx.nn.Linear would need the kernel transposed

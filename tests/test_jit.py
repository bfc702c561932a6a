"""nnx.jit: propagation, sharing across arguments, structure changes, trace counts, atomicity."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close, assert_trees_equal


class Counter(nnx.Module):
  def __init__(self):
    self.n = nnx.Variable(jnp.array(0))
    self.w = nnx.Param(jnp.ones(3))

  def __call__(self, x):
    self.n += 1
    return x * self.w


def test_updates_propagate_and_no_retrace():
  counter = TraceCounter()
  f = nnx.jit(counter(lambda m, x: m(x)))
  m = Counter()
  f(m, jnp.ones(3))
  with assert_no_retrace(counter):
    for _ in range(3):
      y = f(m, jnp.ones(3))
  assert int(m.n.value) == 4 and counter.count == 1
  assert_trees_equal(y, jnp.ones(3))
  f(m, jnp.ones((2, 3)))  # new shape: one more trace
  assert counter.count == 2


def test_only_changed_leaves_are_outputs():
  m = Counter()
  lowered = nnx.jit(lambda m, x: m(x)).lower(m, jnp.ones(3))
  out_info = jax.tree.leaves(lowered.out_info)
  # y and the new count; the unchanged Param is not carried out.
  assert len(out_info) == 2


def test_repeated_calls_do_not_rewalk_the_graph(monkeypatch):
  from nnx_eqx import _walk

  m = Counter()
  f = nnx.jit(lambda m: m.n.value)
  f(m)
  calls = []
  orig = _walk.walk_uncached
  monkeypatch.setattr(_walk, "walk_uncached", lambda root: calls.append(1) or orig(root))
  for _ in range(5):
    f(m)
  assert calls == []


def test_shared_variable_across_arguments():
  a, b = nnx.Module(), nnx.Module()
  shared = nnx.Variable(jnp.array(0))
  a.v, b.v = shared, shared

  @nnx.jit
  def f(a, b):
    assert a.v is b.v
    a.v += 1
    b.v += 10

  f(a, b)
  assert int(shared.value) == 11 and a.v is b.v


def test_modules_inside_containers_and_kwargs():
  m1, m2 = Counter(), Counter()

  @nnx.jit
  def f(pair, *, other):
    pair[0](jnp.ones(3))
    other["m"](jnp.ones(3))

  f([m1, 5], other={"m": m2})
  assert int(m1.n.value) == 1 and int(m2.n.value) == 1


def test_static_argnums_and_methods():
  class Scaler(nnx.Module):
    def __init__(self):
      self.s = nnx.Param(jnp.array(2.0))

    @nnx.jit
    def __call__(self, x):
      return x * self.s

  @nnx.jit(static_argnums=1)
  def power(x, n):
    return x**n

  assert float(power(jnp.array(2.0), 3)) == 8.0
  assert float(Scaler()(jnp.array(3.0))) == 6.0


def test_structural_changes_and_returned_modules():
  m = Counter()

  @nnx.jit
  def f(m):
    m.extra = nnx.Intermediate(m.w.value * 2)
    return nnx.Linear(2, 2, rngs=nnx.Rngs(0)), m

  new, same = f(m)
  assert same is m and isinstance(m.extra, nnx.Intermediate)
  assert_trees_equal(m.extra.value, 2 * jnp.ones(3))
  assert isinstance(new, nnx.Linear) and new.kernel.value.shape == (2, 2)
  assert isinstance(new.kernel.value, jax.Array)


def test_exception_leaves_module_unchanged():
  m = Counter()

  @nnx.jit
  def bad(m):
    m.n += 1
    m.w.value = m.w.value * 0
    m.added = nnx.Param(jnp.ones(1))
    raise ValueError("boom")

  before = nnx.state(m)
  g = nnx.graphdef(m)
  with pytest.raises(ValueError, match="boom"):
    bad(m)
  assert nnx.graphdef(m) == g and not hasattr(m, "added")
  assert_trees_equal(nnx.state(m).w.value, before.w.value)
  assert int(m.n.value) == 0


def test_jit_matches_plain_jax_jit_program():
  from nnx_eqx.testing import hlo_equal

  m = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
  x = jnp.ones((4, 3))
  graphdef, state = nnx.split(m)
  ours = nnx.jit(lambda m, x: m(x)).lower(m, x)
  ref = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)).lower(state, x)
  assert hlo_equal(ours, ref)


def test_donation_of_module_leaves():
  m = Counter()
  f = nnx.jit(lambda m, x: m(x), donate_argnums=0)
  f(m, jnp.ones(3))
  assert int(m.n.value) == 1


def test_returned_grads_state_is_plain_output():
  m = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
  x = jnp.ones((4, 3))
  f = nnx.jit(lambda m, x: nnx.grad(lambda m: m(x).sum())(m))
  lowered = f.lower(m, x)
  assert len(jax.tree.leaves(lowered.out_info)) == 2  # the two grads, no params passed through
  grads = f(m, x)
  assert isinstance(grads.kernel, nnx.Param) and grads.kernel is not m.kernel
  assert_trees_close(grads.bias.value, 4 * jnp.ones(2))

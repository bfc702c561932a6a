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
  from nnx_eqx.graph.walk import _walk

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


# -- the repeat-call fast path must notice every change between calls ----------
class Holder(nnx.Module):
  def __init__(self):
    self.sub = Counter()
    self.w = nnx.Param(jnp.ones(3))


def _bump_all(h, x):
  h.w.value = h.w.value + 1
  return h.sub(x) * h.w  # the call bumps h.sub.n


def test_repeat_calls_see_a_replaced_variable():
  f = nnx.jit(_bump_all)
  h = Holder()
  f(h, jnp.ones(3))
  old = h.w
  h.w = nnx.Param(jnp.full(3, 10.0))
  y = f(h, jnp.ones(3))
  assert_trees_equal(y, jnp.full(3, 11.0))
  assert_trees_equal(h.w.value, jnp.full(3, 11.0))
  assert_trees_equal(old.value, jnp.full(3, 2.0))  # the replaced one is left alone


def test_repeat_calls_see_a_swapped_submodule():
  f = nnx.jit(_bump_all)
  h = Holder()
  f(h, jnp.ones(3))
  old, new = h.sub, Counter()
  h.sub = new
  f(h, jnp.ones(3))
  assert int(new.n.value) == 1 and int(old.n.value) == 1 and h.sub is new


def test_repeat_calls_see_a_shared_reference_added():
  @nnx.jit
  def f(a, b):
    a.v += 1
    return a.v is b.v

  a, b = nnx.Module(), nnx.Module()
  a.v, b.v = nnx.Variable(jnp.array(0)), nnx.Variable(jnp.array(100))
  assert not bool(f(a, b))
  b.v = a.v
  assert bool(f(a, b))
  f(a, b)
  assert int(a.v.value) == 3 and b.v is a.v


def test_repeat_calls_with_other_objects_of_the_same_types():
  f = nnx.jit(_bump_all)
  h1, h2 = Holder(), Holder()
  for _ in range(3):
    f(h1, jnp.ones(3))
  f(h2, jnp.ones(3))
  f(h1, jnp.ones(3))
  assert int(h1.sub.n.value) == 4 and int(h2.sub.n.value) == 1


def test_repeat_calls_see_values_set_outside_and_an_argument_turned_module():
  @nnx.jit
  def f(m, other):
    return m.w.value.sum() + (other.w.value.sum() if isinstance(other, Counter) else other)

  m = Counter()
  assert float(f(m, jnp.array(1.0))) == 4.0
  m.w.value = jnp.zeros(3)  # a value change: no structural change, still seen
  assert float(f(m, jnp.array(1.0))) == 1.0
  assert float(f(m, Counter())) == 3.0  # same position, now a Module: split again


def test_repeat_calls_see_an_array_attribute_replaced():
  @nnx.jit
  def f(m):
    m.buf = m.buf * 2
    return m.buf.sum()

  m = nnx.Module()
  m.buf = jnp.ones(2)
  f(m)
  m.buf = jnp.full(2, 5.0)  # array replaced by array: values only, the walk is kept
  assert float(f(m)) == 20.0
  assert_trees_equal(m.buf, jnp.full(2, 10.0))


@pytest.mark.parametrize("graph", [True, False])
def test_donated_state_left_unchanged_stays_valid(graph):
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  kernel = jnp.copy(m.kernel[...])
  traces = []

  @nnx.jit(donate_argnums=0, graph=graph)
  def f(m, x):
    traces.append(1)
    return m(x)

  y = f(m, jnp.ones((1, 2)))
  assert_trees_equal(m.kernel[...], kernel)
  assert_trees_equal(f(m, jnp.ones((1, 2))), y)
  assert len(traces) == 1

  v = nnx.Param(jnp.array(1.0))
  g = nnx.jit(lambda v: v[...] + 1.0, donate_argnames="v", graph=graph)
  assert float(g(v=v)) == 2.0 and float(v[...]) == 1.0
  assert float(g(v=v)) == 2.0

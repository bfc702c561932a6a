"""State updates (BatchNorm statistics, RNG counts) under JAX's and Equinox's
transformations: kept when carried out; when a transformation drops them, the
module left stale refuses to be used (``nnx.LostUpdateError``), nothing else does;
never silently lost."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.graph.tracing import _lost_updates
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

X = jnp.linspace(-1.0, 1.0, 24, dtype=jnp.float32).reshape(8, 3)


@pytest.fixture(autouse=True)
def _fresh():
  _lost_updates.reset()
  yield
  _lost_updates.reset()


class Net(nnx.Module):
  def __init__(self, seed: int = 0, momentum: float = 0.9):
    rngs = nnx.Rngs(seed, dropout=seed + 1)
    self.l = nnx.Linear(3, 4, rngs=rngs)
    self.bn = nnx.BatchNorm(4, momentum=momentum, rngs=rngs)
    self.do = nnx.Dropout(0.5, rngs=rngs)

  def __call__(self, x):
    return self.do(self.bn(self.l(x)))


def _native_bn():
  return nnx.BatchNorm(3, rngs=nnx.Rngs(0))


def _native_dropout():
  return nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=1))


def _converted_bn():
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  return nnx.from_eqx(bn, state)


def _converted_dropout():
  return nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=nnx.Rngs(dropout=1))


def _call(m, x):
  if isinstance(m, nnx.bridge.BatchNorm):  # Equinox's layer runs per example, under vmap
    y, stats = jax.vmap(
      lambda m, x: (m(x), nnx.state(m, nnx.BatchStat)),
      in_axes=(None, 0),
      out_axes=(0, None),
      axis_name="batch",
    )(m, x)
    nnx.update(m, stats)
    return y
  return m(x)


LAYERS = {
  "native BatchNorm": (_native_bn, nnx.BatchStat),
  "native Dropout": (_native_dropout, nnx.RngCount),
  "converted BatchNorm": (_converted_bn, nnx.BatchStat),
  "converted Dropout": (_converted_dropout, nnx.RngCount),
}

TRANSFORMS = {
  "jax.jit": lambda f, m: jax.jit(f)(m),
  "eqx.filter_jit": lambda f, m: eqx.filter_jit(f)(m),
  "jax.grad": lambda f, m: jax.grad(lambda m: jnp.sum(f(m)), allow_int=True)(m),
  "eqx.filter_grad": lambda f, m: eqx.filter_grad(lambda m: jnp.sum(f(m)))(m),
  "eqx.filter_value_and_grad": lambda f, m: eqx.filter_value_and_grad(lambda m: jnp.sum(f(m)))(m),
  "eqx.filter_vmap": lambda f, m: eqx.filter_vmap(lambda m, k: f(m, X * k), in_axes=(None, 0))(
    m, jnp.array([1.0, 2.0], jnp.float32)
  ),
  "eqx.filter_checkpoint": lambda f, m: eqx.filter_checkpoint(f)(m),
  "jax.checkpoint": lambda f, m: jax.checkpoint(f)(m),
}


def _state(m, kind):
  """Copies of the values of ``m``'s ``kind`` Variables (read out of Refs too)."""
  variables = jax.tree.leaves(nnx.state(m, kind), is_leaf=lambda v: isinstance(v, nnx.Variable))
  return [jnp.array(v.value) for v in variables]


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_dropped_update_is_refused_where_the_stale_module_is_used(layer, transform):
  make, kind = LAYERS[layer]
  m, other = make(), nnx.Linear(2, 2, rngs=nnx.Rngs(1))
  before = _state(m, kind)
  TRANSFORMS[transform](lambda m, x=X: _call(m, x), m)  # the update is dropped here
  jax.tree.leaves(other)  # an unrelated module is not concerned
  nnx.state(other)
  with pytest.raises(nnx.LostUpdateError, match=kind.__name__) as info:
    jax.tree.leaves(m)
  assert "nnx.update" in str(info.value) and "with_vars" in str(info.value)
  with pytest.raises(nnx.LostUpdateError, match=kind.__name__):
    nnx.state(m)  # (a graph walk)
  nnx.clear_lost_updates(m)  # the values from before the call, accepted
  assert_trees_equal(_state(m, kind), before)
  jax.tree.leaves(m)


# Refs under vmap are refused (below); plain jax.grad differentiates every leaf, Refs
# included, which JAX cannot do: eqx.filter_grad differentiates arrays only.
REF_CASES = [
  (layer, transform)
  for layer in LAYERS
  for transform in TRANSFORMS
  if transform not in ("eqx.filter_vmap", "jax.grad")
  and layer != "converted BatchNorm"  # (runs under jax.vmap itself)
]


@pytest.mark.parametrize(("layer", "transform"), REF_CASES)
def test_ref_backed_state_is_kept_through_every_transform(layer, transform):
  make, kind = LAYERS[layer]
  m = make()
  eager = make()
  _call(eager, X)
  r = nnx.with_vars(m, ref=True, only=kind)
  TRANSFORMS[transform](lambda m, x=X: _call(m, x), r)
  assert_trees_close(_state(r, kind), _state(eager, kind))


@pytest.mark.parametrize("layer", ["native BatchNorm", "converted BatchNorm"])
def test_ref_backed_state_under_vmap_of_unbatched_state_is_refused(layer):
  """Statistics of a batch of inputs are batched: JAX refuses to write them into
  a Ref shared by the batch members, and the error names the Variable."""
  make, kind = LAYERS[layer]
  r = nnx.with_vars(make(), ref=True, only=kind)
  with pytest.raises(nnx.TraceContextError, match=f"{kind.__name__} of shape.*StateAxes"):
    TRANSFORMS["eqx.filter_vmap"](lambda m, x=X: _call(m, x), r)


@pytest.mark.parametrize("returned", ["module", "state"])
def test_updates_carried_out_of_the_transform_are_kept(returned):
  m, reference = Net(), Net()
  nnx.jit(lambda m: m(X))(reference)

  @jax.jit
  def f(m):
    y = m(X)
    return y, (m if returned == "module" else nnx.state(m, nnx.Not(nnx.Param)))

  _, out = f(m)
  nnx.update(m, nnx.state(out) if returned == "module" else out)
  jax.tree.leaves(m)  # nothing was dropped
  assert_trees_close(nnx.state(m), nnx.state(reference))


def test_a_module_carried_through_a_scan_keeps_its_updates():
  m, reference = Net(), Net()
  for _ in range(3):
    nnx.jit(lambda m: m(X))(reference)

  def body(m, _):
    m(X)
    return m, None

  out, _ = jax.lax.scan(body, m, None, length=3)
  jax.tree.leaves(out)
  assert int(out.do.rngs.count.value) == 3
  assert_trees_close(nnx.state(out, nnx.BatchStat), nnx.state(reference, nnx.BatchStat))


def test_shape_evaluation_drops_updates_without_error():
  m = Net()
  out = eqx.filter_eval_shape(lambda m: m(X), m)
  jax.eval_shape(lambda m: m(X), m)
  jax.tree.leaves(m)
  assert out.shape == (8, 4)
  assert int(m.do.rngs.count.value) == 0


def test_evaluation_mode_writes_nothing_and_raises_nothing():
  m = Net()
  m.eval()
  eqx.filter_jit(lambda m: m(X))(m)
  jax.tree.leaves(m)


def test_the_error_names_the_path_and_where_it_was_written():
  m = Net()
  eqx.filter_jit(lambda m: m(X))(m)
  with pytest.raises(nnx.LostUpdateError, match="Net.bn.mean"):
    eqx.filter_jit(lambda m: m(X))(m)  # (flattened, its BatchNorm is refused first)
  with pytest.raises(nnx.LostUpdateError) as info:
    nnx.state(m)  # a graph walk lists every stale Variable
  text = str(info.value)
  assert "3 Variable(s)" in text
  assert "`Net.bn.mean`" in text and "`Net.bn.var`" in text and "`Net.do.rngs.count`" in text
  assert "test_state_under_transforms.py" in text
  # costs are on the performance page, not quoted as figures that go out of date
  assert "docs/guides/performance.md" in text
  assert not re.search(r"\d\s*(us|µs|ms)\b", text), text


def test_the_issue_example_raises_on_the_stale_module_only():
  x = jnp.ones((4, 3), jnp.float32)
  bn, other = nnx.BatchNorm(3, rngs=nnx.Rngs(0)), nnx.Linear(2, 2, rngs=nnx.Rngs(1))
  jax.jit(lambda m, x: m(x))(bn, x)  # BatchNorm's update is dropped
  jax.tree.leaves(other)
  other(jnp.ones((1, 2), jnp.float32))
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    bn.mean[...]  # reading the stale statistics
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    bn.mean.value
  with pytest.raises(nnx.LostUpdateError, match="clear_lost_updates"):
    bn(x)  # an eager call would go on from them
  bn.mean.value = jnp.zeros(3, jnp.float32)  # a new value ends that Variable's mark ...
  assert_trees_equal(bn.mean[...], jnp.zeros(3, jnp.float32))
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.var"):
    bn.var[...]  # ... and only its own
  nnx.clear_lost_updates(bn)
  assert_trees_equal(bn.var[...], jnp.ones(3, jnp.float32))
  nnx.jit(lambda m, x: m(x))(bn, x)  # the fixed call carries the update
  assert float(jnp.abs(bn.mean[...]).sum()) > 0


def test_clear_lost_updates_without_arguments_clears_every_module():
  a, b = _native_bn(), _native_bn()
  jax.jit(lambda a, b: (a(X), b(X)))(a, b)
  nnx.clear_lost_updates()
  jax.tree.leaves((a, b))


def test_clear_lost_updates_of_one_module_keeps_the_other_refused():
  a, b = _native_bn(), _native_bn()
  jax.jit(lambda a, b: (a(X), b(X)))(a, b)
  nnx.clear_lost_updates(a)
  jax.tree.leaves(a)
  with pytest.raises(nnx.LostUpdateError):
    jax.tree.leaves(b)
  nnx.clear_lost_updates(b)


def test_a_dropped_update_of_a_temporary_raises_nothing():
  """flax's idiom: layers built under ``jax.vmap`` from a forked ``Rngs``, which
  is thrown away with the count it advanced; likewise a fresh ``Rngs`` under
  ``jax.jit``."""
  rngs = nnx.Rngs(0)

  @jax.vmap
  def create(r):
    return nnx.Linear(2, 2, rngs=r)

  layers = create(rngs.fork(split=3))
  assert layers.kernel.value.shape == (3, 2, 2)
  keys = jax.jit(lambda r: r.params())(nnx.Rngs(1))
  jax.tree.leaves((rngs, layers, keys))
  assert _lost_updates.unreported() == []


def test_an_update_dropped_by_an_inner_transform_is_reported_on_the_outer_original():
  m = _native_bn()

  @jax.jit
  def f(m):
    jax.checkpoint(lambda m: m(X))(m)  # the inner copy's update is dropped
    return 0.0  # (and the outer copy is not read)

  f(m)
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    m.mean[...]
  nnx.clear_lost_updates(m)
  m.mean[...]


def test_an_update_dropped_by_an_inner_transform_is_refused_inside_the_outer_one():
  m = _native_bn()

  def f(m):
    jax.checkpoint(lambda m: m(X))(m)
    return m.mean[...]  # the outer copy is stale

  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    jax.jit(f)(m)


def _equinox_step(opt, on_trace=lambda: None):
  """The Equinox-style step, carrying the model's state out as Equinox threads
  ``eqx.nn.State``."""

  @eqx.filter_jit
  def step(m, opt_state, x):
    on_trace()

    def loss(m):
      return jnp.mean(m(x) ** 2), nnx.state(m, nnx.Not(nnx.Param))

    (_, state), grads = eqx.filter_value_and_grad(loss, has_aux=True)(m)
    updates, opt_state = opt.update(grads, opt_state)
    m = eqx.apply_updates(m, updates)
    nnx.update(m, state)
    return m, opt_state

  return step


def _nnx_step(opt):
  @nnx.jit
  def step(m, opt_state, x):
    def loss(m):
      return jnp.mean(m(x) ** 2)

    grads = nnx.grad(loss)(m)
    updates, opt_state = opt.update(grads, opt_state)
    nnx.update(m, optax.apply_updates(nnx.state(m, nnx.Param), updates))
    return opt_state

  return step


def _ref_step(opt):
  @eqx.filter_jit
  def step(m, opt_state, x):
    grads = eqx.filter_grad(lambda m: jnp.mean(m(x) ** 2))(m)
    updates, opt_state = opt.update(grads, opt_state)
    return eqx.apply_updates(m, updates), opt_state

  return step


@settings(max_examples=8)
@given(seed=st.integers(0, 2**16), steps=st.integers(1, 3), momentum=st.sampled_from([0.5, 0.9]))
def test_equinox_style_steps_leave_the_state_of_nnx_jit_steps(seed, steps, momentum):
  """Law: an Equinox-style training step (state carried out) and the same step
  under nnx.jit leave the model in the same state: parameters, statistics and
  RNG counts."""
  opt = optax.sgd(0.1)
  a, b = Net(seed, momentum), Net(seed, momentum)
  c = nnx.with_vars(Net(seed, momentum), ref=True, only=nnx.Not(nnx.Param))
  sa = sb = sc = opt.init(nnx.state(a, nnx.Param))
  eqx_step, nnx_step, ref_step = _equinox_step(opt), _nnx_step(opt), _ref_step(opt)
  for _ in range(steps):
    a, sa = eqx_step(a, sa, X)
    sb = nnx_step(b, sb, X)
    c, sc = ref_step(c, sc, X)
  jax.tree.leaves(a)  # nothing was dropped
  assert int(a.do.rngs.count.value) == int(b.do.rngs.count.value) == steps
  assert int(c.do.rngs.count.value) == steps
  for kind in (nnx.Param, nnx.BatchStat, nnx.RngState):
    assert_trees_close(_state(a, kind), _state(b, kind))
    assert_trees_close(_state(c, kind), _state(b, kind))


def test_equinox_style_step_traces_once():
  opt = optax.sgd(0.1)
  traces = []
  step = _equinox_step(opt, on_trace=lambda: traces.append(1))
  m = Net()
  s = opt.init(eqx.filter(m, eqx.is_inexact_array))
  for _ in range(4):
    m, s = step(m, s, X)
  assert len(traces) == 1
  assert int(m.do.rngs.count.value) == 4


def test_an_update_of_a_call_that_failed_interactively_is_not_reported(monkeypatch):
  """In a REPL or notebook an unhandled error sets ``sys.last_value``: the writes
  of the call that failed are not reported as dropped at the next call."""
  import sys

  m = Net()

  def fails(m):
    m(X)
    raise ZeroDivisionError("after the write")

  with pytest.raises(ZeroDivisionError) as info:
    eqx.filter_jit(fails)(m)
  monkeypatch.setattr(sys, "last_value", info.value, raising=False)
  jax.tree.leaves(m)  # no LostUpdateError
  assert int(m.do.rngs.count.value) == 0


def test_a_call_that_failed_in_handled_code_leaves_nothing_stale():
  """A transformation that raised returned nothing: the caller's module holds
  what it held before, as a failed call should leave it, and goes on."""
  m = Net()

  def fails(m):
    m(X)
    raise ZeroDivisionError("after the write")

  for transform in (eqx.filter_jit, jax.jit, jax.checkpoint):
    with pytest.raises(ZeroDivisionError):
      transform(fails)(m)
    jax.tree.leaves(m)  # no LostUpdateError
    assert int(m.do.rngs.count.value) == 0
  nnx.jit(lambda m: m(X))(m)
  assert int(m.do.rngs.count.value) == 1
  assert _lost_updates.unreported() == []


def test_a_compiled_program_cache_keeps_no_module_alive():
  """The link to the module last flattened is weak: ``jax.jit``'s cache, which
  holds the module's structure, does not keep the module and its arrays alive."""
  import gc
  import weakref

  f = jax.jit(lambda m, x: m(x))
  m = _native_bn()
  m.eval()
  f(m, X)
  f(m, X)
  gone = weakref.ref(m)
  del m
  gc.collect()
  assert gone() is None

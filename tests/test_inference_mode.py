"""``eqx.nn.inference_mode`` switches NNX layers, and a mode is part of the compiled
program's key under ``jax.jit``, ``eqx.filter_jit`` and ``nnx.jit``."""

import dataclasses
from collections.abc import Callable

import equinox as eqx
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_trees_close, assert_trees_equal

X = jnp.arange(12.0).reshape(4, 3) / 7.0
KEY = jax.random.key(5)


class Noisy(nnx.Module):
  """A user layer with flax's ``deterministic`` attribute and no ``set_view``."""

  def __init__(self, *, rngs: nnx.Rngs):
    self.linear = nnx.Linear(3, 3, rngs=rngs)
    self.deterministic = False

  def __call__(self, x, key):
    y = self.linear(x)
    return y if self.deterministic else y + jax.random.normal(key, y.shape)


class EqxNoisy(eqx.Module):
  """A user Equinox layer with Equinox's ``inference`` field (converted generically)."""

  linear: eqx.nn.Linear
  inference: bool = False

  def __call__(self, x, key):
    y = self.linear(x)
    return y if self.inference else y + jax.random.normal(key, y.shape)


def _batched(m, x):
  """A converted Equinox BatchNorm over the batch axis (its state in Variables)."""
  return nnx.vmap(lambda m, x: m(x, None)[0], in_axes=(None, 0), axis_name="batch")(m, x)


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  build: Callable[[], nnx.Module]
  # the forward pass; pure in the module's Variables (BatchNorm runs on a copy), so
  # that what is checked here is the mode alone, under any transform
  call: Callable


def _pure(fn):
  return lambda m, x, k: fn(nnx.clone(m), x, k)


CASES = [
  Case(
    "native_dropout",
    lambda: nnx.Dropout(0.5),
    lambda m, x, k: m(x, rngs=nnx.Rngs(dropout=k)),
  ),
  Case(
    "native_batchnorm",
    lambda: nnx.BatchNorm(3, rngs=nnx.Rngs(0)),
    _pure(lambda m, x, k: m(x + 1.0)),
  ),
  Case(
    "converted_dropout",
    lambda: nnx.from_eqx(eqx.nn.Dropout(0.5)),
    lambda m, x, k: m(x, key=k),
  ),
  Case(
    "converted_batchnorm",
    lambda: nnx.from_eqx(*eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")),
    _pure(lambda m, x, k: _batched(m, x + 1.0)),
  ),
  Case("user_deterministic", lambda: Noisy(rngs=nnx.Rngs(0)), lambda m, x, k: m(x, k)),
  Case(
    "converted_user_inference",
    lambda: nnx.from_eqx(EqxNoisy(eqx.nn.Linear(3, 3, key=KEY))),
    lambda m, x, k: jax.vmap(lambda xi: m(xi, k))(x),
  ),
]
IDS = [c.name for c in CASES]


def _eager(case: Case, mode: bool):
  m = case.build()
  m.eval() if mode else m.train()
  return case.call(m, X, KEY)


# -- the mode of every kind of layer switches and agrees with eval()/train() ---------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inference_mode_agrees_with_eval_and_train(case):
  m = case.build()
  inf = eqx.nn.inference_mode(m)
  evaluated = case.build()
  evaluated.eval()
  assert nnx.graphdef(inf) == nnx.graphdef(evaluated)  # the same flags
  assert m.inference.value is False and inf.inference.value is True
  assert_trees_equal(case.call(inf, X, KEY), case.call(evaluated, X, KEY))
  back = eqx.nn.inference_mode(inf, value=False)
  trained = case.build()
  trained.eval()
  trained.train()
  assert nnx.graphdef(back) == nnx.graphdef(trained) == nnx.graphdef(m)
  assert_trees_equal(case.call(back, X, KEY), case.call(m, X, KEY))
  assert not jnp.array_equal(case.call(inf, X, KEY), case.call(m, X, KEY))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inference_mode_agrees_with_nnx_view(case):
  m = case.build()
  flags = {"deterministic": True, "use_running_average": True, "inference": True}
  view = nnx.view(m, raise_if_not_found=False, **flags)
  assert nnx.graphdef(view) == nnx.graphdef(eqx.nn.inference_mode(m))
  f = jax.jit(case.call)  # a view carries its own mode, not the original's cached one
  assert_trees_equal(f(view, X, KEY), f(eqx.nn.inference_mode(m), X, KEY))
  assert not jnp.array_equal(f(m, X, KEY), f(view, X, KEY))


# -- a mode is part of the compiled program's key ------------------------------------
TRANSFORMS = {"jax.jit": jax.jit, "eqx.filter_jit": eqx.filter_jit, "nnx.jit": nnx.jit}


@pytest.mark.parametrize("transform", list(TRANSFORMS), ids=list(TRANSFORMS))
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_switching_mode_retraces_once_per_mode(case, transform):
  counter = TraceCounter()
  f = TRANSFORMS[transform](counter(case.call))
  m = case.build()
  train, inference = _eager(case, False), _eager(case, True)
  y_train = f(m, X, KEY)
  y_inf = f(eqx.nn.inference_mode(m), X, KEY)
  assert counter.count == 2
  assert_trees_close(y_train, train)
  assert_trees_close(y_inf, inference)
  assert not jnp.array_equal(y_train, y_inf)
  # each mode reuses its own trace, in place or as a new module
  m.eval()
  assert_trees_equal(f(m, X, KEY), y_inf)
  m.train()
  assert_trees_equal(f(m, X, KEY), y_train)
  assert_trees_equal(f(eqx.nn.inference_mode(m), X, KEY), y_inf)
  assert counter.count == 2


@pytest.mark.parametrize("transform", list(TRANSFORMS), ids=list(TRANSFORMS))
def test_starting_in_inference_mode_then_training_retraces(transform):
  counter = TraceCounter()
  case = CASES[2]  # the other order of the reported converted-Dropout case
  f = TRANSFORMS[transform](counter(case.call))
  m = case.build()
  y_inf = f(eqx.nn.inference_mode(m), X, KEY)
  y_train = f(m, X, KEY)
  assert counter.count == 2
  assert_trees_equal(y_inf, X)
  assert not jnp.array_equal(y_train, X)


class Mixed(nnx.Module):
  """Every kind of mode flag in one model."""

  def __init__(self):
    self.drop = nnx.Dropout(0.5)
    self.bn = nnx.BatchNorm(3, rngs=nnx.Rngs(0))
    self.eqx_drop = nnx.from_eqx(eqx.nn.Dropout(0.3))
    self.noisy = Noisy(rngs=nnx.Rngs(1))

  def __call__(self, x, key):
    k1, k2, k3 = jax.random.split(key, 3)
    x = self.drop(self.bn(x + 1.0), rngs=nnx.Rngs(dropout=k1))
    return self.noisy(self.eqx_drop(x, key=k2), k3)


def _mixed_call(m, x, k):
  return nnx.clone(m)(x, k)


MIXED = Mixed()
_FRESH: dict = {}


def _fresh(transform: str, mode: bool):
  """The output of a fresh compiled call in ``mode`` (the same program)."""
  if (transform, mode) not in _FRESH:
    f = TRANSFORMS[transform](_mixed_call)
    _FRESH[transform, mode] = f(eqx.nn.inference_mode(MIXED, mode), X, KEY)
  return _FRESH[transform, mode]


@pytest.mark.parametrize("transform", list(TRANSFORMS), ids=list(TRANSFORMS))
@settings(max_examples=10, deadline=None)
@given(modes=st.lists(st.booleans(), min_size=1, max_size=6), in_place=st.booleans())
def test_law_any_sequence_of_modes(transform, modes, in_place):
  """For any sequence of modes: each call's output is a fresh call's in that mode,
  and the function traces once per distinct mode."""
  counter = TraceCounter()
  f = TRANSFORMS[transform](counter(_mixed_call))
  m = nnx.clone(MIXED)
  for mode in modes:
    if in_place:
      m.eval() if mode else m.train()
      arg = m
    else:
      arg = eqx.nn.inference_mode(m, mode)
    assert_trees_equal(f(arg, X, KEY), _fresh(transform, mode))
  assert counter.count == len(set(modes))


# -- Equinox's own layers, side by side ----------------------------------------------
def _eqx_call(m, x, k):
  return m(x, key=k)


def test_equinox_dropout_under_jax_jit_fails_where_the_conversion_retraces():
  e = eqx.nn.Sequential([eqx.nn.Linear(3, 3, key=KEY), eqx.nn.Dropout(0.5)])
  with pytest.raises(jax.errors.TracerBoolConversionError):
    jax.jit(jax.vmap(_eqx_call, in_axes=(None, 0, None)))(e, X, KEY)  # its flag is a leaf
  counter = TraceCounter()
  f = jax.jit(counter(jax.vmap(_eqx_call, in_axes=(None, 0, None))))
  m = nnx.from_eqx(e)
  eqx_f = eqx.filter_jit(jax.vmap(_eqx_call, in_axes=(None, 0, None)))
  assert_trees_close(f(m, X, KEY), eqx_f(e, X, KEY))
  assert_trees_close(f(eqx.nn.inference_mode(m), X, KEY), eqx_f(eqx.nn.inference_mode(e), X, KEY))
  assert counter.count == 2


def test_under_filter_jit_both_retrace_once_per_mode():
  e = eqx.nn.Sequential([eqx.nn.Linear(3, 3, key=KEY), eqx.nn.Dropout(0.5)])
  m = nnx.from_eqx(e)
  counts = []
  for model in (e, m):
    counter = TraceCounter()
    f = eqx.filter_jit(counter(jax.vmap(_eqx_call, in_axes=(None, 0, None))))
    for value in (False, True, False, True):
      f(eqx.nn.inference_mode(model, value), X, KEY)
    counts.append(counter.count)
  assert counts == [2, 2]


# -- Equinox's recipes in either mode ------------------------------------------------
@pytest.mark.parametrize("mode", [False, True])
def test_freezing_recipe_in_either_mode(mode):
  model = eqx.nn.inference_mode(Mixed(), mode)
  filter_spec = jax.tree.map(lambda _: False, model)
  filter_spec = eqx.tree_at(
    lambda t: (t.noisy.linear.kernel.value, t.noisy.linear.bias.value),
    filter_spec,
    replace=(True, True),
  )

  @eqx.filter_jit
  def grads(model):
    diff, static = eqx.partition(model, filter_spec)
    loss = lambda d: jnp.sum(_mixed_call(eqx.combine(d, static), X, KEY) ** 2)
    return jax.grad(loss)(diff)

  g = grads(model)
  assert [x.shape for x in jax.tree.leaves(g)] == [(3,), (3, 3)]  # bias, kernel
  diff, static = eqx.partition(model, eqx.is_array)
  back = eqx.combine(diff, static)
  assert back.drop.inference.value is mode and back.noisy.deterministic is mode
  assert_trees_equal(_mixed_call(back, X, KEY), _mixed_call(model, X, KEY))


def test_models_in_different_modes_have_different_structures():
  m = Mixed()
  # (JAX's wording differs between versions; each names a flag that differs)
  with pytest.raises(ValueError, match=r"(use_running_average|deterministic)=False"):
    jax.tree.map(lambda a, b: a, m, eqx.nn.inference_mode(m))
  assert jax.tree.leaves(m) == jax.tree.leaves(eqx.nn.inference_mode(m))  # modes are no leaves


# -- what `inference` reads and sets -------------------------------------------------
def test_unset_flag_reads_none_and_is_set_by_inference_mode_as_by_eval():
  bn = nnx.BatchNorm(3, use_running_average=None, rngs=nnx.Rngs(0))
  assert bn.inference.value is None
  with pytest.raises(TypeError, match="not one bool"):
    bool(bn.inference)
  assert eqx.nn.inference_mode(bn).use_running_average is True
  evaluated = nnx.clone(bn)
  evaluated.eval()
  assert nnx.graphdef(evaluated) == nnx.graphdef(eqx.nn.inference_mode(bn))
  y = bn(X, use_running_average=True)  # the call's flag still decides while unset
  assert_trees_equal(y, eqx.nn.inference_mode(bn)(X))


def test_setting_inference_sets_every_mode_attribute():
  class Both(nnx.Module):
    def __init__(self):
      self.deterministic = False
      self.use_running_average = True

  b = Both()
  assert b.inference.value is None  # they disagree
  b.inference = True
  assert (b.deterministic, b.use_running_average, bool(b.inference)) == (True, True, True)
  assert eqx.nn.inference_mode(b, False).use_running_average is False
  c = Both()
  c.inference = eqx.nn.inference_mode(b, False).inference  # a Mode sets its value
  assert (c.deterministic, c.use_running_average) == (False, False)


def test_modules_without_mode_attributes_have_no_inference():
  lin = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  assert not hasattr(lin, "inference")
  assert jax.tree.structure(eqx.nn.inference_mode(lin)) == jax.tree.structure(lin)


def test_an_attribute_named_inference_that_is_no_mode_is_a_plain_attribute():
  class Holder(nnx.Module):
    def __init__(self):
      self.inference = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
      self.deterministic = False

  h = Holder()
  assert isinstance(h.inference, nnx.Linear) and "inference" in nnx.state(h)
  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(h)]
  assert paths == [".inference.bias.value", ".inference.kernel.value"]
  mode_type = type(nnx.Dropout(0.5).inference)
  assert not [
    x for x in jax.tree.leaves(h, is_leaf=lambda x: type(x) is mode_type) if type(x) is mode_type
  ]  # no mode child
  del h.inference
  assert h.inference.value is False  # now `deterministic` alone makes its mode
  with pytest.raises(AttributeError, match="no attribute 'inference'"):
    del h.inference


def test_a_traced_mode_is_refused():
  with pytest.raises(nnx.ModeFlagError, match=r"A traced value was put at `.inference` of a Dr"):
    jax.jit(lambda m, b: eqx.tree_at(lambda t: t.inference, m, b).deterministic)(
      nnx.Dropout(0.5), True
    )
  with pytest.raises(nnx.ModeFlagError, match=r"A str was put at .*Fix: pass True or False"):
    eqx.tree_at(lambda t: t.inference, nnx.Dropout(0.5), "yes")
  concrete = eqx.tree_at(lambda t: t.inference, nnx.Dropout(0.5), jnp.array(True))
  assert concrete.deterministic is True

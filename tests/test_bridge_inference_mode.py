"""``eqx.nn.inference_mode`` on the Equinox form of NNX models (``nnx.to_eqx``,
``nnx.to_eqx_with_state``): native layers, converted flax.nnx models, and such forms
nested inside a user's own ``eqx.Module``. Each switch gives ``.eval()``'s (or
``.train()``'s) outputs bitwise, and the mode is part of the compiled program's key."""

import pickle

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_trees_close, assert_trees_equal

X = jnp.arange(12.0).reshape(4, 3) / 7.0 + 1.0
KEY = jax.random.key(3)


def _copy(tree):
  """A fresh copy (an ``eqx.nn.State`` may be used once)."""
  leaves, treedef = jax.tree.flatten(tree)
  return jax.tree.unflatten(treedef, leaves)


class Noisy(nnx.Module):
  """A user layer with a ``deterministic`` flag and no Dropout inside."""

  def __init__(self, *, rngs: nnx.Rngs):
    self.linear = nnx.Linear(3, 3, rngs=rngs)
    self.deterministic = False

  def __call__(self, x):
    y = self.linear(x)
    return y if self.deterministic else y + jax.random.normal(KEY, y.shape)


class Net(nnx.Module):
  """The reported model: BatchNorm and Dropout (with its own stream), and a user flag."""

  def __init__(self, *, rngs: nnx.Rngs):
    self.linear = nnx.Linear(3, 4, rngs=rngs)
    self.bn = nnx.BatchNorm(4, rngs=rngs)
    self.drop = nnx.Dropout(0.5, rngs=rngs)
    self.noisy = Noisy(rngs=rngs)
    self.out = nnx.Linear(4, 3, rngs=rngs)

  def __call__(self, x):
    return self.noisy(self.out(self.drop(self.bn(self.linear(x)))))


def _net():
  return Net(rngs=nnx.Rngs(0, dropout=1))


def _nnx_out(mode):
  """The NNX model's output after ``.eval()`` (True) or ``.train()`` (False)."""
  m = _net()
  m.eval() if mode else m.train()
  return m(X)


def _eqx_out(e, s):
  return e(X, _copy(s))[0]


# -- native models --------------------------------------------------------------------
@pytest.mark.parametrize("mode", [True, False])
def test_inference_mode_gives_eval_and_train_outputs_bitwise(mode):
  e, s = nnx.to_eqx_with_state(_net())
  switched = eqx.nn.inference_mode(e, mode)
  assert_trees_equal(_eqx_out(switched, s), _nnx_out(mode))
  assert switched.bn.use_running_average is mode and switched.drop.deterministic is mode
  assert switched.noisy.deterministic is mode and bool(switched.bn.inference) is mode


def test_inference_mode_changes_the_reported_output_and_back():
  e, s = nnx.to_eqx_with_state(_net())
  inf = eqx.nn.inference_mode(e)
  assert not jnp.array_equal(_eqx_out(inf, s), _eqx_out(e, s))
  back = eqx.nn.inference_mode(inf, value=False)
  assert jax.tree.structure(back) == jax.tree.structure(e)  # the original mode again
  assert_trees_equal(_eqx_out(back, s), _eqx_out(e, s))
  assert_trees_equal(_eqx_out(back, s), _nnx_out(False))


def test_tree_at_on_inference_switches_one_layer():
  e, s = nnx.to_eqx_with_state(_net())
  only_bn = eqx.tree_at(lambda m: m.bn.inference, e, True)
  assert only_bn.bn.use_running_average is True and only_bn.drop.deterministic is False
  m = _net()
  m.bn.eval()
  assert_trees_equal(_eqx_out(only_bn, s), m(X))


def test_converting_back_keeps_the_mode():
  net = _net()
  e, s = nnx.to_eqx_with_state(net)
  back = nnx.from_eqx(eqx.nn.inference_mode(e), s)
  evaluated = _net()
  evaluated.eval()
  assert nnx.graphdef(back) == nnx.graphdef(evaluated)
  assert_trees_equal(back(X), evaluated(X))
  again, s2 = nnx.to_eqx_with_state(back)  # converted in inference mode
  assert again.bn.inference == True  # noqa: E712 (a Mode compares as its bool)
  assert_trees_equal(_eqx_out(eqx.nn.inference_mode(again, False), s2), _nnx_out(False))


def test_a_module_converted_in_eval_mode_switches_to_training():
  net = _net()
  net.eval()
  e, s = nnx.to_eqx_with_state(net)
  assert e.drop.inference == True  # noqa: E712
  assert_trees_equal(_eqx_out(eqx.nn.inference_mode(e, False), s), _nnx_out(False))


def test_modes_are_no_leaves_and_masks_keep_the_structure():
  e, s = nnx.to_eqx_with_state(_net())
  inf = eqx.nn.inference_mode(e)
  assert jax.tree.leaves(inf) == jax.tree.leaves(e)
  mask = jax.tree.map(lambda _: False, inf)
  assert mask.bn.inference == True  # noqa: E712
  diff, static = eqx.partition(inf, eqx.is_inexact_array)
  assert_trees_equal(_eqx_out(eqx.combine(diff, static), s), _nnx_out(True))


def test_switched_form_pickles():
  e, s = nnx.to_eqx_with_state(_net())
  inf = pickle.loads(pickle.dumps(eqx.nn.inference_mode(e)))
  assert jax.tree.structure(inf) == jax.tree.structure(eqx.nn.inference_mode(e))
  assert_trees_equal(_eqx_out(inf, s), _nnx_out(True))


def test_a_traced_or_odd_mode_is_refused():
  e = nnx.to_eqx(nnx.Dropout(0.5))
  with pytest.raises(nnx.ModeFlagError, match=r"A traced value was put at `.inference` of a Dr"):
    jax.jit(lambda m, b: eqx.tree_at(lambda t: t.inference, m, b).deterministic)(e, True)
  with pytest.raises(nnx.ModeFlagError, match=r"A str was put at .*Fix: pass True or False"):
    eqx.tree_at(lambda t: t.inference, e, "yes")
  assert eqx.tree_at(lambda t: t.inference, e, jnp.array(True)).deterministic is True


def test_modules_without_a_mode_get_no_inference_field():
  e = nnx.to_eqx(nnx.Sequential(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), nnx.relu))
  assert not hasattr(e, "inference")
  assert jax.tree.structure(eqx.nn.inference_mode(e)) == jax.tree.structure(e)


# -- nested in a user's eqx.Module, beside Equinox's own layers ----------------------
class Outer(eqx.Module):
  """A user's Equinox model holding a converted one beside Equinox's own layers."""

  converted: eqx.Module
  dropout: eqx.nn.Dropout
  norm: eqx.nn.BatchNorm

  def __call__(self, x, states, *, key):
    s, norm_state = states
    y, s = self.converted(x, s)
    y = jax.vmap(lambda r: self.dropout(r, key=key))(y)
    return _batched(self.norm, y, norm_state)


def _batched(norm, y, norm_state):
  return jax.vmap(norm, in_axes=(0, None), out_axes=(0, None), axis_name="batch")(y, norm_state)[0]


def _eqx_norm():
  return eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")


@pytest.mark.parametrize("mode", [True, False])
def test_nested_form_switches_with_equinox_layers(mode):
  e, s = nnx.to_eqx_with_state(_net())
  norm, norm_state = _eqx_norm()
  switched = eqx.nn.inference_mode(Outer(e, eqx.nn.Dropout(0.5), norm), mode)
  assert switched.dropout.inference is mode and switched.norm.inference is mode
  assert switched.converted.bn.use_running_average is mode
  got = switched(X, (_copy(s), _copy(norm_state)), key=KEY)
  # the converted part gives NNX's eval()/train() output; Equinox's own layers then
  # run as Equinox's inference_mode sets them
  drop = eqx.nn.inference_mode(eqx.nn.Dropout(0.5), mode)
  y = jax.vmap(lambda r: drop(r, key=KEY))(_nnx_out(mode))
  assert_trees_close(got, _batched(eqx.nn.inference_mode(norm, mode), y, _copy(norm_state)))


@pytest.mark.parametrize("mode", [True, False])
def test_converted_dropout_under_inference_mode_agrees_with_equinox_dropout(mode):
  e, s = nnx.to_eqx_with_state(nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=0)))
  ours = eqx.nn.inference_mode(e, mode)(X, _copy(s))[0]
  theirs = eqx.nn.inference_mode(eqx.nn.Dropout(0.5), mode)(X, key=KEY)
  for y in (ours, theirs):
    if mode:  # the identity, both
      assert_trees_equal(y, X)
    else:  # units dropped, the rest scaled by 1 / (1 - p), both
      assert bool(jnp.all((y == 0) | (y == 2 * X))) and bool(jnp.any(y == 0))


def test_converted_batchnorm_in_inference_agrees_with_equinox_batchnorm():
  bn = nnx.BatchNorm(3, rngs=nnx.Rngs(0))  # fresh statistics: mean 0, var 1
  e, s = nnx.to_eqx_with_state(bn)
  ours = eqx.nn.inference_mode(e)(X, _copy(s))[0]
  norm, norm_state = _eqx_norm()
  theirs = _batched(eqx.nn.inference_mode(norm), X, norm_state)
  assert_trees_close(ours, theirs)
  trained = eqx.nn.inference_mode(eqx.nn.inference_mode(e), False)(X, _copy(s))[0]
  assert not jnp.array_equal(ours, trained)  # batch statistics again


# -- the mode is part of the compiled program's key ----------------------------------
@pytest.mark.parametrize("transform", [jax.jit, eqx.filter_jit], ids=["jax.jit", "filter_jit"])
def test_switching_retraces_once_and_switching_back_hits_the_cache(transform):
  counter = TraceCounter()
  f = transform(counter(lambda m, x, s: m(x, s)[0]))
  e, s = nnx.to_eqx_with_state(_net())
  y_train = f(e, X, _copy(s))
  y_inf = f(eqx.nn.inference_mode(e), X, _copy(s))
  assert counter.count == 2
  assert_trees_close(y_inf, jax.jit(lambda m: _copy(m)(X))(_eval_net()))  # another program
  y_back = f(eqx.nn.inference_mode(eqx.nn.inference_mode(e), False), X, _copy(s))
  assert_trees_equal(f(eqx.nn.inference_mode(e), X, _copy(s)), y_inf)
  assert counter.count == 2
  assert_trees_equal(y_back, y_train)
  assert not jnp.array_equal(y_train, y_inf)


def _eval_net():
  m = _net()
  m.eval()
  return m


# -- converted flax.nnx models --------------------------------------------------------
def _flax_net():
  fnnx = pytest.importorskip("flax.nnx", reason="needs flax (the `flax` extra)")

  class FlaxNet(fnnx.Module):
    def __init__(self, rngs):
      self.linear = fnnx.Linear(3, 4, rngs=rngs)
      self.bn = fnnx.BatchNorm(4, rngs=rngs)
      self.drop = fnnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
      return self.drop(self.bn(self.linear(x)))

  return FlaxNet(fnnx.Rngs(0, dropout=1))


@pytest.mark.parametrize("mode", [True, False])
def test_converted_flax_model_switches_on_both_sides(mode):
  flax_model = _flax_net()
  reference = nnx.from_flax(flax_model)
  reference.eval() if mode else reference.train()
  want = reference(X)
  # the NNX side: inference_mode reaches flax's own layers
  assert_trees_equal(eqx.nn.inference_mode(nnx.from_flax(_flax_net()), mode)(X), want)
  # the Equinox form, alone and nested
  e, s = nnx.to_eqx_with_state(nnx.from_flax(_flax_net()))
  switched = eqx.nn.inference_mode(e, mode)
  # the flags are the layers' own (each flax submodule converts to a module of its own)
  assert switched.drop.deterministic is mode and switched.bn.use_running_average is mode
  assert_trees_equal(switched(X, _copy(s))[0], want)
  wrapper = eqx.nn.inference_mode([e, eqx.nn.Dropout(0.5)], mode)
  assert_trees_equal(wrapper[0](X, _copy(s))[0], want)
  assert wrapper[1].inference is mode


def test_converted_flax_model_retraces_once_per_mode():
  counter = TraceCounter()
  f = eqx.filter_jit(counter(lambda m, x, s: m(x, s)[0]))
  e, s = nnx.to_eqx_with_state(nnx.from_flax(_flax_net()))
  inf = f(eqx.nn.inference_mode(e), X, _copy(s))
  train = f(eqx.nn.inference_mode(e, False), X, _copy(s))
  assert counter.count == 2
  assert_trees_equal(f(eqx.nn.inference_mode(e), X, _copy(s)), inf)
  assert_trees_equal(f(eqx.nn.inference_mode(e, False), X, _copy(s)), train)
  assert counter.count == 2
  assert not jnp.array_equal(inf, train)

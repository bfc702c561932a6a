"""Equinox's file format for NNX modules: nnx.tree_serialise_leaves / tree_deserialise_leaves.

Files written by Equinox models load into their conversions and back, on
Equinox's stateful example (BatchNorm + SpectralNorm), its DCGAN generator, and
random ``eqx.nn`` models (hypothesis). Loading copies values, no computation:
comparisons are bitwise.
"""

import io

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import pytest
from hypothesis import given

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal, eqx_models

XS = jr.normal(jr.key(1), (10, 3))


class StatefulModel(eqx.Module):
  """The model of Equinox's ``examples/stateful.ipynb``."""

  norm1: eqx.nn.BatchNorm
  spectral_linear: eqx.nn.SpectralNorm
  norm2: eqx.nn.BatchNorm
  linear1: eqx.nn.Linear
  linear2: eqx.nn.Linear

  def __init__(self, key):
    k1, k2, k3, k4 = jr.split(key, 4)
    self.norm1 = eqx.nn.BatchNorm(3, axis_name="batch", mode="ema")
    linear = eqx.nn.Linear(3, 32, key=k1)
    self.spectral_linear = eqx.nn.SpectralNorm(linear, weight_name="weight", key=k2)
    self.norm2 = eqx.nn.BatchNorm(32, axis_name="batch", mode="ema")
    self.linear1 = eqx.nn.Linear(32, 32, key=k3)
    self.linear2 = eqx.nn.Linear(32, 3, key=k4)

  def __call__(self, x, state):
    x, state = self.norm1(x, state)
    x, state = self.spectral_linear(x, state)
    x = jax.nn.relu(x)
    x, state = self.norm2(x, state)
    x = jax.nn.relu(self.linear1(x))
    return self.linear2(x), state


class Generator(eqx.Module):
  """A small DCGAN generator as in Equinox's ``examples/deep_convolutional_gan``."""

  layers: list

  def __init__(self, key):
    k1, k2 = jr.split(key)
    self.layers = [
      eqx.nn.ConvTranspose2d(4, 8, 3, stride=1, use_bias=False, key=k1),
      eqx.nn.BatchNorm(8, axis_name="batch", mode="batch"),
      eqx.nn.Lambda(jax.nn.relu),
      eqx.nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1, use_bias=False, key=k2),
      eqx.nn.Lambda(jnp.tanh),
    ]

  def __call__(self, x, state):
    for layer in self.layers:
      if isinstance(layer, eqx.nn.BatchNorm):
        x, state = layer(x, state)
      else:
        x = layer(x)
    return x, state


def eqx_batched(model, state, xs):
  return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(xs, state)


def trained(make, xs, key=0):
  """An Equinox model and state after two training-mode steps (state is not initial)."""
  model, state = eqx.nn.make_with_state(make)(jr.key(key))
  for step in range(2):
    _, state = eqx_batched(model, state, xs + step)
  return model, state


def write(tree, writer=eqx.tree_serialise_leaves):
  buf = io.BytesIO()
  writer(buf, tree)
  buf.seek(0)
  return buf


CASES = {
  "stateful": (StatefulModel, XS),
  "dcgan": (Generator, jr.normal(jr.key(2), (4, 4, 3, 3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_equinox_file_loads_into_the_conversion(name, tmp_path):
  make, xs = CASES[name]
  model, state = trained(make, xs)
  path = tmp_path / "model.eqx"
  eqx.tree_serialise_leaves(path, (model, state))  # as Equinox's examples save
  like = nnx.from_eqx(*eqx.nn.make_with_state(make)(jr.key(7)))  # other weights, initial state
  before = nnx.state(like)
  module = nnx.tree_deserialise_leaves(path, like)
  assert_trees_equal(nnx.to_eqx_with_state(module), (model, state))
  assert_trees_equal(nnx.state(like), before)  # `like` is left unchanged
  assert type(module) is type(like)
  # The loaded module runs as the Equinox model does, batched, training and inference.
  ys, state = eqx_batched(model, state, xs)  # the module's state advances too
  out = nnx.vmap(lambda m, x: m(x, None)[0], in_axes=(None, 0), axis_name="batch")(module, xs)
  assert_trees_close(out, ys)
  module.eval()
  inference = eqx.Partial(eqx.nn.inference_mode(model), state=state)
  # Equinox's BatchNorm computes `momentum ** counter`; a counter read from a file
  # is a strong int32 (as Equinox's own loader gives it), which strict promotion refuses.
  with jax.numpy_dtype_promotion("standard"):
    expected = jax.vmap(inference)(xs)[0]
    out = nnx.vmap(lambda m, x: m(x, None)[0], in_axes=(None, 0))(module, xs)
  assert_trees_close(out, expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_conversion_file_loads_into_the_equinox_model(name):
  make, xs = CASES[name]
  model, state = trained(make, xs)
  module = nnx.from_eqx(model, state)
  fresh = eqx.nn.make_with_state(make)(jr.key(7))
  back = eqx.tree_deserialise_leaves(write(module, nnx.tree_serialise_leaves), fresh)
  assert_trees_equal(back, (model, state))
  # and through our own reader, into another conversion
  again = nnx.tree_deserialise_leaves(
    write(module, nnx.tree_serialise_leaves), nnx.from_eqx(*fresh)
  )
  assert_trees_equal(nnx.state(again), nnx.state(module))


def test_native_module_with_rngs_round_trips():
  module = nnx.Sequential(
    nnx.Linear(3, 4, rngs=nnx.Rngs(0)), nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=1)), nnx.relu
  )
  module.layers[1].rngs()  # advance the count
  like = nnx.Sequential(
    nnx.Linear(3, 4, rngs=nnx.Rngs(5)), nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=9)), nnx.relu
  )
  back = nnx.tree_deserialise_leaves(write(module, nnx.tree_serialise_leaves), like)
  assert_trees_equal(
    jax.tree.map(_key_data, nnx.state(back)), jax.tree.map(_key_data, nnx.state(module))
  )


def _key_data(x):
  return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x


def test_a_stateless_equinox_model_saved_alone_loads():
  model = eqx.nn.MLP(3, 2, 8, 2, key=jr.key(0))
  like = nnx.from_eqx(eqx.nn.MLP(3, 2, 8, 2, key=jr.key(1)))
  module = nnx.tree_deserialise_leaves(write(model), like)
  assert_trees_equal(nnx.to_eqx(module), model)
  assert_trees_equal(module.layers[0].weight.value, model.layers[0].weight)
  native = nnx.from_eqx(eqx.nn.MLP(3, 2, 8, 2, key=jr.key(1)), native=True)
  module = nnx.tree_deserialise_leaves(write(model), native)  # nnx.Linear layers
  assert_trees_equal(module.layers[0].kernel.value, model.layers[0].weight.T)


def test_shape_mismatch_names_the_equinox_path():
  f = write(eqx.nn.Linear(3, 4, key=jr.key(0)))
  with pytest.raises(nnx.EqxFileMismatchError, match=r"weight.*shape.*Fix: pass as `like`"):
    nnx.tree_deserialise_leaves(f, nnx.Linear(3, 5, rngs=nnx.Rngs(0)))


def test_a_file_that_ends_early_is_refused():
  f = write(eqx.nn.Linear(3, 4, key=jr.key(0)))
  like = nnx.Sequential(nnx.Linear(3, 4, rngs=nnx.Rngs(0)), nnx.Linear(4, 4, rngs=nnx.Rngs(1)))
  with pytest.raises(nnx.EqxFileMismatchError, match=r"does not fit the Equinox form") as e:
    nnx.tree_deserialise_leaves(f, like)
  assert isinstance(e.value, RuntimeError)


def test_a_path_with_leaves_beyond_like_is_refused(tmp_path):
  path = tmp_path / "two.eqx"
  eqx.tree_serialise_leaves(path, [eqx.nn.Linear(3, 3, key=jr.key(0))] * 2)
  with pytest.raises(nnx.EqxFileMismatchError, match=r"holds more leaves than the Equinox form"):
    nnx.tree_deserialise_leaves(path, nnx.Linear(3, 3, rngs=nnx.Rngs(0)))


def test_the_nnx_module_as_like_of_equinox_reads_nnx_layouts():
  # Why the functions exist: a square Linear loads into the NNX module's own
  # pytree view without error, but transposed (NNX's kernel is Equinox's weight.T).
  model = eqx.nn.Linear(3, 3, use_bias=False, key=jr.key(0))
  direct = eqx.tree_deserialise_leaves(
    write(model), nnx.Linear(3, 3, use_bias=False, rngs=nnx.Rngs(1))
  )
  assert_trees_equal(direct.kernel.value, model.weight)  # not model.weight.T
  right = nnx.tree_deserialise_leaves(
    write(model), nnx.Linear(3, 3, use_bias=False, rngs=nnx.Rngs(1))
  )
  assert_trees_equal(right.kernel.value, model.weight.T)


def _zeroed(tree):
  return jax.tree.map(lambda x: jnp.zeros_like(x) if eqx.is_array(x) else x, tree)


@given(eqx_models())
def test_law_equinox_file_to_conversion_and_back(case):
  tree = case.model if case.state is None else (case.model, case.state)
  like = nnx.from_eqx(*(_zeroed((case.model, case.state))))
  module = nnx.tree_deserialise_leaves(write(tree), like)
  assert_trees_equal(nnx.state(module), nnx.state(nnx.from_eqx(case.model, case.state)))
  back = eqx.tree_deserialise_leaves(write(module, nnx.tree_serialise_leaves), _zeroed(tree))
  assert_trees_equal(back, tree)

"""nnx.capture(method_outputs=...) sows the outputs of every module's methods, the library's
layers included, and returns States in sorted key order (flax.nnx's intermediates guide)."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Foo(nnx.Module):
  def __init__(self, rngs):
    self.dense1 = nnx.Linear(8, 4, rngs=rngs)

  def features(self, x):
    return nnx.relu(self.dense1(x))

  def __call__(self, x, y):
    return jnp.sum((self.features(x) - self.features(y)) ** 2)


def test_layers_sow_their_outputs_and_keys_are_sorted():
  model = Foo(nnx.Rngs(0))
  x, y = jnp.ones(8), jnp.zeros(8)
  traces = []
  before = nnx.Linear.__call__

  @nnx.jit
  def run(model, x, y):
    traces.append(1)
    return nnx.capture(model, nnx.Intermediate, method_outputs=nnx.Intermediate)(x, y)

  out, intms = run(model, x, y)
  shapes = jax.tree.map(lambda a: a.shape, intms.to_pure_dict())
  assert shapes == {
    "__call__": ((),),
    "dense1": {"__call__": ((4,), (4,))},
    "features": ((4,), (4,)),
  }
  assert list(intms) == ["__call__", "dense1", "features"]
  run(model, x, y)
  assert len(traces) == 1
  assert nnx.Linear.__call__ is before


def test_an_error_inside_restores_the_methods_and_leaves_no_captures():
  model = Foo(nnx.Rngs(0))
  before = nnx.Linear.__call__

  def boom(m, x):
    m.dense1(x)
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    nnx.capture(boom, nnx.Intermediate, method_outputs=nnx.Intermediate)(model, jnp.ones(8))
  assert nnx.Linear.__call__ is before
  assert "__captures__" not in vars(model.dense1)

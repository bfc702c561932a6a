"""nnx.capture leaves no sown attribute on the module (flax's test_sow_pop checks the
same through flax's private ``_pytree__nodes``)."""

import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


def _attributes(m) -> set:
  return {k for k in vars(m) if not k.startswith("_nnx_")}


class SowMod(nnx.Module):
  def __init__(self, rngs, fail=False):
    self.linear = nnx.Linear(4, 4, rngs=rngs)
    self.fail = fail

  def __call__(self, x):
    y = self.linear(x)
    self.sow(nnx.Intermediate, "my_summary", y.mean())
    if self.fail:
      raise RuntimeError("boom")
    return y * 2


def test_capture_returns_the_sown_value_and_removes_the_attribute():
  model = SowMod(nnx.Rngs(42))
  before = _attributes(model)
  _, intermediates = nnx.capture(model, nnx.Intermediate)(jnp.ones((2, 4)))
  assert list(intermediates) == ["my_summary"]
  assert _attributes(model) == before and not hasattr(model, "my_summary")


def test_capture_removes_the_attribute_after_an_error():
  model = SowMod(nnx.Rngs(42), fail=True)
  before = nnx.state(model)
  with pytest.raises(RuntimeError, match="boom"):
    nnx.capture(model, nnx.Intermediate)(jnp.ones((2, 4)))
  assert not hasattr(model, "my_summary")
  assert_trees_equal(nnx.state(model), before)

"""WeightNorm: the wrapped layer's kernel becomes scale * w / ||w|| before each call."""

import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


def randn(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def test_weight_norm_normalizes_columns_and_scales():
  dense = nnx.Linear(5, 3, rngs=nnx.Rngs(0))
  w = dense.kernel.value
  wn = nnx.WeightNorm(dense, scale_init=nnx.initializers.constant(2.0), rngs=nnx.Rngs(1))
  assert list(wn.scales) == [("kernel",)] and isinstance(wn.scales[("kernel",)], nnx.Param)
  x = randn(4, 5)
  y = wn(x)
  w_bar = 2.0 * w / jnp.sqrt((w * w).sum(axis=0, keepdims=True) + 1e-12)
  assert_trees_close(dense.kernel.value, w_bar)
  assert_trees_close(y, x @ w_bar + dense.bias.value)
  # normalizing is idempotent: a second call sees the same weights
  assert_trees_close(wn(x), y)


def test_weight_norm_feature_axes_none_and_no_scale():
  dense = nnx.Linear(5, 3, rngs=nnx.Rngs(0))
  w = dense.kernel.value
  wn = nnx.WeightNorm(dense, feature_axes=None, use_scale=False, rngs=nnx.Rngs(1))
  assert wn.scales is None
  wn(randn(2, 5))
  assert_trees_close(dense.kernel.value, w / jnp.sqrt((w * w).sum() + 1e-12))


def test_weight_norm_scales_are_trainable_state():
  wn = nnx.WeightNorm(nnx.Linear(3, 2, rngs=nnx.Rngs(0)), rngs=nnx.Rngs(1))
  grads = nnx.grad(lambda m: m(jnp.ones((1, 3))).sum())(wn)
  assert grads["scales"]["params"][0].value.shape == (2,)
  assert bool(jnp.any(grads["scales"]["params"][0].value != 0))
  assert "scales" in nnx.state(wn, nnx.Param)  # the attribute name flax.nnx 0.12.12 uses


def test_weight_norm_rejects_a_changed_layer():
  dense = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
  wn = nnx.WeightNorm(dense, variable_filter=nnx.PathContains("kernel"), rngs=nnx.Rngs(1))
  dense.extra = nnx.Linear(2, 2, rngs=nnx.Rngs(2))
  with pytest.raises(
    nnx.LayerConfigError, match=r"no scale for the weight at path \('extra', 'kernel'\)"
  ):
    wn(jnp.ones((1, 3)))

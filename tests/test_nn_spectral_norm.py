"""SpectralNorm: weights divided by a power-iteration estimate of their top singular value."""

import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal


def randn(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def power_iteration(w, u, steps, eps=1e-12):
  """The reference: ``steps`` rounds of u <- normalize(normalize(u W^T) W)."""
  for _ in range(steps):
    v = u @ w.T
    v = v / jnp.sqrt((v * v).sum() + eps)
    u = v @ w
    u = u / jnp.sqrt((u * u).sum() + eps)
  return u, v, (v @ w @ u.T)[0, 0]


def test_spectral_norm_matches_a_power_iteration_reference():
  dense = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
  w = dense.kernel.value
  sn = nnx.SpectralNorm(dense, n_steps=3, rngs=nnx.Rngs(1))
  u0 = sn.batch_stats[("kernel", "u")].value
  assert u0.shape == (1, 3)
  x = randn(2, 4)
  y = sn(x)
  u, _, sigma = power_iteration(w, u0, 3)
  assert_trees_close(dense.kernel.value, w / sigma)
  assert_trees_close(y, x @ (w / sigma) + dense.bias.value)
  assert_trees_close(sn.batch_stats[("kernel", "u")].value, u)
  assert_trees_close(sn.batch_stats[("kernel", "sigma")].value, sigma)


def test_many_steps_reach_the_top_singular_value():
  dense = nnx.Linear(6, 5, rngs=nnx.Rngs(0))
  top = np.linalg.svd(np.asarray(dense.kernel.value), compute_uv=False)[0]
  sn = nnx.SpectralNorm(dense, n_steps=200, rngs=nnx.Rngs(1))
  sn(jnp.ones((1, 6)))
  assert_trees_close(sn.batch_stats[("kernel", "sigma")].value, jnp.float32(top))


def test_eval_mode_keeps_the_statistics():
  sn = nnx.SpectralNorm(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), rngs=nnx.Rngs(1))
  u0 = sn.batch_stats[("kernel", "u")].value
  sn.eval()
  sn(jnp.ones((1, 4)))
  assert_trees_equal(sn.batch_stats[("kernel", "u")].value, u0)
  sn(jnp.ones((1, 4)), update_stats=True)  # the call argument wins
  assert not np.array_equal(np.asarray(sn.batch_stats[("kernel", "u")].value), np.asarray(u0))


def test_conv_kernels_are_flattened_or_rejected():
  conv = nnx.Conv(2, 3, (3, 3), rngs=nnx.Rngs(0))
  sn = nnx.SpectralNorm(conv, rngs=nnx.Rngs(1))
  assert sn.batch_stats[("kernel", "u")].value.shape == (1, 3)
  assert sn(jnp.ones((1, 4, 4, 2))).shape == (1, 4, 4, 3)
  with pytest.raises(nnx.LayerConfigError, match=r"path \('kernel',\) has 4 axes"):
    nnx.SpectralNorm(conv, error_on_non_matrix=True, rngs=nnx.Rngs(1))

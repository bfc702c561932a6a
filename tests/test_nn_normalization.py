"""Normalization layers: exact math against the formulas, BatchNorm running statistics and
its ``use_running_average`` flag, dtypes, named-axis statistics, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal


def randn(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def np_init(key, shape, dtype=jnp.float32):
  return jnp.asarray(1.0 + 0.1 * np.random.default_rng(len(shape)).standard_normal(shape), dtype)


INIT = {"scale_init": np_init, "bias_init": np_init}


def _fast_stats(x, axes):
  mean = x.mean(axes)
  return mean, jnp.maximum(0.0, lax.square(x).mean(axes) - lax.square(mean))


def _manual_norm(x, mean, var, scale, bias, eps, stats_shape):
  y = x - mean.reshape(stats_shape)
  mul = lax.rsqrt(var.reshape(stats_shape) + eps)
  if scale is not None:
    mul = mul * scale
  y = y * mul
  return y + bias if bias is not None else y


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)])
def test_layernorm_matches_the_formula(shape):
  ln = nnx.LayerNorm(4, rngs=nnx.Rngs(0), **INIT)
  x = randn(*shape)
  mean, var = _fast_stats(x, -1)
  expected = _manual_norm(x, mean, var, ln.scale.value, ln.bias.value, 1e-6, (*shape[:-1], 1))
  assert_trees_close(ln(x), expected)
  assert ln.epsilon == 1e-6  # flax.nnx's default


def test_layernorm_slow_variance_and_no_scale_bias():
  ln = nnx.LayerNorm(4, use_scale=False, use_bias=False, use_fast_variance=False)
  assert ln.scale is None and ln.bias is None and len(nnx.state(ln)) == 0
  x = randn(3, 4)
  mean = x.mean(-1)
  var = lax.square(x - mean[:, None]).mean(-1)
  assert_trees_close(ln(x), _manual_norm(x, mean, var, None, None, 1e-6, (3, 1)))


@pytest.mark.parametrize(
  "x_dtype,dtype,out_dtype",
  [
    (jnp.bfloat16, None, jnp.float32),  # promoted with the float32 scale/bias, as flax
    (jnp.bfloat16, jnp.bfloat16, jnp.bfloat16),
    (jnp.float32, jnp.bfloat16, jnp.bfloat16),
  ],
)
def test_norm_dtypes(x_dtype, dtype, out_dtype):
  x = randn(3, 4).astype(x_dtype)
  for layer in (nnx.LayerNorm(4, dtype=dtype), nnx.RMSNorm(4, dtype=dtype)):
    assert layer(x).dtype == out_dtype
  bn = nnx.BatchNorm(4, dtype=dtype)
  assert bn(x).dtype == out_dtype and bn.mean.value.dtype == jnp.float32


def test_rmsnorm_matches_the_formula():
  rms = nnx.RMSNorm(4, scale_init=np_init)
  x = randn(2, 3, 4)
  var = lax.square(x).mean(-1)
  expected = _manual_norm(x, jnp.zeros_like(var), var, rms.scale.value, None, 1e-6, (2, 3, 1))
  assert_trees_close(rms(x), expected)
  assert sorted(nnx.state(rms)) == ["scale"]  # no bias, as flax


def test_groupnorm_matches_the_formula():
  gn = nnx.GroupNorm(6, num_groups=3, **INIT)
  x = randn(2, 5, 6)
  g = x.reshape(2, 5, 3, 2)
  mean, var = _fast_stats(g, (1, 3))  # per example and group, over space and channels
  mean, var = jnp.repeat(mean, 2, axis=-1), jnp.repeat(var, 2, axis=-1)
  expected = _manual_norm(x, mean, var, gn.scale.value, gn.bias.value, 1e-6, (2, 1, 6))
  assert_trees_close(gn(x), expected)
  assert nnx.GroupNorm(6, num_groups=None, group_size=2).num_groups == 3


def test_groupnorm_config_errors():
  with pytest.raises(nnx.LayerConfigError, match="exactly one of num_groups and group_size"):
    nnx.GroupNorm(6, num_groups=3, group_size=2)
  with pytest.raises(nnx.LayerConfigError, match="num_groups=4 does not divide num_features=6"):
    nnx.GroupNorm(6, num_groups=4)


def test_batchnorm_training_normalizes_with_batch_stats_and_updates_running_stats():
  bn = nnx.BatchNorm(3, momentum=0.9, **INIT)
  x = randn(4, 5, 3)
  mean, var = _fast_stats(x, (0, 1))
  expected = _manual_norm(x, mean, var, bn.scale.value, bn.bias.value, 1e-5, (1, 1, 3))
  assert_trees_close(bn(x), expected)
  assert_trees_close(bn.mean.value, 0.9 * jnp.zeros(3) + (1 - 0.9) * mean)
  assert_trees_close(bn.var.value, 0.9 * jnp.ones(3) + (1 - 0.9) * var)
  assert isinstance(bn.mean, nnx.BatchStat) and isinstance(bn.var, nnx.BatchStat)
  assert bn.momentum == 0.9 and nnx.BatchNorm(3).momentum == 0.99 and bn.epsilon == 1e-5


def test_batchnorm_running_average_mode_uses_and_keeps_the_running_stats():
  bn = nnx.BatchNorm(3, use_running_average=True, **INIT)
  bn.mean.value = jnp.array([1.0, 2.0, 3.0])
  bn.var.value = jnp.array([4.0, 5.0, 6.0])
  x = randn(4, 3)
  expected = _manual_norm(
    x, bn.mean.value, bn.var.value, bn.scale.value, bn.bias.value, 1e-5, (1, 3)
  )
  assert_trees_close(bn(x), expected)
  assert_trees_equal(bn.mean.value, [1.0, 2.0, 3.0])  # unchanged


def test_batchnorm_call_argument_wins_over_the_attribute():
  bn = nnx.BatchNorm(3, use_running_average=True)
  bn(randn(4, 3), use_running_average=False)  # explicit False wins: stats move
  assert not np.array_equal(bn.mean.value, jnp.zeros(3))
  bn.train()  # attribute False; an explicit True wins: stats stay
  before = bn.mean.value
  bn(randn(4, 3, seed=1), use_running_average=True)
  assert_trees_equal(bn.mean.value, before)
  bn.use_running_average = None
  with pytest.raises(nnx.MissingFlagError, match="use_running_average.*model.eval"):
    bn(randn(4, 3))


def test_batchnorm_axis_and_mask():
  bn = nnx.BatchNorm(5, axis=1)
  x = randn(4, 5, 2)
  mean, _ = _fast_stats(x, (0, 2))
  bn(x)
  assert_trees_close(bn.mean.value, 0.01 * mean)
  bn2 = nnx.BatchNorm(3)
  x2 = randn(4, 3)
  mask = jnp.array([True, True, False, False])[:, None]
  bn2(x2, mask=mask)
  assert_trees_close(bn2.mean.value, 0.01 * x2[:2].mean(0))


def test_batchnorm_axis_name_averages_over_the_named_axis():
  """Per-device batches under vmap(axis_name) give the full-batch statistics."""
  x = randn(4, 6, 3)  # 4 "devices" of 6 examples
  bn = nnx.BatchNorm(3, axis_name="devices", use_fast_variance=False)
  graphdef, state = nnx.split(bn)

  def per_device(xs):
    m = nnx.merge(graphdef, state)
    y = m(xs)
    return y, m.mean.value

  ys, means = jax.vmap(per_device, axis_name="devices")(x)
  full = nnx.BatchNorm(3, use_fast_variance=False)
  y_full = full(x.reshape(24, 3))
  # per-device partial sums + psum against one 24-row reduction: outputs near zero
  assert_trees_close(ys.reshape(24, 3), y_full, atol=1e-5)
  assert_trees_close(means[0], full.mean.value)


def test_batchnorm_stats_propagate_through_nnx_jit_and_grads_skip_them():
  bn = nnx.BatchNorm(3)
  x = randn(8, 3)

  @nnx.jit
  def step(m, x):
    return nnx.grad(lambda m: (m(x) ** 2).sum())(m)

  grads = step(bn, x)
  assert sorted(grads) == ["bias", "scale"]
  assert_trees_close(bn.mean.value, 0.01 * x.mean(0))


def test_norm_feature_size_errors():
  with pytest.raises(nnx.InputShapeError, match=r"has 5 features on axes \(1,\).*num_features=4"):
    nnx.LayerNorm(4)(jnp.ones((2, 5)))
  with pytest.raises(nnx.InputShapeError, match="num_features=3"):
    nnx.BatchNorm(3)(jnp.ones((2, 4)))
  with pytest.raises(nnx.InputShapeError, match="num_features=6"):
    nnx.GroupNorm(6, num_groups=3)(jnp.ones((2, 4)))

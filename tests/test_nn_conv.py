"""Conv and ConvTranspose: exact equality with jax.lax, batching rules, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


def randn(*shape, seed=0):
  """Test data from NumPy (jax.random compiles per shape, which is slow on CPU)."""
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def np_init(key, shape, dtype=jnp.float32):
  return jnp.asarray(np.random.default_rng(len(shape)).standard_normal(shape), dtype)


INIT = {"kernel_init": np_init, "bias_init": jax.nn.initializers.ones}


def _ref_conv(conv, x, *, padding, strides=1, lhs=1, rhs=1, groups=1):
  n = len(conv.kernel_size)
  spatial = "DHW"[-n:] if n > 1 else "W"
  spec = ("N" + spatial + "C", spatial + "IO", "N" + spatial + "C")
  t = lambda v: (v,) * n if isinstance(v, int) else tuple(v)
  y = lax.conv_general_dilated(
    x,
    conv.kernel.value,
    t(strides),
    padding,
    lhs_dilation=t(lhs),
    rhs_dilation=t(rhs),
    dimension_numbers=spec,
    feature_group_count=groups,
  )
  return y + conv.bias.value


@pytest.mark.parametrize(
  "kernel_size,kwargs,lax_padding",
  [
    ((3,), {}, "SAME"),
    ((3, 3), {}, "SAME"),
    ((3, 3), {"padding": "VALID", "strides": 2}, "VALID"),
    ((2, 3), {"padding": 1, "kernel_dilation": 2}, [(1, 1), (1, 1)]),
    ((3, 3), {"padding": [(0, 1), (2, 0)], "strides": (1, 2)}, [(0, 1), (2, 0)]),
    ((3, 3), {"input_dilation": 2, "padding": 1}, [(1, 1), (1, 1)]),
    ((2, 2, 2), {"padding": "VALID", "strides": 2}, "VALID"),
  ],
)
def test_conv_matches_conv_general_dilated(kernel_size, kwargs, lax_padding):
  conv = nnx.Conv(4, 6, kernel_size, rngs=nnx.Rngs(0), **kwargs, **INIT)
  x = randn(2, *(5,) * len(kernel_size), 4)
  expected = _ref_conv(
    conv,
    x,
    padding=lax_padding,
    strides=kwargs.get("strides", 1),
    lhs=kwargs.get("input_dilation", 1),
    rhs=kwargs.get("kernel_dilation", 1),
  )
  assert_trees_close(conv(x), expected)
  assert conv.kernel.value.shape == (*kernel_size, 4, 6) and conv.bias.value.shape == (6,)


def test_conv_feature_groups():
  conv = nnx.Conv(4, 6, (3, 3), feature_group_count=2, rngs=nnx.Rngs(0), **INIT)
  assert conv.kernel.value.shape == (3, 3, 2, 6)
  x = randn(2, 5, 5, 4)
  assert_trees_close(conv(x), _ref_conv(conv, x, padding="SAME", groups=2))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_conv_batched_unbatched_and_multi_batch_agree(dtype):
  conv = nnx.Conv(3, 5, (3, 3), dtype=dtype, rngs=nnx.Rngs(0), **INIT)
  x = randn(2, 3, 6, 6, 3)
  y = conv(x)
  assert y.shape == (2, 3, 6, 6, 5) and y.dtype == dtype
  assert_trees_close(y[1, 2], conv(x[1, 2]))
  assert_trees_close(y.reshape(6, 6, 6, 5), conv(x.reshape(6, 6, 6, 3)))


def test_conv_circular_and_causal_padding():
  conv = nnx.Conv(2, 3, (3, 3), padding="CIRCULAR", rngs=nnx.Rngs(0), **INIT)
  x = randn(1, 5, 5, 2)
  padded = jnp.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="wrap")
  assert_trees_close(conv(x), _ref_conv(conv, padded, padding="VALID"))
  causal = nnx.Conv(2, 3, 3, padding="CAUSAL", kernel_dilation=2, rngs=nnx.Rngs(0), **INIT)
  x1 = randn(1, 8, 2)
  expected = _ref_conv(causal, jnp.pad(x1, [(0, 0), (4, 0), (0, 0)]), padding="VALID", rhs=2)
  y = causal(x1)
  assert_trees_close(y, expected)
  # causality: the output at t only depends on inputs up to t
  x2 = x1.at[:, 5:].set(0.0)
  assert_trees_close(causal(x2)[:, :5], y[:, :5])


def test_conv_mask_multiplies_the_kernel():
  mask = jnp.zeros((3, 3, 2, 4)).at[1, 1].set(1.0)
  conv = nnx.Conv(2, 4, (3, 3), mask=mask, use_bias=False, rngs=nnx.Rngs(0))
  x = randn(1, 5, 5, 2)
  assert_trees_close(conv(x), x @ conv.kernel.value[1, 1])


def test_conv_errors_name_the_problem():
  conv = nnx.Conv(3, 4, (3, 3), rngs=nnx.Rngs(0))
  with pytest.raises(nnx.InputShapeError, match=r"has 2 features.*expects 3"):
    conv(jnp.ones((1, 5, 5, 2)))
  with pytest.raises(nnx.InputShapeError, match=r"2-D convolution needs at least 3"):
    conv(jnp.ones((5, 3)))
  with pytest.raises(nnx.LayerConfigError, match="in_features=3 is not divisible by"):
    nnx.Conv(3, 4, (3, 3), feature_group_count=2, rngs=nnx.Rngs(0))
  with pytest.raises(nnx.LayerConfigError, match="Invalid padding"):
    nnx.Conv(3, 4, (3, 3), padding=[1, 2, 3], rngs=nnx.Rngs(0))
  with pytest.raises(nnx.LayerConfigError, match="CAUSAL"):
    nnx.Conv(3, 4, (3, 3), padding="CAUSAL", rngs=nnx.Rngs(0))(jnp.ones((1, 4, 4, 3)))


@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_lax(transpose_kernel):
  conv = nnx.ConvTranspose(
    3, 2, (3, 3), strides=2, transpose_kernel=transpose_kernel, rngs=nnx.Rngs(0), **INIT
  )
  x = randn(2, 4, 4, 3)
  expected = (
    lax.conv_transpose(
      x,
      conv.kernel.value,
      (2, 2),
      "SAME",
      dimension_numbers=("NHWC", "HWIO", "NHWC"),
      transpose_kernel=transpose_kernel,
    )
    + conv.bias.value
  )
  y = conv(x)
  assert y.shape == (2, 8, 8, 2)
  assert_trees_close(y, expected)
  assert_trees_close(conv(x[0]), y[0])
  with pytest.raises(nnx.LayerConfigError, match="not supported"):
    nnx.ConvTranspose(3, 2, (3, 3), padding="REFLECT", rngs=nnx.Rngs(0))


def test_conv_gradients_flow_through_nnx_grad():
  conv = nnx.Conv(2, 3, (3, 3), rngs=nnx.Rngs(0))
  x = randn(1, 4, 4, 2)
  grads = nnx.grad(lambda m: (m(x) ** 2).sum())(conv)
  expected = jax.grad(lambda k: ((_ref_conv_k(k, conv.bias.value, x)) ** 2).sum())(
    conv.kernel.value
  )
  assert_trees_close(grads.kernel.value, expected)


def _ref_conv_k(k, b, x):
  spec = ("NHWC", "HWIO", "NHWC")
  return lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=spec) + b

"""Pooling against NumPy reshapes, padding modes, batching, gradients; activations' names."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

X = np.random.default_rng(0).standard_normal((2, 4, 6, 3)).astype(np.float32)


def blocks(x):  # (B, 4, 6, C) -> non-overlapping 2x2 windows (B, 2, 3, C, 4)
  b, h, w, c = x.shape
  return x.reshape(b, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(b, 2, 3, c, 4)


@pytest.mark.parametrize(
  "fn,reduce", [(nnx.avg_pool, np.mean), (nnx.max_pool, np.max), (nnx.min_pool, np.min)]
)
def test_pooling_matches_numpy_windows(fn, reduce):
  y = fn(jnp.asarray(X), (2, 2), strides=(2, 2))
  assert_trees_close(y, reduce(blocks(X), axis=-1))
  assert_trees_close(fn(jnp.asarray(X[1]), (2, 2), strides=(2, 2)), y[1])  # unbatched


def test_same_padding_and_count_include_pad():
  x = jnp.ones((1, 3, 3, 1))
  with_pad = nnx.avg_pool(x, (2, 2), padding="SAME")
  without = nnx.avg_pool(x, (2, 2), padding="SAME", count_include_pad=False)
  assert_trees_close(with_pad[0, :, :, 0], [[1, 1, 0.5], [1, 1, 0.5], [0.5, 0.5, 0.25]])
  assert_trees_equal(without, jnp.ones((1, 3, 3, 1)))
  padded = nnx.max_pool(-x, (2, 2), padding=((0, 1), (0, 1)))  # -inf padding is never picked
  assert_trees_equal(padded, -jnp.ones((1, 3, 3, 1)))


def test_max_pool_is_differentiable_inside_jit():
  grad = jax.jit(jax.grad(lambda x: nnx.max_pool(x, (2, 2), (2, 2)).sum()))(jnp.asarray(X))
  expected = (blocks(X) == blocks(X).max(-1, keepdims=True)).astype(np.float32)
  assert_trees_equal(blocks(np.asarray(grad)), expected)


def test_pool_errors():
  with pytest.raises(nnx.LayerConfigError, match="one entry per window axis"):
    nnx.max_pool(jnp.asarray(X), (2, 2), strides=(2,))
  with pytest.raises(nnx.LayerConfigError, match=r"2 \(low, high\) pairs"):
    nnx.avg_pool(jnp.asarray(X), (2, 2), padding=((1, 1),))
  with pytest.raises(nnx.InputShapeError, match="too few axes for a 2-D window"):
    nnx.min_pool(jnp.ones((4, 3)), (2, 2))


def test_activations_are_jax_nn_under_flax_names():
  for name in ["relu", "gelu", "silu", "swish", "sigmoid", "softmax", "log_softmax", "elu"]:
    assert getattr(nnx, name) is getattr(jax.nn, name)
  assert nnx.tanh is jnp.tanh and nnx.one_hot is jax.nn.one_hot
  assert nnx.leaky_relu is jax.nn.leaky_relu and nnx.standardize is jax.nn.standardize
  assert nnx.nn.activations.relu is jax.nn.relu


def test_prelu():
  act = nnx.PReLU(0.25)
  x = jnp.array([-2.0, 0.0, 3.0])
  assert_trees_close(act(x), jnp.where(x >= 0, x, 0.25 * x))
  assert isinstance(act.negative_slope, nnx.Param) and act.negative_slope.value.shape == ()
  grads = nnx.grad(lambda m: m(x).sum())(act)
  assert float(grads.negative_slope.value) == -2.0

"""InstanceNorm and var_defaults."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


def _reference_instance_norm(x, scale, bias, eps):
  x = np.asarray(x, np.float64)
  axes = tuple(range(1, x.ndim - 1))
  mean = x.mean(axis=axes, keepdims=True)
  var = x.var(axis=axes, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * scale + bias


@pytest.mark.parametrize("shape", [(2, 7, 3), (3, 4, 5, 3)])
def test_instance_norm_matches_a_numpy_reference(shape):
  x = jax.random.normal(jax.random.key(0), shape) * 3 + 1
  layer = nnx.InstanceNorm(3, rngs=nnx.Rngs(0))
  layer.scale.value = jnp.array([1.0, 2.0, 0.5])
  layer.bias.value = jnp.array([0.0, -1.0, 1.0])
  expected = _reference_instance_norm(
    x, np.array([1.0, 2.0, 0.5]), np.array([0.0, -1.0, 1.0]), 1e-6
  )
  assert_trees_close(layer(x), jnp.asarray(expected, jnp.float32))


def test_instance_norm_feature_axis_and_errors():
  x = jax.random.normal(jax.random.key(1), (2, 3, 6))
  layer = nnx.InstanceNorm(3, feature_axes=1, use_bias=False, use_scale=False)
  y = layer(x)
  assert_trees_close(y.mean(axis=2), jnp.zeros((2, 3)), atol=1e-5)
  assert layer.scale is None and layer.bias is None
  with pytest.raises(nnx.InputShapeError, match="num_features=3"):
    nnx.InstanceNorm(3)(jnp.ones((2, 4, 5)))
  with pytest.raises(nnx.LayerConfigError, match="exactly one axis"):
    nnx.InstanceNorm(3, feature_axes=(1, 2))
  with pytest.raises(nnx.LayerConfigError, match="batch axis"):
    nnx.InstanceNorm(2, feature_axes=0)(jnp.ones((2, 4)))


def test_var_defaults_set_read_and_restore():
  assert dict(nnx.var_defaults()) == {"hijax": False, "ref": False}

  @nnx.var_defaults(ref=True)
  def inside():
    return nnx.var_defaults().ref

  assert inside() is True and nnx.var_defaults()["ref"] is False
  with nnx.var_defaults(hijax=True):
    assert nnx.var_defaults().hijax is True
  assert nnx.var_defaults().hijax is False
  with pytest.raises(TypeError, match="must be a bool"):
    nnx.var_defaults(hijax=1)

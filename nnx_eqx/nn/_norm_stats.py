"""Statistics and the normalization formula shared by the normalization layers (as flax.nnx).

Statistics are computed in at least float32. With ``use_fast_variance`` (the
default) the variance is ``max(0, E[x^2] - E[x]^2)``, else ``E[(x - E[x])^2]``.
The output is ``(x - mean) * (rsqrt(var + epsilon) * scale) + bias``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array

from ..graph.variables._variables import Param
from ..module._pytree import data
from ._common import (
  Dtype,
  InputShapeError,
  canonicalize_dtype,
  params_key,
  promote_dtype,
)

Axes = int | Sequence[int]


def _axes(ndim: int, axes: Axes) -> tuple[int, ...]:
  if not isinstance(axes, Iterable):
    axes = (axes,)
  return tuple(sorted({a + ndim if a < 0 else a for a in axes}))


def _abs_sq(x):
  return lax.square(lax.real(x)) + lax.square(lax.imag(x)) if jnp.iscomplexobj(x) else lax.square(x)


def compute_stats(
  x: Array,
  axes: Axes,
  dtype: Dtype | None = None,
  axis_name: str | None = None,
  axis_index_groups: Any = None,
  use_mean: bool = True,
  use_fast_variance: bool = True,
  mask: Array | None = None,
) -> tuple[Array, Array]:
  """Mean and variance of ``x`` over ``axes``, in at least float32 (as flax.nnx).

  With ``axis_name`` the moments are averaged over that named axis (``pmean``).
  Without ``use_mean`` the mean is zero and the variance is ``E[|x|^2]`` (RMS).

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.nn import compute_stats
    >>> mean, var = compute_stats(jnp.array([[1.0, 3.0]]), axes=-1)
    >>> mean.tolist(), var.tolist()
    ([2.0], [1.0])
  """
  with jax.numpy_dtype_promotion("standard"):
    dtype = jnp.promote_types(dtype if dtype is not None else x.dtype, jnp.float32)
  x = jnp.asarray(x, dtype)
  axes = _axes(x.ndim, axes)

  def mean(*xs):
    mus = tuple(v.mean(axes, where=mask) for v in xs)
    if axis_name is None:
      return mus
    stacked = lax.pmean(jnp.stack(mus), axis_name, axis_index_groups=axis_index_groups)
    return tuple(stacked[i] for i in range(len(xs)))

  if not use_mean:
    (var,) = mean(_abs_sq(x))
    return jnp.zeros_like(var), var
  if use_fast_variance:
    mu, mu2 = mean(x, _abs_sq(x))
    return mu, jnp.maximum(0.0, mu2 - _abs_sq(mu))
  (mu,) = mean(x)
  (var,) = mean(_abs_sq(x - jnp.expand_dims(mu, axes)))
  return mu, var


def _normalize(x, mean, var, scale, bias, reduction_axes, feature_axes, dtype, epsilon):
  reduction_axes = _axes(x.ndim, reduction_axes)
  feature_axes = _axes(x.ndim, feature_axes)
  stats_shape = [1 if a in reduction_axes else d for a, d in enumerate(x.shape)]
  feature_shape = [d if a in feature_axes else 1 for a, d in enumerate(x.shape)]
  out_dtype = canonicalize_dtype(x, scale, bias, dtype=dtype)
  # Compute in the promoted dtype of input and statistics (standard rules, as flax).
  x, mean, var, scale, bias = promote_dtype((x, mean, var, scale, bias))
  y = x - mean.reshape(stats_shape)
  mul = lax.rsqrt(var.reshape(stats_shape) + epsilon)
  if scale is not None:
    mul = mul * scale.reshape(feature_shape)
  y = y * mul
  if bias is not None:
    y = y + bias.reshape(feature_shape)
  return jnp.asarray(y, out_dtype)


def _check_num_features(layer: str, x, feature_axes: Axes, num_features: int) -> None:
  axes = _axes(x.ndim, feature_axes)
  size = math.prod(x.shape[a] for a in axes)
  if size != num_features:
    raise InputShapeError(
      f"{layer}: input `x` (shape {x.shape}) has {size} features on axes {axes}, but the"
      f" layer expects num_features={num_features}. Fix: reshape the input, or build the"
      f" layer with num_features={size}."
    )


def _scale_bias(
  num_features,
  use_scale,
  use_bias,
  scale_init,
  bias_init,
  param_dtype,
  rngs,
  scale_metadata=None,
  bias_metadata=None,
) -> tuple[Any, Any]:
  shape = (num_features,)
  scale = (
    Param(scale_init(params_key(rngs), shape, param_dtype), **(scale_metadata or {}))
    if use_scale
    else data(None)  # data, as in flax.nnx: a pytree child that eqx.tree_at can replace
  )
  bias = (
    Param(bias_init(params_key(rngs), shape, param_dtype), **(bias_metadata or {}))
    if use_bias
    else data(None)
  )
  return scale, bias

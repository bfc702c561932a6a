"""``InstanceNorm``: normalise each example over every axis but the batch and feature axes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
from jaxtyping import Array

from ..module._rngs import Rngs
from . import initializers
from ._common import Dtype, Initializer, LayerConfigError, PromoteDtypeFn, promote_dtype
from ._norm_stats import _axes
from ._normalization import LayerNorm


class InstanceNorm(LayerNorm):
  """Instance normalisation (as flax.nnx.InstanceNorm).

  For input ``x`` of shape ``(batch, ..., features)`` the mean and variance
  are taken per example and per feature over the remaining axes; ``scale``
  and ``bias`` have shape ``(num_features,)``.

  Args:
    num_features: size of the feature axis.
    epsilon: added to the variance (default 1e-6).
    dtype: computation/output dtype (None: promoted).
    param_dtype: dtype of ``scale``/``bias``.
    use_bias, use_scale: learn a bias / scale.
    bias_init, scale_init: their initializers (zeros / ones).
    feature_axes: the feature axis (one axis; default -1).
    axis_name, axis_index_groups: average statistics over a named (pmap/vmap) axis.
    use_fast_variance: ``E[x^2] - E[x]^2`` instead of ``E[(x - E[x])^2]``.
    promote_dtype, scale_metadata, bias_metadata: as for :class:`LayerNorm`.
    rngs: the ``params`` stream (only used by random initializers).

  Raises:
    LayerConfigError: if ``feature_axes`` names more than one axis or the batch axis.
    InputShapeError: if the feature axis of ``x`` is not ``num_features`` long.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> layer = nnx.InstanceNorm(3, rngs=nnx.Rngs(0))
    >>> y = layer(jax.random.normal(jax.random.key(0), (2, 5, 3)))
    >>> y.shape, bool(abs(y.mean(axis=1)).max() < 1e-5)
    ((2, 5, 3), True)
  """

  def __init__(
    self,
    num_features: int,
    *,
    epsilon: float = 1e-6,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    use_bias: bool = True,
    use_scale: bool = True,
    bias_init: Initializer = initializers.zeros,
    scale_init: Initializer = initializers.ones,
    feature_axes: int | tuple[int, ...] = -1,
    axis_name: str | None = None,
    axis_index_groups: Any = None,
    use_fast_variance: bool = True,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    scale_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs | None = None,
  ):
    axes = (feature_axes,) if isinstance(feature_axes, int) else tuple(feature_axes)
    if len(axes) != 1:
      raise LayerConfigError(
        f"InstanceNorm: feature_axes={feature_axes!r} must name exactly one axis."
      )
    super().__init__(
      num_features,
      epsilon=epsilon,
      dtype=dtype,
      param_dtype=param_dtype,
      use_bias=use_bias,
      use_scale=use_scale,
      bias_init=bias_init,
      scale_init=scale_init,
      feature_axes=feature_axes,
      axis_name=axis_name,
      axis_index_groups=axis_index_groups,
      use_fast_variance=use_fast_variance,
      promote_dtype=promote_dtype,
      scale_metadata=scale_metadata,
      bias_metadata=bias_metadata,
      rngs=rngs,
    )

  def _axes_of(self, x: Array) -> tuple[Any, Any]:
    feature_axes = _axes(x.ndim, self.feature_axes)
    if 0 in feature_axes:
      raise LayerConfigError("InstanceNorm: the feature axis cannot be the batch axis 0.")
    return tuple(a for a in range(1, x.ndim) if a not in feature_axes), feature_axes

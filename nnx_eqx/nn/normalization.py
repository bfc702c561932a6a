"""Normalization layers (flax.nnx.nn.normalization): ``BatchNorm``, ``LayerNorm``, ``RMSNorm``,
``GroupNorm``, ``InstanceNorm``, and the weight reparametrisations ``SpectralNorm`` and
``WeightNorm`` (defined in their own files, importable from here as in flax).

See ``_norm_stats`` for how statistics are computed and applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..graph.variables._variables import BatchStat
from ..module._module import Module
from ..module._rngs import Rngs
from . import initializers
from ._common import (
  Dtype,
  Initializer,
  LayerConfigError,
  PromoteDtypeFn,
  first_from,
  promote_dtype,
  read,
)
from ._norm_stats import (
  Axes,
  _axes,
  _check_num_features,
  _normalize,
  _scale_bias,
  compute_stats,
)
from ._spectral_norm import SpectralNorm as SpectralNorm
from ._weight_norm import WeightNorm as WeightNorm


class BatchNorm(Module):
  """Batch normalization (Ioffe & Szegedy, 2015), as flax.nnx.BatchNorm.

  In training mode (``use_running_average=False``) it normalizes with the
  batch statistics over every axis but ``axis`` and updates the running
  statistics ``mean``/``var`` (``BatchStat``, shape ``(num_features,)``,
  float32): ``ra = momentum * ra + (1 - momentum) * batch_stat``. In
  evaluation mode it normalizes with the running statistics.
  ``use_running_average`` is a module attribute, switched for a whole model by
  ``model.train()`` / ``model.eval()``; a call argument takes precedence.

  Args:
    num_features: size of the feature axis.
    use_running_average: default mode flag (False: training).
    axis: the feature axis (default -1).
    momentum: decay of the running statistics (default 0.99).
    epsilon: added to the variance (default 1e-5).
    dtype: output dtype (default: promoted from input and params).
    param_dtype: dtype of ``scale`` and ``bias``.
    use_bias, use_scale: learn ``bias`` (zeros) / ``scale`` (ones), shape ``(num_features,)``.
    bias_init, scale_init: their initializers.
    axis_name: named axis (``vmap``/``shard_map``) to average the batch statistics over.
    axis_index_groups: groups of that axis, passed to ``lax.pmean``.
    use_fast_variance: ``E[x^2] - E[x]^2`` instead of ``E[(x - E[x])^2]``.
    promote_dtype: ``f(arrays, dtype=dtype) -> arrays`` casting the input, the
      statistics and the params before normalizing (default :func:`promote_dtype`).
    scale_metadata, bias_metadata: metadata of the Params (e.g. ``sharding``).
    rngs: ``params`` stream for the initializers (optional: the defaults are constant).

  Raises:
    InputShapeError: if ``x.shape[axis] != num_features``.
    MissingFlagError: if ``use_running_average`` is None on the module and in the call.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> bn = nnx.BatchNorm(3, rngs=nnx.Rngs(0))
    >>> y = bn(jnp.arange(6.0).reshape(2, 3))           # training: batch statistics
    >>> print(bn.mean.value)                              # 0.99 * 0 + 0.01 * [1.5, 2.5, 3.5]
    [0.015 0.025 0.035]
    >>> bn.eval(); y = bn(jnp.ones((2, 3)))              # evaluation: running statistics
    >>> print(bn.mean.value)
    [0.015 0.025 0.035]
  """

  def __init__(
    self,
    num_features: int,
    *,
    use_running_average: bool | None = False,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 1e-5,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    use_bias: bool = True,
    use_scale: bool = True,
    bias_init: Initializer = initializers.zeros,
    scale_init: Initializer = initializers.ones,
    axis_name: str | None = None,
    axis_index_groups: Any = None,
    use_fast_variance: bool = True,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    scale_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs | None = None,
  ):
    self.promote_dtype = promote_dtype
    self.mean = BatchStat(jnp.zeros((num_features,), jnp.float32))
    self.var = BatchStat(jnp.ones((num_features,), jnp.float32))
    self.scale, self.bias = _scale_bias(
      num_features,
      use_scale,
      use_bias,
      scale_init,
      bias_init,
      param_dtype,
      rngs,
      scale_metadata,
      bias_metadata,
    )
    self.num_features = num_features
    self.use_running_average = use_running_average
    self.axis = axis
    self.momentum = momentum
    self.epsilon = epsilon
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.use_bias = use_bias
    self.use_scale = use_scale
    self.axis_name = axis_name
    self.axis_index_groups = axis_index_groups
    self.use_fast_variance = use_fast_variance

  def __call__(
    self,
    x: Float[Array, "*shape"],
    use_running_average: bool | None = None,
    *,
    mask: Array | None = None,
  ) -> Float[Array, "*shape"]:
    """Normalizes ``x`` (same shape); ``use_running_average`` overrides the attribute."""
    with jax.named_scope(type(self).__name__):
      name = type(self).__name__
      use_ra = first_from(
        use_running_average, self.use_running_average, flag="use_running_average", layer=name
      )
      _check_num_features(name, x, self.axis, self.num_features)
      feature_axes = _axes(x.ndim, self.axis)
      reduction_axes = tuple(a for a in range(x.ndim) if a not in feature_axes)
      scale = read(self.scale)
      bias = read(self.bias)
      x, mean, var, scale, bias = self.promote_dtype(
        (x, read(self.mean), read(self.var), scale, bias), dtype=self.dtype
      )
      if not use_ra:
        mean, var = compute_stats(
          x,
          reduction_axes,
          self.dtype,
          self.axis_name,
          self.axis_index_groups,
          use_fast_variance=self.use_fast_variance,
          mask=mask,
        )
        m = self.momentum
        old_mean, old_var = self.mean.value, self.var.value
        # Statistics are state, never differentiated: without the stop, a
        # ``jax.Ref``-backed statistic written under ``jax.grad`` is refused by JAX.
        sg = jax.lax.stop_gradient
        self.mean.value = sg(m * old_mean + (1 - m) * mean.astype(old_mean.dtype))
        self.var.value = sg(m * old_var + (1 - m) * var.astype(old_var.dtype))
      return _normalize(
        x, mean, var, scale, bias, reduction_axes, feature_axes, self.dtype, self.epsilon
      )


class LayerNorm(Module):
  """Layer normalization (Ba et al., 2016), as flax.nnx.LayerNorm.

  Normalizes over ``reduction_axes`` (default the last) of each example.

  Args:
    num_features: number of features (product of the ``feature_axes`` sizes).
    epsilon: added to the variance (default 1e-6, as flax; Equinox uses 1e-5).
    dtype, param_dtype, use_bias, use_scale, bias_init, scale_init, axis_name,
    axis_index_groups, use_fast_variance, promote_dtype, scale_metadata,
    bias_metadata, rngs: as for :class:`BatchNorm`.
    reduction_axes: axes to normalize over (default -1).
    feature_axes: axes of ``scale``/``bias`` (default -1).

  Raises:
    InputShapeError: if the feature axes of ``x`` do not hold ``num_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> ln = nnx.LayerNorm(4, rngs=nnx.Rngs(0))
    >>> y = ln(jnp.array([[1.0, 2.0, 3.0, 4.0]]))
    >>> float(y.mean()), round(float(y.var()), 4)
    (0.0, 1.0)
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
    reduction_axes: Axes = -1,
    feature_axes: Axes = -1,
    axis_name: str | None = None,
    axis_index_groups: Any = None,
    use_fast_variance: bool = True,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    scale_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs | None = None,
  ):
    self.promote_dtype = promote_dtype
    self.scale, self.bias = _scale_bias(
      num_features,
      use_scale,
      use_bias,
      scale_init,
      bias_init,
      param_dtype,
      rngs,
      scale_metadata,
      bias_metadata,
    )
    self.num_features = num_features
    self.epsilon = epsilon
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.use_bias = use_bias
    self.use_scale = use_scale
    self.reduction_axes = reduction_axes
    self.feature_axes = feature_axes
    self.axis_name = axis_name
    self.axis_index_groups = axis_index_groups
    self.use_fast_variance = use_fast_variance

  def __call__(
    self, x: Float[Array, "*shape"], *, mask: Array | None = None
  ) -> Float[Array, "*shape"]:
    with jax.named_scope(type(self).__name__):
      _check_num_features(type(self).__name__, x, self.feature_axes, self.num_features)
      scale = read(self.scale)
      bias = read(self.bias)
      x, scale, bias = self.promote_dtype((x, scale, bias), dtype=self.dtype)
      reduction_axes, feature_axes = self._axes_of(x)
      mean, var = compute_stats(
        x,
        reduction_axes,
        self.dtype,
        self.axis_name,
        self.axis_index_groups,
        use_fast_variance=self.use_fast_variance,
        mask=mask,
      )
      axes = (reduction_axes, feature_axes)
      return _normalize(x, mean, var, scale, bias, *axes, self.dtype, self.epsilon)

  def _axes_of(self, x: Array) -> tuple[Any, Any]:
    """``(reduction_axes, feature_axes)`` for an input ``x``."""
    return self.reduction_axes, self.feature_axes


class RMSNorm(Module):
  """Root-mean-square layer normalization (Zhang & Sennrich, 2019), as flax.nnx.RMSNorm:
  ``y = x * rsqrt(mean(x^2) + epsilon) * scale``; no bias.

  Args:
    num_features: number of features.
    epsilon: default 1e-6.
    dtype, param_dtype, use_scale, scale_init, reduction_axes, feature_axes,
    axis_name, axis_index_groups, use_fast_variance, promote_dtype,
    scale_metadata, rngs: as for :class:`LayerNorm`.

  Raises:
    InputShapeError: if the feature axes of ``x`` do not hold ``num_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> print(nnx.RMSNorm(2, rngs=nnx.Rngs(0))(jnp.array([[3.0, 4.0]])))  # rms = sqrt(12.5)
    [[0.8485281 1.1313708]]
  """

  def __init__(
    self,
    num_features: int,
    *,
    epsilon: float = 1e-6,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    use_scale: bool = True,
    scale_init: Initializer = initializers.ones,
    reduction_axes: Axes = -1,
    feature_axes: Axes = -1,
    axis_name: str | None = None,
    axis_index_groups: Any = None,
    use_fast_variance: bool = True,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    scale_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs | None = None,
  ):
    self.promote_dtype = promote_dtype
    self.scale, _ = _scale_bias(
      num_features, use_scale, False, scale_init, None, param_dtype, rngs, scale_metadata
    )
    self.num_features = num_features
    self.epsilon = epsilon
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.use_scale = use_scale
    self.reduction_axes = reduction_axes
    self.feature_axes = feature_axes
    self.axis_name = axis_name
    self.axis_index_groups = axis_index_groups
    self.use_fast_variance = use_fast_variance

  def __call__(
    self, x: Float[Array, "*shape"], mask: Array | None = None
  ) -> Float[Array, "*shape"]:
    with jax.named_scope(type(self).__name__):
      _check_num_features(type(self).__name__, x, self.feature_axes, self.num_features)
      scale = read(self.scale)
      x, scale = self.promote_dtype((x, scale), dtype=self.dtype)
      mean, var = compute_stats(
        x,
        self.reduction_axes,
        self.dtype,
        self.axis_name,
        self.axis_index_groups,
        use_mean=False,
        use_fast_variance=self.use_fast_variance,
        mask=mask,
      )
      axes = (self.reduction_axes, self.feature_axes)
      return _normalize(x, mean, var, scale, None, *axes, self.dtype, self.epsilon)


class GroupNorm(Module):
  """Group normalization (Wu & He, 2018), as flax.nnx.GroupNorm.

  The last axis (``num_features`` channels) is split into groups; each group
  is normalized over its channels and ``reduction_axes`` (default: every axis
  but the first, which is the batch).

  Args:
    num_features: number of channels (last axis).
    num_groups: number of groups (default 32); or pass ``num_groups=None`` and
    group_size: channels per group.
    epsilon: default 1e-6.
    dtype, param_dtype, use_bias, use_scale, bias_init, scale_init, axis_name,
    axis_index_groups, use_fast_variance, promote_dtype, scale_metadata,
    bias_metadata, rngs: as for :class:`BatchNorm`.
    reduction_axes: axes to reduce over besides the channels (default all but 0).

  Raises:
    LayerConfigError: unless exactly one of ``num_groups``/``group_size`` is given
      and it divides ``num_features``.
    InputShapeError: if ``x.shape[-1] != num_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> gn = nnx.GroupNorm(4, num_groups=2, rngs=nnx.Rngs(0))
    >>> gn(jnp.ones((3, 5, 4))).shape
    (3, 5, 4)
  """

  def __init__(
    self,
    num_features: int,
    num_groups: int | None = 32,
    group_size: int | None = None,
    *,
    epsilon: float = 1e-6,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    use_bias: bool = True,
    use_scale: bool = True,
    bias_init: Initializer = initializers.zeros,
    scale_init: Initializer = initializers.ones,
    reduction_axes: Axes | None = None,
    axis_name: str | None = None,
    axis_index_groups: Any = None,
    use_fast_variance: bool = True,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    scale_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs | None = None,
  ):
    self.promote_dtype = promote_dtype
    if (num_groups is None) == (group_size is None):
      raise LayerConfigError(
        "GroupNorm: give exactly one of num_groups and group_size (pass num_groups=None"
        f" to use group_size); got num_groups={num_groups}, group_size={group_size}."
      )
    size = group_size if group_size is not None else num_groups
    if not isinstance(size, int) or size <= 0 or num_features % size:
      what = "group_size" if group_size is not None else "num_groups"
      raise LayerConfigError(
        f"GroupNorm: {what}={size} does not divide num_features={num_features}."
      )
    self.num_groups = num_groups if num_groups is not None else num_features // size
    self.group_size = num_features // self.num_groups
    self.scale, self.bias = _scale_bias(
      num_features,
      use_scale,
      use_bias,
      scale_init,
      bias_init,
      param_dtype,
      rngs,
      scale_metadata,
      bias_metadata,
    )
    self.num_features = num_features
    self.epsilon = epsilon
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.use_bias = use_bias
    self.use_scale = use_scale
    self.reduction_axes = reduction_axes
    self.axis_name = axis_name
    self.axis_index_groups = axis_index_groups
    self.use_fast_variance = use_fast_variance

  def __call__(
    self, x: Float[Array, "*shape"], *, mask: Array | None = None
  ) -> Float[Array, "*shape"]:
    with jax.named_scope(type(self).__name__):
      _check_num_features(type(self).__name__, x, -1, self.num_features)
      if self.reduction_axes is not None:
        reduction_axes = _axes(x.ndim, self.reduction_axes)
      else:
        reduction_axes = _axes(x.ndim, [*range(1, x.ndim - 1), -1])
      group_shape = (*x.shape[:-1], self.num_groups, self.group_size)
      if mask is not None:
        mask = mask.reshape((*mask.shape[:-1], self.num_groups, self.group_size))
      scale = read(self.scale)
      bias = read(self.bias)
      x, scale, bias = self.promote_dtype((x, scale, bias), dtype=self.dtype)
      stat_axes = [*reduction_axes[:-1], x.ndim]  # the within-group axis of group_shape
      mean, var = compute_stats(
        x.reshape(group_shape),
        stat_axes,
        self.dtype,
        self.axis_name,
        self.axis_index_groups,
        use_fast_variance=self.use_fast_variance,
        mask=mask,
      )
      mean = jnp.repeat(mean, self.group_size, axis=-1)
      var = jnp.repeat(var, self.group_size, axis=-1)
      return _normalize(
        x, mean, var, scale, bias, reduction_axes[:-1], (x.ndim - 1,), self.dtype, self.epsilon
      )


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

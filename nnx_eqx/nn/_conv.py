"""Convolutions, channels-last: ``Conv`` and ``ConvTranspose`` (as flax.nnx)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from ..graph.variables._variables import Param
from ..module._module import Module
from ..module._pytree import data
from ..module._rngs import Rngs
from . import initializers
from ._common import (
  Dtype,
  Initializer,
  InputShapeError,
  LayerConfigError,
  PrecisionLike,
  PromoteDtypeFn,
  add_bias,
  canonicalize_tuple,
  check_features,
  optional_kwargs,
  promote_dtype,
  read,
)

PaddingLike = str | int | Sequence[int | tuple[int, int]]


def canonicalize_padding(padding: PaddingLike, rank: int) -> str | list[tuple[int, int]]:
  """``'SAME'``/``'VALID'``/... stay strings; ints become ``[(p, p)] * rank``; a
  sequence of ints or pairs becomes a list of pairs (as flax.nnx).

  Raises:
    LayerConfigError: for any other form (the bad value and the rank are named).

  Example:
    >>> from nnx_eqx.nn import canonicalize_padding
    >>> canonicalize_padding(1, 2), canonicalize_padding([(0, 1), 2], 2)
    ([(1, 1), (1, 1)], [(0, 1), (2, 2)])
  """
  if isinstance(padding, str):
    return padding
  if isinstance(padding, int):
    return [(padding, padding)] * rank
  if isinstance(padding, Sequence) and len(padding) == rank:
    pads = []
    for p in padding:
      if isinstance(p, int):
        pads.append((p, p))
      elif isinstance(p, Sequence) and len(p) == 2:
        pads.append((int(p[0]), int(p[1])))
      else:
        break
    else:
      return pads
  raise LayerConfigError(
    f"Invalid padding {padding!r}: expected 'SAME', 'VALID', 'CIRCULAR', 'CAUSAL', an int,"
    f" or a sequence of {rank} ints or (low, high) pairs."
  )


def _broadcast(x: int | Sequence[int] | None, n: int) -> tuple[int, ...]:
  if x is None:
    x = 1
  return (x,) * n if isinstance(x, int) else tuple(x)


def _flatten_batch(layer: str, x, n_spatial: int, in_features: int):
  """Reshapes ``(*batch, *spatial, in)`` to one batch axis; returns (x, batch_shape)."""
  if x.ndim < n_spatial + 1:
    raise InputShapeError(
      f"{layer}: input `x` has shape {x.shape} ({x.ndim} axes), but a {n_spatial}-D"
      f" convolution needs at least {n_spatial + 1}: (*batch, *spatial, {in_features})."
    )
  check_features(layer, x, -1, in_features)
  nb = x.ndim - (n_spatial + 1)
  batch_shape = x.shape[:nb]
  if nb != 1:
    x = jnp.reshape(x, (-1, *x.shape[nb:]))
  return x, batch_shape, nb


def _unflatten_batch(y, batch_shape, nb: int):
  return y if nb == 1 else jnp.reshape(y, (*batch_shape, *y.shape[1:]))


def _dimension_numbers(ndim: int) -> lax.ConvDimensionNumbers:
  lhs = (0, ndim - 1) + tuple(range(1, ndim - 1))
  rhs = (ndim - 1, ndim - 2) + tuple(range(0, ndim - 2))
  return lax.ConvDimensionNumbers(lhs, rhs, lhs)


class Conv(Module):
  """An N-D convolution over channels-last inputs (as flax.nnx.Conv).

  ``kernel`` has shape ``(*kernel_size, in_features // feature_group_count,
  out_features)``, ``bias`` ``(out_features,)``. The input is
  ``(*batch, *spatial, in_features)`` with any number of batch axes (flattened
  into one for the convolution), or unbatched ``(*spatial, in_features)``.

  Args:
    in_features: input channels.
    out_features: output channels.
    kernel_size: window size per spatial axis (an int means a 1-D kernel).
    strides: int or one per spatial axis (default 1).
    padding: ``'SAME'`` (default), ``'VALID'``, ``'CIRCULAR'``, ``'REFLECT'``,
      ``'CAUSAL'`` (1-D only), an int, or ``(low, high)`` pairs per axis.
    input_dilation: int or per axis ("transposed" dilation of the input).
    kernel_dilation: int or per axis (atrous convolution).
    feature_group_count: channel groups (``in_features`` must divide by it).
    use_bias: whether to add ``bias``.
    mask: optional array of the kernel's shape multiplied into the kernel.
    dtype, param_dtype, precision, promote_dtype: as for :class:`Linear`.
    kernel_init, bias_init: initializers (LeCun normal, zeros).
    conv_general_dilated: the convolution (default ``jax.lax.conv_general_dilated``);
      it gets ``preferred_element_type``/``out_sharding`` only when they are set.
    preferred_element_type: accumulation/output dtype of the convolution.
    kernel_metadata, bias_metadata: metadata of the Params.
    rngs: uses the ``params`` stream.

  The call takes an optional ``out_sharding`` passed to the convolution.

  Raises:
    LayerConfigError: if ``in_features`` is not divisible by
      ``feature_group_count``, the padding is malformed, ``'CAUSAL'`` is used
      with more than one spatial axis, or ``mask`` does not have the kernel's shape.
    InputShapeError: if the input has too few axes or the wrong channel count.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> conv = nnx.Conv(3, 8, (3, 3), rngs=nnx.Rngs(0))
    >>> conv.kernel.value.shape, conv(jnp.ones((2, 5, 5, 3))).shape
    ((3, 3, 3, 8), (2, 5, 5, 8))
    >>> conv(jnp.ones((5, 5, 3))).shape                        # unbatched
    (5, 5, 8)
    >>> nnx.Conv(3, 8, (3, 3), strides=2, padding="VALID", rngs=nnx.Rngs(0))(
    ...     jnp.ones((1, 7, 7, 3))).shape
    (1, 3, 3, 8)
  """

  def __init__(
    self,
    in_features: int,
    out_features: int,
    kernel_size: int | Sequence[int],
    strides: int | Sequence[int] | None = 1,
    *,
    padding: PaddingLike = "SAME",
    input_dilation: int | Sequence[int] | None = 1,
    kernel_dilation: int | Sequence[int] | None = 1,
    feature_group_count: int = 1,
    use_bias: bool = True,
    mask: Array | None = None,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    conv_general_dilated: Callable[..., Any] = lax.conv_general_dilated,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    preferred_element_type: Dtype | None = None,
    kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self.promote_dtype = promote_dtype
    self.preferred_element_type = preferred_element_type
    if in_features % feature_group_count != 0:
      raise LayerConfigError(
        f"Conv: in_features={in_features} is not divisible by"
        f" feature_group_count={feature_group_count}."
      )
    self.kernel_size = canonicalize_tuple(kernel_size)
    canonicalize_padding(padding, len(self.kernel_size))  # validate early
    self.kernel_shape = (*self.kernel_size, in_features // feature_group_count, out_features)
    _check_mask(type(self).__name__, mask, self.kernel_shape)
    self.in_features = in_features
    self.out_features = out_features
    self.strides = strides
    self.padding = padding
    self.input_dilation = input_dilation
    self.kernel_dilation = kernel_dilation
    self.feature_group_count = feature_group_count
    self.use_bias = use_bias
    self.mask = mask
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.precision = precision
    self.conv_general_dilated = conv_general_dilated
    self.kernel = Param(
      kernel_init(rngs.params(), self.kernel_shape, param_dtype), **(kernel_metadata or {})
    )
    self.bias = (
      Param(bias_init(rngs.params(), (out_features,), param_dtype), **(bias_metadata or {}))
      if use_bias
      else data(None)  # data, as in flax.nnx: a pytree child that eqx.tree_at can replace
    )

  def __call__(
    self, inputs: Float[Array, "*in_shape in"], out_sharding: Any = None
  ) -> Float[Array, "*out_shape out"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      n = len(self.kernel_size)
      x, batch_shape, nb = _flatten_batch(type(self).__name__, x, n, self.in_features)
      strides = _broadcast(self.strides, n)
      input_dilation = _broadcast(self.input_dilation, n)
      kernel_dilation = _broadcast(self.kernel_dilation, n)
      padding = canonicalize_padding(self.padding, n)
      if padding in ("CIRCULAR", "REFLECT"):
        dilated = [(k - 1) * d + 1 for k, d in zip(self.kernel_size, kernel_dilation)]
        pads = [(0, 0)] + [((k - 1) // 2, k // 2) for k in dilated] + [(0, 0)]
        x = jnp.pad(x, pads, mode="wrap" if padding == "CIRCULAR" else "reflect")
        padding = "VALID"
      elif padding == "CAUSAL":
        if n != 1:
          raise LayerConfigError(
            f"Conv: 'CAUSAL' padding needs a 1-D kernel, got kernel_size={self.kernel_size}."
          )
        x = jnp.pad(x, [(0, 0), (kernel_dilation[0] * (self.kernel_size[0] - 1), 0), (0, 0)])
        padding = "VALID"
      kernel = read(self.kernel)
      if self.mask is not None:
        kernel = kernel * self.mask
      bias = read(self.bias)
      x, kernel, bias = self.promote_dtype((x, kernel, bias), dtype=self.dtype)
      y = self.conv_general_dilated(
        x,
        kernel,
        strides,
        padding,
        lhs_dilation=input_dilation,
        rhs_dilation=kernel_dilation,
        dimension_numbers=_dimension_numbers(x.ndim),
        feature_group_count=self.feature_group_count,
        precision=self.precision,
        **optional_kwargs(
          preferred_element_type=self.preferred_element_type, out_sharding=out_sharding
        ),
      )
      return _unflatten_batch(add_bias(y, bias), batch_shape, nb)


class ConvTranspose(Module):
  """An N-D transposed convolution over channels-last inputs (as flax.nnx.ConvTranspose,
  via ``jax.lax.conv_transpose``).

  ``kernel`` has shape ``(*kernel_size, in_features, out_features)`` (or
  ``(*kernel_size, out_features, in_features)`` with ``transpose_kernel``).

  Args:
    in_features, out_features, kernel_size: as for :class:`Conv`.
    strides: int or per axis (default 1): the upsampling factor.
    padding: ``'SAME'`` (default), ``'VALID'``, ``'CIRCULAR'`` (the output is
      wrapped periodically to ``strides * input`` size), an int or
      ``(low, high)`` pairs.
    kernel_dilation: int or per axis.
    use_bias, mask, dtype, param_dtype, precision, kernel_init, bias_init,
      promote_dtype, preferred_element_type, kernel_metadata, bias_metadata,
      rngs: as for :class:`Conv`.
    transpose_kernel: flip the spatial axes and swap the channel axes of the
      kernel (the gradient of a ``Conv``).

  Raises:
    LayerConfigError: if the padding is malformed or ``'CAUSAL'``/``'REFLECT'``,
      or ``mask`` does not have the kernel's shape.
    InputShapeError: if the input has too few axes or the wrong channel count.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> up = nnx.ConvTranspose(4, 2, (3, 3), strides=2, rngs=nnx.Rngs(0))
    >>> up(jnp.ones((1, 4, 4, 4))).shape
    (1, 8, 8, 2)
  """

  def __init__(
    self,
    in_features: int,
    out_features: int,
    kernel_size: int | Sequence[int],
    strides: int | Sequence[int] | None = None,
    *,
    padding: PaddingLike = "SAME",
    kernel_dilation: int | Sequence[int] | None = None,
    use_bias: bool = True,
    mask: Array | None = None,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    transpose_kernel: bool = False,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    preferred_element_type: Dtype | None = None,
    kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self.kernel_size = canonicalize_tuple(kernel_size)
    pad = canonicalize_padding(padding, len(self.kernel_size))
    if pad in ("CAUSAL", "REFLECT"):
      raise LayerConfigError(
        f"ConvTranspose: padding {pad!r} is not supported; use 'SAME', 'VALID',"
        " 'CIRCULAR' or pairs."
      )
    self.promote_dtype = promote_dtype
    self.preferred_element_type = preferred_element_type
    self.in_features = in_features
    self.out_features = out_features
    self.strides = strides
    self.padding = padding
    self.kernel_dilation = kernel_dilation
    self.use_bias = use_bias
    self.mask = mask
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.precision = precision
    self.transpose_kernel = transpose_kernel
    io = (out_features, in_features) if transpose_kernel else (in_features, out_features)
    self.kernel_shape = (*self.kernel_size, *io)
    _check_mask(type(self).__name__, mask, self.kernel_shape)
    self.kernel = Param(
      kernel_init(rngs.params(), self.kernel_shape, param_dtype), **(kernel_metadata or {})
    )
    self.bias = (
      Param(bias_init(rngs.params(), (out_features,), param_dtype), **(bias_metadata or {}))
      if use_bias
      else data(None)  # data, as in flax.nnx: a pytree child that eqx.tree_at can replace
    )

  def __call__(self, inputs: Float[Array, "*in_shape in"]) -> Float[Array, "*out_shape out"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      n = len(self.kernel_size)
      x, batch_shape, nb = _flatten_batch(type(self).__name__, x, n, self.in_features)
      kernel = read(self.kernel)
      if self.mask is not None:
        kernel = kernel * self.mask
      bias = read(self.bias)
      x, kernel, bias = self.promote_dtype((x, kernel, bias), dtype=self.dtype)
      strides = _broadcast(self.strides, n)
      padding = canonicalize_padding(self.padding, n)
      y = lax.conv_transpose(
        x,
        kernel,
        strides,
        "VALID" if padding == "CIRCULAR" else padding,
        rhs_dilation=_broadcast(self.kernel_dilation, n),
        transpose_kernel=self.transpose_kernel,
        precision=self.precision,
        **optional_kwargs(preferred_element_type=self.preferred_element_type),
      )
      if padding == "CIRCULAR":
        periods = [d * s for d, s in zip(x.shape[1:-1], strides)]
        y = _wrap_periodically(y, periods, left_heavy=not self.transpose_kernel)
      return _unflatten_batch(add_bias(y, bias), batch_shape, nb)


def _check_mask(layer: str, mask: Array | None, kernel_shape: tuple[int, ...]) -> None:
  if mask is not None and tuple(mask.shape) != tuple(kernel_shape):
    raise LayerConfigError(
      f"{layer}: mask has shape {tuple(mask.shape)} but the kernel has shape"
      f" {tuple(kernel_shape)}; they must be equal."
    )


def _wrap_periodically(y: Array, periods: list[int], *, left_heavy: bool) -> Array:
  """Folds each spatial axis of ``y`` (``(batch, *spatial, channels)``) onto its
  period by summing the pieces, after padding it to a whole even number of
  periods so that the input's start lands on a period boundary."""
  pads = []
  for size, period in zip(y.shape[1:-1], periods):
    missing = -(size - period) % (2 * period)
    big, small = (missing + 1) // 2, missing // 2
    pads.append((big, small) if left_heavy else (small, big))
  y = jnp.pad(y, [(0, 0), *pads, (0, 0)])
  for axis, period in enumerate(periods, start=1):
    y = y.reshape((*y.shape[:axis], -1, period, *y.shape[axis + 1 :])).sum(axis=axis)
  return y

"""Dense layers: ``Linear``, ``LinearGeneral`` and ``Einsum`` (as flax.nnx)."""

from __future__ import annotations

import math
import string
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from ..graph._variables import Param
from ..module._module import Module
from ..module._rngs import Rngs
from . import initializers
from ._common import (
  Dtype,
  Initializer,
  InputShapeError,
  LayerConfigError,
  PrecisionLike,
  canonicalize_tuple,
  check_features,
  normalize_axes,
  promote_dtype,
)


class Linear(Module):
  """A dense layer ``y = x @ kernel + bias`` over the last axis (as flax.nnx.Linear).

  Args:
    in_features: size of the last input axis.
    out_features: size of the last output axis.
    use_bias: whether to add a bias.
    dtype: computation dtype (None: promoted from the input and the params).
    param_dtype: dtype of ``kernel`` and ``bias`` (default float32).
    precision: ``jax.lax`` precision of the matmul.
    kernel_init: initializer of ``kernel``, shape ``(in_features, out_features)``
      (default LeCun normal).
    bias_init: initializer of ``bias``, shape ``(out_features,)`` (default zeros).
    kernel_metadata, bias_metadata: metadata of the Params (e.g. ``sharding``).
    rngs: uses the ``params`` stream.

  Input ``x``: ``(..., in_features)``; output ``(..., out_features)``, dtype
  ``dtype`` or the promoted dtype of ``x`` and the params.

  Raises:
    InputShapeError: if ``x.shape[-1] != in_features`` (both sizes are named).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> layer = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
    >>> layer(jnp.ones((2, 3))).shape, layer.kernel.value.shape, layer.bias.value.shape
    ((2, 4), (3, 4), (4,))
  """

  def __init__(
    self,
    in_features: int,
    out_features: int,
    *,
    use_bias: bool = True,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self.in_features = in_features
    self.out_features = out_features
    self.use_bias = use_bias
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.precision = precision
    self.kernel = Param(
      kernel_init(rngs.params(), (in_features, out_features), param_dtype),
      **(kernel_metadata or {}),
    )
    self.bias = (
      Param(bias_init(rngs.params(), (out_features,), param_dtype), **(bias_metadata or {}))
      if use_bias
      else None
    )

  def __call__(self, x: Float[Array, "*batch in"]) -> Float[Array, "*batch out"]:
    with jax.named_scope(type(self).__name__):
      check_features(type(self).__name__, x, -1, self.in_features)
      bias = self.bias.value if self.bias is not None else None
      x, kernel, bias = promote_dtype((x, self.kernel.value, bias), dtype=self.dtype)
      y = lax.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((), ())), precision=self.precision)
      if bias is not None:
        y = y + bias
      return y


class LinearGeneral(Module):
  """A dense layer contracting several input axes into several output axes
  (as flax.nnx.LinearGeneral).

  ``kernel`` has shape ``(*batch_sizes, *in_features, *out_features)`` and
  ``bias`` ``(*batch_sizes, *out_features)``. The input axes ``axis`` (sizes
  ``in_features``) are contracted; ``batch_axis`` maps leading input axes to
  their sizes for a separate kernel per batch index.

  Args:
    in_features: size(s) of the contracted input axes.
    out_features: size(s) of the new output axes (appended last).
    axis: the contracted input axes (default ``-1``).
    batch_axis: ``{axis: size}`` of leading batch axes with their own kernels.
    use_bias, dtype, param_dtype, precision, kernel_init, bias_init,
    kernel_metadata, bias_metadata, rngs: as for :class:`Linear`. The
      initializers see the flattened 2-D shape ``(prod(in), prod(out))`` so that
      fan-in/fan-out match a dense layer.

  Raises:
    LayerConfigError: if ``in_features`` and ``axis`` differ in length, or the
      batch axes are not the leading ones.
    InputShapeError: if the contracted input axes do not have sizes ``in_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> q = nnx.LinearGeneral(8, (2, 4), rngs=nnx.Rngs(0))      # 2 heads of size 4
    >>> q.kernel.value.shape, q(jnp.ones((3, 5, 8))).shape
    ((8, 2, 4), (3, 5, 2, 4))
    >>> out = nnx.LinearGeneral((2, 4), 8, axis=(-2, -1), rngs=nnx.Rngs(0))
    >>> out(jnp.ones((3, 5, 2, 4))).shape
    (3, 5, 8)
  """

  def __init__(
    self,
    in_features: int | Sequence[int],
    out_features: int | Sequence[int],
    *,
    axis: int | Sequence[int] = -1,
    batch_axis: Mapping[int, int] | None = None,
    use_bias: bool = True,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self.in_features = canonicalize_tuple(in_features)
    self.out_features = canonicalize_tuple(out_features)
    self.axis = canonicalize_tuple(axis)
    self.batch_axis = tuple(sorted((batch_axis or {}).items()))
    self.use_bias = use_bias
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.precision = precision
    if len(self.in_features) != len(self.axis):
      raise LayerConfigError(
        f"LinearGeneral: in_features {self.in_features} and axis {self.axis} must have"
        " the same length (one size per contracted axis)."
      )
    batch_dims = [a for a, _ in self.batch_axis]
    if batch_dims and batch_dims != list(range(len(batch_dims))):
      raise LayerConfigError(
        f"LinearGeneral: batch_axis keys {batch_dims} must be the leading axes"
        f" 0..{len(batch_dims) - 1}."
      )
    batch_shape = tuple(s for _, s in self.batch_axis)
    kshape = (*batch_shape, *self.in_features, *self.out_features)
    flat = (math.prod(batch_shape) * math.prod(self.in_features), math.prod(self.out_features))
    self.kernel = Param(
      jnp.reshape(kernel_init(rngs.params(), flat, param_dtype), kshape),
      **(kernel_metadata or {}),
    )
    self.bias = None
    if use_bias:
      bshape = (*batch_shape, *self.out_features)
      b = bias_init(rngs.params(), (math.prod(bshape),), param_dtype)
      self.bias = Param(jnp.reshape(b, bshape), **(bias_metadata or {}))

  def __call__(self, x: Float[Array, "*in_shape"]) -> Float[Array, "*out_shape"]:
    with jax.named_scope(type(self).__name__):
      ndim = x.ndim
      axis = normalize_axes(self.axis, ndim)
      batch_axis = normalize_axes(tuple(a for a, _ in self.batch_axis), ndim)
      got = tuple(x.shape[a] for a in axis)
      if got != self.in_features:
        raise InputShapeError(
          f"LinearGeneral: input axes {self.axis} of `x` (shape {x.shape}) have sizes"
          f" {got}, but the layer expects {self.in_features}. Fix: reshape the input or"
          " build the layer with matching in_features."
        )
      nb = len(batch_axis)
      contract = tuple(range(nb, nb + len(axis)))
      bias = self.bias.value if self.bias is not None else None
      x, kernel, bias = promote_dtype((x, self.kernel.value, bias), dtype=self.dtype)
      y = lax.dot_general(
        x, kernel, ((axis, contract), (batch_axis, tuple(range(nb)))), precision=self.precision
      )
      if bias is not None:
        expanded = tuple(x.shape[a] if a in batch_axis else 1 for a in range(ndim) if a not in axis)
        y = y + jnp.reshape(bias, (*expanded, *self.out_features))
      return y


class Einsum(Module):
  """A layer computing ``jnp.einsum(einsum_str, x, kernel) + bias`` (as flax.nnx.Einsum).

  Args:
    kernel_shape: shape of ``kernel``.
    bias_shape: shape of ``bias`` (None: no bias); it must broadcast against
      the output.
    einsum_str: default equation with exactly two operands, e.g. ``"bi,io->bo"``.
    dtype, param_dtype, precision, kernel_init, bias_init, rngs: as for
      :class:`Linear`.

  Raises:
    LayerConfigError: if the equation is missing or does not have two operands.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> layer = nnx.Einsum((5, 4, 6), (5, 6), "nta,hab->nthb", rngs=nnx.Rngs(0))
    >>> layer(jnp.ones((16, 11, 4))).shape
    (16, 11, 5, 6)
  """

  def __init__(
    self,
    kernel_shape: Sequence[int],
    bias_shape: Sequence[int] | None = None,
    einsum_str: str | None = None,
    *,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    rngs: Rngs,
  ):
    if einsum_str is not None:
      _check_einsum(einsum_str)
    self.einsum_str = einsum_str
    self.kernel_shape = tuple(kernel_shape)
    self.bias_shape = tuple(bias_shape) if bias_shape is not None else None
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.precision = precision
    self.kernel = Param(kernel_init(rngs.params(), self.kernel_shape, param_dtype))
    self.bias = (
      Param(bias_init(rngs.params(), self.bias_shape, param_dtype))
      if self.bias_shape is not None
      else None
    )

  def __call__(
    self, x: Float[Array, "*in_shape"], einsum_str: str | None = None
  ) -> Float[Array, "*out_shape"]:
    with jax.named_scope(type(self).__name__):
      eq = einsum_str if einsum_str is not None else self.einsum_str
      if eq is None:
        raise LayerConfigError(
          "Einsum: no equation. Fix: pass einsum_str to the constructor or the call."
        )
      _check_einsum(eq)
      bias = self.bias.value if self.bias is not None else None
      x, kernel, bias = promote_dtype((x, self.kernel.value, bias), dtype=self.dtype)
      y = jnp.einsum(eq, x, kernel, precision=self.precision)
      if bias is not None:
        y = y + bias
      return y


def _check_einsum(eq: str) -> None:
  lhs = eq.replace(" ", "").split("->")[0]
  if "->" not in eq or len(lhs.split(",")) != 2 or not set(lhs) <= set(string.ascii_letters + ",."):
    raise LayerConfigError(
      f"Einsum: equation {eq!r} must have exactly two operands and an explicit output,"
      " e.g. 'bi,io->bo'."
    )

"""Dense layers: ``Linear``, ``LinearGeneral`` and ``Einsum`` (flax.nnx.nn.linear).

As in flax, this module also exposes ``Conv``, ``ConvTranspose``, ``Embed`` (defined
in ``_conv``/``_embed``) and the default initializers ``default_kernel_init``,
``default_bias_init`` and ``default_embed_init``.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import opt_einsum
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
  normalize_axes,
  optional_kwargs,
  promote_dtype,
  read,
)
from ._conv import Conv as Conv
from ._conv import ConvTranspose as ConvTranspose
from ._conv import canonicalize_padding as canonicalize_padding
from ._embed import Embed as Embed
from ._embed import default_embed_init as default_embed_init
from .initializers import default_bias_init as default_bias_init
from .initializers import default_kernel_init as default_kernel_init


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
    dot_general: the contraction (default ``jax.lax.dot_general``); it gets
      ``preferred_element_type``/``out_sharding`` only when they are set.
    promote_dtype: ``f((x, kernel, bias), dtype=dtype) -> (x, kernel, bias)``
      casting the operands before the matmul (default :func:`promote_dtype`).
    preferred_element_type: accumulation/output dtype of the matmul (passed to
      ``dot_general``; None: the operands' dtype).
    kernel_metadata, bias_metadata: metadata of the Params (e.g. ``sharding``).
    rngs: uses the ``params`` stream.

  Input ``x``: ``(..., in_features)``; output ``(..., out_features)``, dtype
  ``preferred_element_type``, else ``dtype``, else the promoted dtype of ``x``
  and the params. The call takes an optional ``out_sharding`` passed to the matmul.

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
    dot_general: Callable[..., Array] = lax.dot_general,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    preferred_element_type: Dtype | None = None,
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
    self.dot_general = dot_general
    self.promote_dtype = promote_dtype
    self.preferred_element_type = preferred_element_type
    self.kernel = Param(
      kernel_init(rngs.params(), (in_features, out_features), param_dtype),
      **(kernel_metadata or {}),
    )
    self.bias = (
      Param(bias_init(rngs.params(), (out_features,), param_dtype), **(bias_metadata or {}))
      if use_bias
      else data(None)  # data, as in flax.nnx: a pytree child that eqx.tree_at can replace
    )

  def __call__(
    self, inputs: Float[Array, "*batch in"], out_sharding: Any = None
  ) -> Float[Array, "*batch out"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      # Checked against the kernel as it is here: inside shard_map it is a local
      # shard (tensor parallelism), whose rows may be fewer than in_features.
      check_features(type(self).__name__, x, -1, jnp.shape(read(self.kernel))[0])
      bias = read(self.bias)
      x, kernel, bias = self.promote_dtype((x, read(self.kernel), bias), dtype=self.dtype)
      y = self.dot_general(
        x,
        kernel,
        (((x.ndim - 1,), (0,)), ((), ())),
        precision=self.precision,
        **optional_kwargs(
          preferred_element_type=self.preferred_element_type, out_sharding=out_sharding
        ),
      )
      return add_bias(y, bias)


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
    dot_general, promote_dtype, preferred_element_type, kernel_metadata,
    bias_metadata, rngs: as for :class:`Linear`. The initializers see the
      flattened 2-D shape ``(prod(in), prod(out))`` so that fan-in/fan-out
      match a dense layer.
    dot_general_cls: a class whose instance (made at each call) replaces
      ``dot_general``.

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
    dot_general: Callable[..., Array] | None = None,
    dot_general_cls: Any = None,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    preferred_element_type: Dtype | None = None,
    kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self.dot_general = dot_general
    self.dot_general_cls = dot_general_cls
    self.promote_dtype = promote_dtype
    self.preferred_element_type = preferred_element_type
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
    self.bias = data(None)
    if use_bias:
      bshape = (*batch_shape, *self.out_features)
      b = bias_init(rngs.params(), (math.prod(bshape),), param_dtype)
      self.bias = Param(jnp.reshape(b, bshape), **(bias_metadata or {}))

  def __call__(
    self, inputs: Float[Array, "*in_shape"], out_sharding: Any = None
  ) -> Float[Array, "*out_shape"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
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
      bias = read(self.bias)
      x, kernel, bias = self.promote_dtype((x, read(self.kernel), bias), dtype=self.dtype)
      if self.dot_general_cls is not None:
        dot_general = self.dot_general_cls()
      else:
        dot_general = self.dot_general or lax.dot_general
      y = dot_general(
        x,
        kernel,
        ((axis, contract), (batch_axis, tuple(range(nb)))),
        precision=self.precision,
        **optional_kwargs(
          preferred_element_type=self.preferred_element_type, out_sharding=out_sharding
        ),
      )
      if bias is not None:
        expanded = tuple(x.shape[a] if a in batch_axis else 1 for a in range(ndim) if a not in axis)
        bias = jnp.reshape(bias, (*expanded, *self.out_features))
      return add_bias(y, bias)


class Einsum(Module):
  """A layer computing ``einsum(einsum_str, x, kernel) + bias`` (as flax.nnx.Einsum).

  Args:
    einsum_str: the equation, with exactly two operands (input, kernel) and an
      explicit output, e.g. ``"bi,io->bo"``; ellipses are allowed. It may be None
      when every call passes one.
    kernel_shape: shape of ``kernel``.
    bias_shape: shape of ``bias`` (None: no bias). Its axes are the kernel axes
      that survive in the output, in output order.
    dtype, param_dtype, precision, kernel_init, bias_init, promote_dtype,
    preferred_element_type, kernel_metadata, bias_metadata, rngs: as for
      :class:`Linear`.
    einsum_op: replacement for ``jnp.einsum`` with its signature; it gets
      ``preferred_element_type``/``out_sharding`` only when they are set.

  Raises:
    LayerConfigError: if the equation is missing, has no ``->`` or does not have
      two operands.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> layer = nnx.Einsum("nta,hab->nthb", (5, 4, 6), (5, 6), rngs=nnx.Rngs(0))
    >>> layer(jnp.ones((16, 11, 4))).shape
    (16, 11, 5, 6)
  """

  def __init__(
    self,
    einsum_str: str | None,
    kernel_shape: Sequence[int],
    bias_shape: int | Sequence[int] | None = None,
    *,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    einsum_op: Callable[..., Array] = jnp.einsum,
    preferred_element_type: Dtype | None = None,
    kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    if einsum_str is not None:
      einsum_str = _check_einsum(einsum_str)
    self.einsum_str = einsum_str
    self.kernel_shape = canonicalize_tuple(kernel_shape)
    self.bias_shape = canonicalize_tuple(bias_shape) if bias_shape is not None else None
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.precision = precision
    self.promote_dtype = promote_dtype
    self.einsum_op = einsum_op
    self.preferred_element_type = preferred_element_type
    self.kernel = Param(
      kernel_init(rngs.params(), self.kernel_shape, param_dtype), **(kernel_metadata or {})
    )
    self.bias = (
      Param(bias_init(rngs.params(), self.bias_shape, param_dtype), **(bias_metadata or {}))
      if self.bias_shape is not None
      else data(None)
    )

  def __call__(
    self, inputs: Float[Array, "*in_shape"], einsum_str: str | None = None, out_sharding: Any = None
  ) -> Float[Array, "*out_shape"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      eq = einsum_str if einsum_str is not None else self.einsum_str
      if eq is None:
        raise LayerConfigError(
          "Einsum: no equation. Fix: pass einsum_str to the constructor or the call."
        )
      eq = _check_einsum(eq)
      bias = read(self.bias)
      x, kernel, bias = self.promote_dtype((x, read(self.kernel), bias), dtype=self.dtype)
      y = self.einsum_op(
        eq,
        x,
        kernel,
        precision=self.precision,
        **optional_kwargs(
          preferred_element_type=self.preferred_element_type, out_sharding=out_sharding
        ),
      )
      if bias is not None:
        shape = _bias_broadcast_shape(eq, x, kernel)
        lead, trail = shape[: len(shape) - bias.ndim], shape[len(shape) - bias.ndim :]
        if tuple(trail) != bias.shape or any(d != 1 for d in lead):
          bias = jnp.reshape(bias, shape)  # else it already broadcasts from the right
      return add_bias(y, bias)


def _check_einsum(eq: str) -> str:
  """``eq`` without spaces.

  Raises:
    LayerConfigError: if it has no ``->`` or not exactly two operands.
  """
  eq = eq.replace(" ", "")
  lhs = eq.split("->")[0]
  if "->" not in eq or len(lhs.split(",")) != 2 or not set(lhs) <= set(string.ascii_letters + ",."):
    raise LayerConfigError(
      f"Einsum: equation {eq!r} must have exactly two operands and an explicit output"
      " ('->'), e.g. 'bi,io->bo'."
    )
  return eq


def _bias_broadcast_shape(eq: str, x: Array, kernel: Array) -> list[int]:
  """The shape ``bias`` takes to broadcast against the output: the sizes of the kernel
  axes that appear in the output, 1 elsewhere (ellipses resolved by opt_einsum)."""
  operands, result, _ = opt_einsum.parser.parse_einsum_input((eq, x, kernel))
  kernel_axes = {c: i for i, c in enumerate(operands.split(",")[1])}
  return [kernel.shape[kernel_axes[c]] if c in kernel_axes else 1 for c in result]

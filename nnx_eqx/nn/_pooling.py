"""Pooling over channels-last inputs with ``jax.lax.reduce_window`` (as flax.linen,
which flax.nnx re-exports)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from ._common import InputShapeError, LayerConfigError

Padding = str | Sequence[tuple[int, int]]


def pool(
  inputs: Array,
  init: Any,
  reduce_fn: Callable[[Any, Any], Any],
  window_shape: Sequence[int],
  strides: Sequence[int] | None,
  padding: Padding,
) -> Array:
  """Reduces ``reduce_fn`` over windows of the spatial axes of
  ``(*batch, *spatial, features)`` (or unbatched ``(*spatial, features)``) inputs.

  Args:
    inputs: the input; the last axis is features, the ``len(window_shape)``
      before it are spatial, any before those are batch axes.
    init: the reduction's initial value.
    reduce_fn: ``(T, T) -> T``, e.g. ``lax.add``.
    window_shape: window size per spatial axis.
    strides: stride per spatial axis (default 1).
    padding: ``'SAME'``, ``'VALID'`` or ``(low, high)`` pairs per spatial axis.

  Raises:
    LayerConfigError: if ``strides`` or ``padding`` do not have one entry per
      window axis.
    InputShapeError: if the input has fewer than ``len(window_shape) + 1`` axes.

  Example:
    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> import nnx_eqx as nnx
    >>> nnx.pool(jnp.arange(4.0).reshape(1, 4, 1), 0.0, lax.add, (2,), (2,), "VALID")[0, :, 0]
    Array([1., 5.], dtype=float32)
  """
  window_shape = tuple(window_shape)
  n = len(window_shape)
  strides = tuple(strides) if strides is not None else (1,) * n
  if len(strides) != n:
    raise LayerConfigError(
      f"pool: strides {strides} must have one entry per window axis {window_shape}."
    )
  nb = inputs.ndim - (n + 1)
  if nb < 0:
    raise InputShapeError(
      f"pool: input of shape {inputs.shape} has too few axes for a {n}-D window; expected"
      f" (*batch, *spatial[{n}], features)."
    )
  single = nb == 0
  if single:
    inputs, nb = inputs[None], 1
  dims = (1,) * nb + window_shape + (1,)
  full_strides = (1,) * nb + strides + (1,)
  if not isinstance(padding, str):
    pads = tuple(tuple(p) for p in padding)
    if len(pads) != n or any(len(p) != 2 for p in pads):
      raise LayerConfigError(
        f"pool: padding {padding!r} must be 'SAME', 'VALID' or {n} (low, high) pairs."
      )
    lax_padding: Any = ((0, 0),) * nb + pads + ((0, 0),)
  else:
    lax_padding = padding
  y = lax.reduce_window(inputs, init, reduce_fn, dims, full_strides, lax_padding)
  return y[0] if single else y


def avg_pool(
  inputs: Float[Array, "*in_shape features"],
  window_shape: Sequence[int],
  strides: Sequence[int] | None = None,
  padding: Padding = "VALID",
  count_include_pad: bool = True,
) -> Float[Array, "*out_shape features"]:
  """Mean over windows (see :func:`pool`); with ``count_include_pad=False``
  padded positions are left out of the mean.

  Raises:
    LayerConfigError, InputShapeError: as :func:`pool`.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> x = jnp.arange(16.0).reshape(1, 4, 4, 1)
    >>> nnx.avg_pool(x, (2, 2), strides=(2, 2))[0, :, :, 0].tolist()
    [[2.5, 4.5], [10.5, 12.5]]
  """
  y = pool(inputs, np.zeros((), inputs.dtype), lax.add, window_shape, strides, padding)
  if count_include_pad:
    return y / np.prod(window_shape).astype(y.dtype)
  ones = jnp.ones((*inputs.shape[:-1], 1), inputs.dtype)
  return y / pool(ones, np.zeros((), inputs.dtype), lax.add, window_shape, strides, padding)


def max_pool(
  inputs: Float[Array, "*in_shape features"],
  window_shape: Sequence[int],
  strides: Sequence[int] | None = None,
  padding: Padding = "VALID",
) -> Float[Array, "*out_shape features"]:
  """Maximum over windows (see :func:`pool`).

  Raises:
    LayerConfigError, InputShapeError: as :func:`pool`.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.max_pool(jnp.arange(16.0).reshape(4, 4, 1), (2, 2), (2, 2))[:, :, 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
  """
  return pool(inputs, _limit(inputs.dtype, -1), lax.max, window_shape, strides, padding)


def min_pool(
  inputs: Float[Array, "*in_shape features"],
  window_shape: Sequence[int],
  strides: Sequence[int] | None = None,
  padding: Padding = "VALID",
) -> Float[Array, "*out_shape features"]:
  """Minimum over windows (see :func:`pool`).

  Raises:
    LayerConfigError, InputShapeError: as :func:`pool`.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.min_pool(jnp.arange(16.0).reshape(4, 4, 1), (2, 2), (2, 2))[:, :, 0].tolist()
    [[0.0, 2.0], [8.0, 10.0]]
  """
  return pool(inputs, _limit(inputs.dtype, 1), lax.min, window_shape, strides, padding)


def _limit(dtype, sign: int):
  """``sign * inf`` for floats, the integer extreme otherwise, as a concrete NumPy
  scalar of ``dtype`` (so ``reduce_window`` recognises the max/min monoid and
  stays differentiable under tracing)."""
  if jnp.issubdtype(dtype, jnp.inexact):
    return np.array(sign * np.inf, dtype)
  info = jnp.iinfo(dtype)
  return np.array(info.max if sign > 0 else info.min, dtype)

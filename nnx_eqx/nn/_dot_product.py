"""Scaled dot-product attention (Vaswani et al., 2017) and attention masks (as flax.nnx)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..graph.variables._variables import Intermediate
from ..module._module import Module
from ._common import (
  Dtype,
  InputShapeError,
  LayerConfigError,
  PrecisionLike,
  PromoteDtypeFn,
  promote_dtype,
)


def _check_qkv(*arrays) -> None:
  names = ", ".join(("query", "key", "value")[: len(arrays)])
  shapes = ", ".join(str(a.shape) for a in arrays)
  if any(a.ndim != arrays[0].ndim for a in arrays):
    raise InputShapeError(
      f"attention: {names} must have the same rank, got shapes {shapes}. Fix: pass"
      " (*batch, length, heads, head_dim) arrays."
    )
  if arrays[0].ndim < 3 or any(a.shape[:-3] != arrays[0].shape[:-3] for a in arrays):
    raise InputShapeError(
      f"attention: {names} batch dims must match (all axes before (length, heads,"
      f" head_dim)), got shapes {shapes}."
    )


def _head_groups(q_heads: int, kv_heads: int, what: str) -> int:
  """Query heads per key/value head (grouped-query attention when > 1).

  Raises:
    InputShapeError: if ``q_heads`` is not a multiple of ``kv_heads``.
  """
  if q_heads % kv_heads:
    raise InputShapeError(
      f"attention: the number of query heads ({q_heads}) must be a multiple of the number"
      f" of {what} heads ({kv_heads}) for grouped-query attention."
    )
  return q_heads // kv_heads


def _check_dropout(rate: float, deterministic: bool, rng: jax.Array | None) -> None:
  if not 0.0 <= rate < 1.0:  # also rejects nan
    raise LayerConfigError(f"attention: dropout_rate must be in the range [0, 1), got {rate!r}.")
  if not deterministic and rate > 0.0 and rng is None:
    raise LayerConfigError(
      "attention: dropout_rng is required when dropout_rate > 0 and deterministic=False."
      " Fix: pass dropout_rng=, or deterministic=True."
    )


def dot_product_attention_weights(
  query: Float[Array, "*batch q heads depth"],
  key: Float[Array, "*batch_k kv heads_k depth_k"],
  bias: Array | None = None,
  mask: Array | None = None,
  broadcast_dropout: bool = True,
  dropout_rng: jax.Array | None = None,
  dropout_rate: float = 0.0,
  deterministic: bool = False,
  dtype: Dtype | None = None,
  precision: PrecisionLike = None,
  module: Module | None = None,
  promote_dtype: PromoteDtypeFn = promote_dtype,
  is_causal: bool = False,
) -> Float[Array, "*batch heads q kv"]:
  """Attention weights ``softmax(q k^T / sqrt(depth) + bias, masked)``, shape
  ``(*batch, heads, q_length, kv_length)`` (as flax.nnx).

  Args:
    query: ``(*batch, q_length, heads, depth)``.
    key: ``(*batch, kv_length, kv_heads, depth)``; ``heads`` must be a multiple
      of ``kv_heads`` (grouped-query attention: query head ``i`` attends with key
      head ``i // (heads // kv_heads)``).
    bias: added to the logits; broadcastable to the weights' shape.
    mask: False entries are masked out; broadcastable to the weights' shape.
    broadcast_dropout: share the dropout mask across batch axes.
    dropout_rng: key for dropout on the weights.
    dropout_rate: dropout probability.
    deterministic: no dropout when True.
    dtype: computation dtype (default: promoted from query and key).
    precision: ``jax.lax`` precision of the einsum.
    module: if given, the weights are sown into it as ``Intermediate``
      ``attention_weights``.
    promote_dtype: casts ``(query, key)`` (default :func:`promote_dtype`).
    is_causal: also mask out keys after the query position (lower-triangular
      ``(q_length, kv_length)`` mask, combined with ``mask``).

  Raises:
    InputShapeError: if the ranks, batch dims or depths of query and key differ,
      or the query heads are not a multiple of the key heads.
    LayerConfigError: (a ``ValueError``) if ``dropout_rate`` is not in ``[0, 1)``,
      or dropout is applied without ``dropout_rng`` (as flax.nnx 0.12.12).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> w = nnx.dot_product_attention_weights(jnp.ones((2, 3, 4, 8)), jnp.ones((2, 5, 4, 8)))
    >>> w.shape, float(w.sum(-1)[0, 0, 0])
    ((2, 4, 3, 5), 1.0)
  """
  _check_dropout(dropout_rate, deterministic, dropout_rng)
  query, key = promote_dtype((query, key), dtype=dtype)
  dtype = query.dtype
  _check_qkv(query, key)
  if query.shape[-1] != key.shape[-1]:
    raise InputShapeError(
      f"attention: query and key depths must match (last axis), got query {query.shape}"
      f" and key {key.shape}."
    )
  q_heads, kv_heads = query.shape[-2], key.shape[-2]
  groups = _head_groups(q_heads, kv_heads, "key")
  query = query / jnp.sqrt(query.shape[-1]).astype(dtype)
  if groups == 1:
    weights = jnp.einsum("...qhd,...khd->...hqk", query, key, precision=precision)
  else:
    query = query.reshape((*query.shape[:-2], kv_heads, groups, query.shape[-1]))
    weights = jnp.einsum("...qhgd,...khd->...hgqk", query, key, precision=precision)
    weights = weights.reshape((*weights.shape[:-4], q_heads, *weights.shape[-2:]))
  if bias is not None:
    weights = weights + bias
  if is_causal:
    causal = jnp.tril(jnp.ones(weights.shape[-2:], bool))
    mask = causal if mask is None else jnp.logical_and(jnp.asarray(mask).astype(bool), causal)
  if mask is not None:
    weights = jnp.where(jnp.asarray(mask).astype(bool), weights, jnp.finfo(dtype).min)
  weights = jax.nn.softmax(weights).astype(dtype)
  if module is not None:
    module.sow(Intermediate, "attention_weights", weights)
  if not deterministic and dropout_rate > 0.0:
    assert dropout_rng is not None  # _check_dropout
    keep_prob = 1.0 - dropout_rate
    if broadcast_dropout:
      shape = (1,) * (key.ndim - 2) + weights.shape[-2:]
    else:
      shape = weights.shape
    keep = jax.random.bernoulli(dropout_rng, keep_prob, shape)
    weights = weights * (keep.astype(dtype) / jnp.asarray(keep_prob, dtype))
  return weights


def dot_product_attention(
  query: Float[Array, "*batch q heads depth"],
  key: Float[Array, "*batch_k kv heads_k depth_k"],
  value: Float[Array, "*batch_v kv_v heads_v vdepth"],
  bias: Array | None = None,
  mask: Array | None = None,
  broadcast_dropout: bool = True,
  dropout_rng: jax.Array | None = None,
  dropout_rate: float = 0.0,
  deterministic: bool = False,
  dtype: Dtype | None = None,
  precision: PrecisionLike = None,
  module: Module | None = None,
  promote_dtype: PromoteDtypeFn = promote_dtype,
  is_causal: bool = False,
) -> Float[Array, "*batch q heads vdepth"]:
  """Scaled dot-product attention, ``weights @ value``, shape
  ``(*batch, q_length, heads, v_depth)`` (as flax.nnx.dot_product_attention).

  Arguments as :func:`dot_product_attention_weights`, plus ``value``
  ``(*batch, kv_length, kv_heads, v_depth)`` (``heads`` a multiple of its heads).

  Raises:
    InputShapeError: if the shapes of query, key and value do not fit (ranks,
      batch dims, key/value lengths, depths, head counts).
    LayerConfigError: as :func:`dot_product_attention_weights` (``dropout_rate``
      outside ``[0, 1)``, dropout without ``dropout_rng``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> q = k = v = jnp.ones((2, 3, 4, 8))
    >>> nnx.dot_product_attention(q, k, v).shape
    (2, 3, 4, 8)
    >>> nnx.dot_product_attention(q, k[..., :2, :], v[..., :2, :]).shape   # 2 kv heads
    (2, 3, 4, 8)
  """
  _check_dropout(dropout_rate, deterministic, dropout_rng)
  query, key, value = promote_dtype((query, key, value), dtype=dtype)
  _check_qkv(query, key, value)
  if key.shape[-3] != value.shape[-3]:
    raise InputShapeError(
      f"attention: key and value lengths must match (axis -3), got key {key.shape} and"
      f" value {value.shape}."
    )
  weights = dot_product_attention_weights(
    query,
    key,
    bias,
    mask,
    broadcast_dropout,
    dropout_rng,
    dropout_rate,
    deterministic,
    dtype,
    precision,
    module,
    promote_dtype,
    is_causal,
  )
  q_heads, v_heads = weights.shape[-3], value.shape[-2]
  groups = _head_groups(q_heads, v_heads, "value")
  if groups == 1:
    return jnp.einsum("...hqk,...khd->...qhd", weights, value, precision=precision)
  weights = weights.reshape((*weights.shape[:-3], v_heads, groups, *weights.shape[-2:]))
  out = jnp.einsum("...hgqk,...khd->...qhgd", weights, value, precision=precision)
  return out.reshape((*out.shape[:-3], q_heads, out.shape[-1]))


def make_attention_mask(
  query_input: Array,
  key_input: Array,
  pairwise_fn: Callable[..., Any] = jnp.multiply,
  extra_batch_dims: int = 0,
  dtype: Dtype = jnp.float32,
) -> Array:
  """A ``(*batch, 1, q_len, kv_len)`` mask from ``pairwise_fn(query_input[..., :, None],
  key_input[..., None, :])`` (as flax.nnx).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.make_attention_mask(jnp.array([[1, 1, 0]]), jnp.array([[1, 0]])).shape
    (1, 1, 3, 2)
  """
  mask = pairwise_fn(jnp.expand_dims(query_input, -1), jnp.expand_dims(key_input, -2))
  mask = jnp.expand_dims(mask, -3)
  mask = jnp.expand_dims(mask, tuple(range(extra_batch_dims)))
  return mask.astype(dtype)


def make_causal_mask(x: Array, extra_batch_dims: int = 0, dtype: Dtype = jnp.float32) -> Array:
  """A causal ``(*batch, 1, len, len)`` mask for inputs ``x`` of shape ``(*batch, len)``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.make_causal_mask(jnp.ones((1, 3)))[0, 0].astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
  """
  idx = jnp.broadcast_to(jnp.arange(x.shape[-1], dtype=jnp.int32), x.shape)
  return make_attention_mask(idx, idx, jnp.greater_equal, extra_batch_dims, dtype)


def combine_masks(*masks: Array | None, dtype: Dtype = jnp.float32) -> Array | None:
  """Logical AND of the masks that are not None (None if there are none).

  Raises:
    InputShapeError: if the masks have different ranks.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.combine_masks(jnp.array([1, 1]), None, jnp.array([0, 1])).tolist()
    [0.0, 1.0]
  """
  ms = [m for m in masks if m is not None]
  if not ms:
    return None
  if any(m.ndim != ms[0].ndim for m in ms):
    raise InputShapeError(
      f"combine_masks: masks must have the same rank, got {[m.ndim for m in ms]}."
    )
  out = jnp.asarray(ms[0]).astype(bool)
  for m in ms[1:]:
    out = jnp.logical_and(out, jnp.asarray(m).astype(bool))
  return out.astype(dtype)

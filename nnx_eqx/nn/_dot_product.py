"""Scaled dot-product attention (Vaswani et al., 2017) and attention masks (as flax.nnx)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..graph._variables import Intermediate
from ..module._module import Module
from ._common import Dtype, InputShapeError, LayerConfigError, PrecisionLike, promote_dtype


def _check_qkv(*arrays) -> None:
  names = ", ".join(("query", "key", "value")[: len(arrays)])
  if any(a.ndim != arrays[0].ndim for a in arrays):
    raise InputShapeError(
      f"attention: {names} must have the same rank, got shapes"
      f" {[a.shape for a in arrays]}. Fix: pass (*batch, length, heads, head_dim) arrays."
    )
  if arrays[0].ndim < 3 or any(a.shape[:-3] != arrays[0].shape[:-3] for a in arrays):
    raise InputShapeError(
      f"attention: {names} must be (*batch, length, heads, head_dim) with the same batch"
      f" axes, got shapes {[a.shape for a in arrays]}."
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
) -> Float[Array, "*batch heads q kv"]:
  """Attention weights ``softmax(q k^T / sqrt(depth) + bias, masked)``, shape
  ``(*batch, heads, q_length, kv_length)`` (as flax.nnx).

  Args:
    query: ``(*batch, q_length, heads, depth)``.
    key: ``(*batch, kv_length, heads, depth)``.
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

  Raises:
    InputShapeError: if the ranks, batch axes or depths of query and key differ.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> w = nnx.dot_product_attention_weights(jnp.ones((2, 3, 4, 8)), jnp.ones((2, 5, 4, 8)))
    >>> w.shape, float(w.sum(-1)[0, 0, 0])
    ((2, 4, 3, 5), 1.0)
  """
  query, key = promote_dtype((query, key), dtype=dtype)
  dtype = query.dtype
  _check_qkv(query, key)
  if query.shape[-1] != key.shape[-1] or query.shape[-2] != key.shape[-2]:
    raise InputShapeError(
      f"attention: query {query.shape} and key {key.shape} must have the same number of"
      " heads and the same depth (last two axes)."
    )
  query = query / jnp.sqrt(query.shape[-1]).astype(dtype)
  weights = jnp.einsum("...qhd,...khd->...hqk", query, key, precision=precision)
  if bias is not None:
    weights = weights + bias
  if mask is not None:
    weights = jnp.where(jnp.asarray(mask).astype(bool), weights, jnp.finfo(dtype).min)
  weights = jax.nn.softmax(weights).astype(dtype)
  if module is not None:
    module.sow(Intermediate, "attention_weights", weights)
  if not deterministic and dropout_rate > 0.0:
    if dropout_rng is None:
      raise LayerConfigError("attention: dropout_rate > 0 and not deterministic needs dropout_rng.")
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
) -> Float[Array, "*batch q heads vdepth"]:
  """Scaled dot-product attention, ``weights @ value``, shape
  ``(*batch, q_length, heads, v_depth)`` (as flax.nnx.dot_product_attention).

  Arguments as :func:`dot_product_attention_weights`, plus ``value``
  ``(*batch, kv_length, heads, v_depth)``.

  Raises:
    InputShapeError: if the shapes of query, key and value do not fit.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> q = k = v = jnp.ones((2, 3, 4, 8))
    >>> nnx.dot_product_attention(q, k, v).shape
    (2, 3, 4, 8)
  """
  query, key, value = promote_dtype((query, key, value), dtype=dtype)
  _check_qkv(query, key, value)
  if key.shape[-3] != value.shape[-3]:
    raise InputShapeError(
      f"attention: key {key.shape} and value {value.shape} must have the same length (axis -3)."
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
  )
  return jnp.einsum("...hqk,...khd->...qhd", weights, value, precision=precision)


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

"""``eqx.nn.MultiheadAttention`` as an NNX module (Equinox's equations and convention)."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr

from ..graph._variables import Param
from ..module._module import Module
from ._layers import Dropout


def _project(x: jax.Array, kernel: Any, bias: Any) -> jax.Array:
  y = jnp.einsum("si,ihd->shd", x, kernel.value)
  return y if bias is None else y + bias.value


class MultiheadAttention(Module):
  """``eqx.nn.MultiheadAttention`` on unbatched sequences ``(seq, features)``.

  Each Equinox projection ``eqx.nn.Linear`` becomes a kernel of shape
  ``(in, num_heads, head_size)`` (``weight.T.reshape(in, heads, head_size)``) and
  a bias of shape ``(num_heads, head_size)``; the output projection becomes
  ``out_kernel`` of shape ``(num_heads, vo_size, output_size)`` and ``out_bias``.
  Attention weights go through the ``dropout`` submodule with one key per
  head, as in Equinox.

  Attributes:
    query_kernel, key_kernel, value_kernel, out_kernel: ``Param`` kernels.
    query_bias, key_bias, value_bias, out_bias: ``Param`` biases or None.
    dropout: a :class:`nnx.bridge.Dropout`.
    num_heads, query_size, key_size, value_size, output_size, qk_size, vo_size,
    use_query_bias, use_key_bias, use_value_bias, use_output_bias: as Equinox.

  Raises:
    ValueError: for key/value sequences of different lengths, a mask of the
      wrong shape, or ``process_heads`` that changes shapes.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.MultiheadAttention(2, 8, key=jax.random.key(0))
    >>> m = nnx.from_eqx(e)
    >>> x = jnp.ones((5, 8))
    >>> m.query_kernel.value.shape, bool(jnp.allclose(m(x, x, x), e(x, x, x), atol=1e-6))
    ((8, 2, 4), True)
  """

  query_kernel: Param
  key_kernel: Param
  value_kernel: Param
  out_kernel: Param
  query_bias: Param | None
  key_bias: Param | None
  value_bias: Param | None
  out_bias: Param | None
  dropout: Dropout
  num_heads: int
  query_size: int
  key_size: int
  value_size: int
  output_size: int
  qk_size: int
  vo_size: int
  use_query_bias: bool
  use_key_bias: bool
  use_value_bias: bool
  use_output_bias: bool

  def __call__(
    self,
    query: jax.Array,
    key_: jax.Array,
    value: jax.Array,
    mask: jax.Array | None = None,
    *,
    key: Any = None,
    inference: bool | None = None,
    deterministic: bool | None = None,
    process_heads: Any = None,
  ) -> jax.Array:
    with jax.named_scope("bridge.MultiheadAttention"):
      if deterministic is not None:
        inference = deterministic
      q_len, kv_len = query.shape[0], key_.shape[0]
      if value.shape[0] != kv_len:
        raise ValueError("key and value must both be sequences of equal length.")
      q = _project(query, self.query_kernel, self.query_bias)
      k = _project(key_, self.key_kernel, self.key_bias)
      v = _project(value, self.value_kernel, self.value_bias)
      if process_heads is not None:
        shapes = (q.shape, k.shape, v.shape)
        q, k, v = process_heads(q, k, v)
        if (q.shape, k.shape, v.shape) != shapes:
          raise ValueError("process_heads must not change the shape of the heads.")
      q = q / math.sqrt(q.shape[-1])
      logits = jnp.einsum("shd,Shd->hsS", q, k)
      if mask is not None:
        per_head = mask.shape[1:] if mask.ndim == 3 else mask.shape
        if per_head != (q_len, kv_len):
          raise ValueError(
            f"mask must have shape (query_seq_length, kv_seq_length)=({q_len}, {kv_len})"
            f" (optionally with a leading heads axis). Got {mask.shape}."
          )
        logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
      with jax.numpy_dtype_promotion("standard"):
        dtype = jnp.result_type(logits.dtype, jnp.float32)
      weights = jax.nn.softmax(logits.astype(dtype)).astype(logits.dtype)
      if key is None:
        weights = self.dropout(weights, key=None, inference=inference)
      else:
        keys = jr.split(key, self.num_heads)
        weights = jax.vmap(lambda w, k: self.dropout(w, key=k, inference=inference))(weights, keys)
      attn = jnp.einsum("hsS,Shd->shd", weights, v)
      out = jnp.einsum("shd,hdo->so", attn, self.out_kernel.value)
      return out if self.out_bias is None else out + self.out_bias.value

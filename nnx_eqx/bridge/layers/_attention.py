"""``eqx.nn.MultiheadAttention`` as an NNX module (Equinox's equations and convention)."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr

from ...module._module import Module
from ...module._rngs import Rngs, RngStream
from .._errors import ExampleShapeError
from ..convert._random import draw_key, dropout_active, resolve_inference
from ._layers import Dropout
from ._sharding import sharding_errors


def _weights(query: jax.Array, key_: jax.Array, mask: Any) -> jax.Array:
  """Equinox's ``dot_product_attention_weights`` for one head."""
  query = query / math.sqrt(query.shape[-1])
  logits = jnp.einsum("sd,Sd->sS", query, key_)
  if mask is not None:
    if mask.shape != logits.shape:
      raise ValueError(
        f"mask must have shape (query_seq_length, kv_seq_length)=({query.shape[0]},"
        f" {key_.shape[0]}). Got {mask.shape}."
      )
    logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
  with jax.numpy_dtype_promotion("standard"):
    dtype = jnp.result_type(logits.dtype, jnp.float32)
  return jax.nn.softmax(logits.astype(dtype)).astype(logits.dtype)


def _attend(query, key_, value, mask=None, dropout=None, *, key=None, inference=None):
  """Equinox's ``dot_product_attention`` for one head."""
  weights = _weights(query, key_, mask)
  if dropout is not None:
    weights = dropout(weights, key=key, inference=inference)
  return jnp.einsum("sS,Sd->sd", weights, value)


class MultiheadAttention(Module):
  """``eqx.nn.MultiheadAttention`` on unbatched sequences ``(seq, features)``.

  Equinox's structure and equations: four projection layers (each an
  :class:`nnx.bridge.Linear` with its ``weight (out, in)``, applied per position
  with ``jax.vmap``), heads split by reshaping, and attention weights through
  the ``dropout`` submodule with one key per head. The converted model is the
  source's program, bit for bit. Without ``key=``, an active dropout draws one
  key from the call's ``rngs`` (its ``"dropout"`` stream) or from the
  dropout's own stream (``nnx.from_eqx(model, rngs=...)``) and splits it per
  head, so the result is the source's with that key.

  Attributes:
    query_proj, key_proj, value_proj: projections to ``num_heads * qk_size``
      (``vo_size`` for values) features.
    output_proj: projection from ``num_heads * vo_size`` to ``output_size``.
    dropout: a :class:`nnx.bridge.Dropout`.
    num_heads, query_size, key_size, value_size, output_size, qk_size, vo_size,
    use_query_bias, use_key_bias, use_value_bias, use_output_bias: as Equinox.

  Raises:
    ExampleShapeError: ``query``, ``key_`` or ``value`` is not one sequence
      ``(seq_length, features)`` (a batch needs ``jax.vmap``, as in Equinox).
    ExplicitShardingError: JAX cannot shard the attention's equations on a
      mesh with Explicit axes.
    ValueError: for key/value sequences of different lengths, a mask of the
      wrong shape, or ``process_heads`` that changes shapes.
    MissingKeyError: the dropout is active and there is no key, ``rngs`` or stream.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.MultiheadAttention(2, 8, key=jax.random.key(0))
    >>> m = nnx.from_eqx(e)
    >>> x = jnp.ones((5, 8))
    >>> m.query_proj.weight.value.shape, bool((m(x, x, x) == e(x, x, x)).all())
    ((8, 8), True)
  """

  query_proj: Any
  key_proj: Any
  value_proj: Any
  output_proj: Any
  dropout: Any
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
    rngs: Rngs | RngStream | jax.Array | None = None,
  ) -> jax.Array:
    layer = "nnx.bridge.MultiheadAttention (from eqx.nn.MultiheadAttention)"
    with (
      jax.named_scope("bridge.MultiheadAttention"),
      sharding_errors(layer, query, key_, value, self),
    ):
      if deterministic is not None:
        inference = deterministic
      for arg, x, size in (
        ("query", query, self.query_size),
        ("key_", key_, self.key_size),
        ("value", value, self.value_size),
      ):
        if jnp.ndim(x) != 2 or jnp.shape(x)[-1] != size:
          raise ExampleShapeError(layer, arg, f"(seq_length, {size})", jnp.shape(x), rank=2)
      q_len, _ = query.shape
      kv_len, _ = key_.shape
      if value.shape[0] != kv_len:
        raise ValueError("key and value must both be sequences of equal length.")
      q = self._project(self.query_proj, query)
      k = self._project(self.key_proj, key_)
      v = self._project(self.value_proj, value)
      if process_heads is not None:
        shapes = (q.shape, k.shape, v.shape)
        q, k, v = process_heads(q, k, v)
        if (q.shape, k.shape, v.shape) != shapes:
          raise ValueError("process_heads must not change the shape of the heads.")
      if key is None:
        key = self._dropout_key(inference, rngs)
      attn_fn = functools.partial(_attend, dropout=self.dropout, inference=inference)
      keys = None if key is None else jr.split(key, q.shape[1])
      if mask is not None and mask.ndim == 3:
        attn = jax.vmap(attn_fn, in_axes=1, out_axes=1)(q, k, v, mask=mask, key=keys)
      else:
        attn = jax.vmap(functools.partial(attn_fn, mask=mask), in_axes=1, out_axes=1)(
          q, k, v, key=keys
        )
      attn = attn.reshape(q_len, -1)
      return jax.vmap(self.output_proj)(attn)

  def _dropout_key(self, inference: bool | None, rngs: Any) -> jax.Array | None:
    """The key Equinox would need (then split per head) when none is given: drawn
    from the call's ``rngs`` or the dropout's stream; None if dropout is off."""
    drop = self.dropout
    if not isinstance(drop, Dropout):
      return None
    if not dropout_active(drop.rate, resolve_inference(inference, None, drop.deterministic)):
      return None
    return draw_key(rngs, drop.rngs, "Dropout", ("dropout",))

  def _project(self, proj: Any, x: jax.Array) -> jax.Array:
    seq_length, _ = x.shape
    return jax.vmap(proj)(x).reshape(seq_length, self.num_heads, -1)

"""``MultiHeadAttention`` with an autoregressive cache (flax.nnx.nn.attention).

The attention functions and mask helpers (defined in ``_dot_product``) are importable
from here too, as in flax.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from ..graph.variables._variables import Cache
from ..module._module import Module
from ..module._rngs import Rngs, RngStream
from . import initializers
from ._common import (
  CacheError,
  Dtype,
  Initializer,
  LayerConfigError,
  PrecisionLike,
  PromoteDtypeFn,
  check_features,
  first_from,
  promote_dtype,
)
from ._dot_product import combine_masks as combine_masks
from ._dot_product import dot_product_attention as dot_product_attention
from ._dot_product import dot_product_attention_weights as dot_product_attention_weights
from ._dot_product import make_attention_mask as make_attention_mask
from ._dot_product import make_causal_mask as make_causal_mask
from ._rope import RoPE as RoPE
from ._rope import dot_product_attention_with_rope as dot_product_attention_with_rope
from .linear import LinearGeneral
from .normalization import LayerNorm
from .stochastic import next_key, own_stream


class MultiHeadAttention(Module):
  """Multi-head dot-product attention (as flax.nnx.MultiHeadAttention).

  Parameters, in flax's layout: ``query``/``key``/``value`` are
  :class:`LinearGeneral` layers with kernels ``(in, heads, head_dim)`` and
  biases ``(heads, head_dim)``; ``out`` has kernel ``(heads, head_dim, out)``.
  With ``decode`` it keeps an autoregressive cache (``Cache`` Variables
  ``cached_key``/``cached_value`` ``(*batch, max_length, heads, head_dim)`` and
  ``cache_index``), created by :meth:`init_cache`, and takes one token per call.

  Args:
    num_heads: number of heads.
    in_features: features of the query input.
    qkv_features: total projected features (default ``in_features``), split
      into ``num_heads`` heads of ``head_dim = qkv_features // num_heads``.
    out_features: output features (default ``in_features``).
    num_kv_heads: heads of the key/value projections (default ``num_heads``);
      fewer gives grouped-query attention (``num_heads`` must be a multiple).
    in_kv_features: features of the key/value inputs (default ``in_features``).
    dtype, param_dtype, precision: as for :class:`Linear`.
    broadcast_dropout: share the weights' dropout mask across batch axes.
    dropout_rate: dropout on the attention weights.
    deterministic: mode flag (switched by ``train()``/``eval()``); needed only
      when ``dropout_rate > 0``.
    kernel_init, bias_init: initializers of the projections
      (``out_kernel_init``/``out_bias_init`` override them for ``out``).
    use_bias: biases on the projections.
    attention_fn: the attention function (default :func:`dot_product_attention`).
    decode: default for autoregressive decoding (False; flax's None means the
      same here).
    normalize_qk: apply a ``LayerNorm`` (no bias) to queries and keys.
    qkv_promote_dtype, out_promote_dtype, ln_promote_dtype: ``promote_dtype`` of
      the projections, the output projection and the LayerNorms.
    qkv_dot_general, out_dot_general: the ``dot_general`` of the query/key/value
      projections and of ``out`` (default ``jax.lax.dot_general``);
      ``qkv_dot_general_cls``/``out_dot_general_cls``: a class whose instance, made
      at each call, replaces it (as :class:`LinearGeneral`'s ``dot_general_cls``;
      flax.nnx's options of the same names).
    kernel_metadata, bias_metadata: metadata of the query/key/value Params;
      ``out_kernel_metadata``/``out_bias_metadata`` (default: the same) of ``out``;
      ``query_ln_scale_metadata``/``key_ln_scale_metadata`` of the LayerNorm scales.
    rngs: ``params`` for the initializers; a ``dropout`` stream is forked and
      kept when ``dropout_rate > 0`` and ``keep_rngs``.

  Raises:
    LayerConfigError: if ``qkv_features`` is not divisible by ``num_heads``, or
      ``num_heads`` by ``num_kv_heads``.
    InputShapeError: if ``inputs_q`` does not end in ``in_features``.
    CacheError: decoding before :meth:`init_cache`, or with more than one token.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> mha = nnx.MultiHeadAttention(num_heads=2, in_features=8, rngs=nnx.Rngs(0))
    >>> mha.query.kernel.value.shape, mha.out.kernel.value.shape
    ((8, 2, 4), (2, 4, 8))
    >>> mha(jnp.ones((3, 5, 8))).shape
    (3, 5, 8)
  """

  def __init__(
    self,
    num_heads: int,
    in_features: int,
    qkv_features: int | None = None,
    out_features: int | None = None,
    num_kv_heads: int | None = None,
    in_kv_features: int | None = None,
    *,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    broadcast_dropout: bool = True,
    dropout_rate: float = 0.0,
    deterministic: bool | None = None,
    precision: PrecisionLike = None,
    kernel_init: Initializer = initializers.default_kernel_init,
    out_kernel_init: Initializer | None = None,
    bias_init: Initializer = initializers.zeros,
    out_bias_init: Initializer | None = None,
    use_bias: bool = True,
    attention_fn: Callable[..., Array] = dot_product_attention,
    decode: bool | None = False,
    normalize_qk: bool = False,
    qkv_promote_dtype: PromoteDtypeFn = promote_dtype,
    out_promote_dtype: PromoteDtypeFn = promote_dtype,
    ln_promote_dtype: PromoteDtypeFn = promote_dtype,
    qkv_dot_general: Callable[..., Array] | None = None,
    out_dot_general: Callable[..., Array] | None = None,
    qkv_dot_general_cls: Any = None,
    out_dot_general_cls: Any = None,
    rngs: Rngs,
    keep_rngs: bool = True,
    kernel_metadata: Mapping[str, Any] | None = None,
    out_kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    out_bias_metadata: Mapping[str, Any] | None = None,
    query_ln_scale_metadata: Mapping[str, Any] | None = None,
    key_ln_scale_metadata: Mapping[str, Any] | None = None,
  ):
    self.num_heads = num_heads
    self.num_kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
    if num_heads % self.num_kv_heads:
      raise LayerConfigError(
        f"MultiHeadAttention: num_heads={num_heads} is not a multiple of"
        f" num_kv_heads={self.num_kv_heads}."
      )
    self.in_features = in_features
    self.qkv_features = qkv_features if qkv_features is not None else in_features
    self.out_features = out_features if out_features is not None else in_features
    self.in_kv_features = in_kv_features if in_kv_features is not None else in_features
    if self.qkv_features % num_heads:
      raise LayerConfigError(
        f"MultiHeadAttention: qkv_features={self.qkv_features} is not divisible by"
        f" num_heads={num_heads}."
      )
    self.head_dim = self.qkv_features // num_heads
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.broadcast_dropout = broadcast_dropout
    self.dropout_rate = dropout_rate
    self.deterministic = deterministic
    self.precision = precision
    self.use_bias = use_bias
    self.attention_fn = attention_fn
    self.decode = decode
    self.normalize_qk = normalize_qk
    self.qkv_dot_general = qkv_dot_general
    self.out_dot_general = out_dot_general
    self.qkv_dot_general_cls = qkv_dot_general_cls
    self.out_dot_general_cls = out_dot_general_cls
    common = dict(
      dtype=dtype,
      param_dtype=param_dtype,
      precision=precision,
      use_bias=use_bias,
      rngs=rngs,
    )
    heads = (num_heads, self.head_dim)
    kv_heads = (self.num_kv_heads, self.head_dim)
    qkv = dict(
      kernel_init=kernel_init,
      bias_init=bias_init,
      promote_dtype=qkv_promote_dtype,
      dot_general=qkv_dot_general,
      dot_general_cls=qkv_dot_general_cls,
      kernel_metadata=kernel_metadata,
      bias_metadata=bias_metadata,
      **common,
    )
    self.query = LinearGeneral(in_features, heads, **qkv)
    self.key = LinearGeneral(self.in_kv_features, kv_heads, **qkv)
    self.value = LinearGeneral(self.in_kv_features, kv_heads, **qkv)
    self.query_ln: LayerNorm | None = None
    self.key_ln: LayerNorm | None = None
    if normalize_qk:
      ln = dict(
        use_bias=False,
        dtype=dtype,
        param_dtype=param_dtype,
        promote_dtype=ln_promote_dtype,
        rngs=rngs,
      )
      self.query_ln = LayerNorm(self.head_dim, scale_metadata=query_ln_scale_metadata, **ln)
      self.key_ln = LayerNorm(self.head_dim, scale_metadata=key_ln_scale_metadata, **ln)
    self.out = LinearGeneral(
      heads,
      self.out_features,
      axis=(-2, -1),
      kernel_init=out_kernel_init or kernel_init,
      bias_init=out_bias_init or bias_init,
      promote_dtype=out_promote_dtype,
      dot_general=out_dot_general,
      dot_general_cls=out_dot_general_cls,
      kernel_metadata=out_kernel_metadata or kernel_metadata,
      bias_metadata=out_bias_metadata or bias_metadata,
      **common,
    )
    keep = keep_rngs and dropout_rate > 0
    self.rngs = own_stream(rngs, "dropout", "MultiHeadAttention") if keep else None
    self.cached_key: Cache | None = None
    self.cached_value: Cache | None = None
    self.cache_index: Cache | None = None

  def __call__(
    self,
    inputs_q: Float[Array, "*batch q in"],
    inputs_k: Float[Array, "*batch kv in_kv"] | None = None,
    inputs_v: Float[Array, "*batch kv in_kv"] | None = None,
    *,
    mask: Array | None = None,
    deterministic: bool | None = None,
    rngs: Rngs | RngStream | jax.Array | None = None,
    sow_weights: bool = False,
    decode: bool | None = None,
    is_causal: bool = False,
    out_sharding: Any = None,
    qkv_sharding: Any = None,
    input_positions: Array | None = None,
  ) -> Float[Array, "*batch q out"]:
    """Attends from ``inputs_q`` to ``inputs_k``/``inputs_v`` (default: self-attention).

    ``mask`` broadcasts to ``(*batch, heads, q_length, kv_length)``; False entries
    are masked out. ``is_causal`` adds a causal mask (passed to ``attention_fn``
    only when True, and ignored while decoding: the cache mask already hides
    the positions not yet written, as flax.nnx 0.12.12); ``out_sharding`` goes to
    the output projection and ``qkv_sharding`` to the query/key/value
    projections. ``input_positions`` ``(*batch, length)``, when given, is passed
    on to ``attention_fn`` (for :func:`dot_product_attention_with_rope`). Call
    arguments take precedence over the module's flags.
    """
    with jax.named_scope(type(self).__name__):
      name = type(self).__name__
      if inputs_k is None:
        if inputs_v is not None:
          raise LayerConfigError(
            f"{name}: inputs_v given without inputs_k. Fix: pass inputs_k (inputs_v defaults"
            " to it)."
          )
        inputs_k = inputs_q
      if inputs_v is None:
        inputs_v = inputs_k
      check_features(name, inputs_q, -1, self.in_features, arg="inputs_q")
      query = self.query(inputs_q, out_sharding=qkv_sharding)
      key = self.key(inputs_k, out_sharding=qkv_sharding)
      value = self.value(inputs_v, out_sharding=qkv_sharding)
      if self.query_ln is not None and self.key_ln is not None:
        query = self.query_ln(query)
        key = self.key_ln(key)
      decoding = decode if decode is not None else self.decode
      if decoding:
        key, value, mask = self._decode_step(key, value, mask)
      dropout_rng = None
      det = True
      if self.dropout_rate > 0.0:
        det = first_from(deterministic, self.deterministic, flag="deterministic", layer=name)
        if not det:
          dropout_rng = next_key(rngs, self.rngs, "dropout", name)
      x = self.attention_fn(
        query,
        key,
        value,
        mask=mask,
        dropout_rng=dropout_rng,
        dropout_rate=self.dropout_rate,
        broadcast_dropout=self.broadcast_dropout,
        deterministic=det,
        dtype=self.dtype,
        precision=self.precision,
        module=self if sow_weights else None,
        **({"is_causal": True} if is_causal and not decoding else {}),
        **({"input_positions": input_positions} if input_positions is not None else {}),
      )
      return self.out(x, out_sharding=out_sharding)

  def _decode_step(self, key, value, mask):
    if self.cached_key is None or self.cached_value is None or self.cache_index is None:
      raise CacheError(
        "MultiHeadAttention: decode=True but the cache is not initialized. Fix: call"
        " `mha.init_cache((*batch, max_length, in_features))` first."
      )
    *batch, max_length, heads, depth = self.cached_key.value.shape
    expected = (*batch, 1, heads, depth)
    if key.shape != expected:
      raise CacheError(
        f"MultiHeadAttention: in decode mode the projected key must have shape {expected}"
        f" (one token), got {key.shape}. Fix: pass one token per call, with the batch"
        " shape given to init_cache."
      )
    cur = self.cache_index.value
    zero = jnp.zeros((), cur.dtype)
    idx = (zero,) * len(batch) + (cur, zero, zero)
    key = lax.dynamic_update_slice(self.cached_key.value, key.astype(self.cached_key.dtype), idx)
    value = lax.dynamic_update_slice(
      self.cached_value.value, value.astype(self.cached_value.dtype), idx
    )
    self.cached_key.value = key
    self.cached_value.value = value
    self.cache_index.value = cur + 1
    visible = jnp.broadcast_to(jnp.arange(max_length) <= cur, (*batch, 1, 1, max_length))
    return key, value, combine_masks(mask, visible)

  def init_cache(self, input_shape: tuple[int, ...], dtype: Dtype = jnp.float32) -> None:
    """Creates zeroed ``Cache`` Variables for decoding inputs of shape
    ``(*batch, max_length, in_features)``.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> mha = nnx.MultiHeadAttention(2, 4, decode=True, rngs=nnx.Rngs(0))
      >>> mha.init_cache((1, 6, 4))
      >>> mha(jnp.ones((1, 1, 4))).shape, int(mha.cache_index.value)
      ((1, 1, 4), 1)
    """
    shape = (*input_shape[:-1], self.num_kv_heads, self.head_dim)
    self.cached_key = Cache(jnp.zeros(shape, dtype))
    self.cached_value = Cache(jnp.zeros(shape, dtype))
    self.cache_index = Cache(jnp.array(0, dtype=jnp.int32))

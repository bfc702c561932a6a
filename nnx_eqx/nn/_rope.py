"""``RoPE`` and ``dot_product_attention_with_rope`` (as flax.nnx 0.12.12).

Rotary position embedding: RoFormer, Su et al. 2021 (arXiv:2104.09864).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..graph.variables._variables import Variable
from ..module._module import Module
from ._common import InputShapeError, LayerConfigError
from ._dot_product import dot_product_attention


def _check_size(embedding_size: int) -> None:
  if embedding_size <= 0 or embedding_size % 2:
    raise LayerConfigError(
      f"RoPE: embedding_size must be positive and even, got {embedding_size}. Fix: use an"
      " even head dimension."
    )


class RoPE(Module):
  """Rotary position embedding (RoFormer, Su et al. 2021, arXiv:2104.09864).

  Rotates each pair of features ``(x[i], x[i + d/2])`` of the vector at
  position ``p`` by the angle ``p * theta ** (-2i / d)`` (``d`` the embedding
  size), so the dot product of two rotated vectors depends on their positions
  only through their difference. The pairing (first half with second half)
  and the frequencies follow flax.nnx 0.12.12's ``nnx.RoPE``.

  Args:
    theta: base of the frequencies (10000).
    embedding_size: the size ``d`` of the vectors (the head dimension); even.
      Given together with ``max_seq_len``, the sine/cosine tables for positions
      ``0 .. max_seq_len - 1`` are computed once and kept as ``nnx.Variable``
      attributes ``cached_sin``/``cached_cos`` ``(max_seq_len, d / 2)``;
      otherwise they are ``None`` and computed per call.
    max_seq_len: the longest sequence the tables cover.

  Raises:
    LayerConfigError: (a ``ValueError``) if only one of ``embedding_size`` and
      ``max_seq_len`` is given, or ``embedding_size`` is not positive and even.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> rope = nnx.RoPE()
    >>> x = jnp.ones((5, 8))  # (seq_length, embedding_size)
    >>> y = rope(x)
    >>> y.shape, bool(jnp.allclose(y[0], x[0]))  # position 0 is not rotated
    ((5, 8), True)
    >>> cached = nnx.RoPE(embedding_size=8, max_seq_len=16)
    >>> cached.cached_sin.value.shape
    (16, 4)
  """

  def __init__(
    self,
    theta: float = 10000.0,
    embedding_size: int | None = None,
    max_seq_len: int | None = None,
  ):
    self.theta = theta
    if (embedding_size is None) != (max_seq_len is None):
      raise LayerConfigError(
        "RoPE: give both embedding_size and max_seq_len (precomputed tables) or neither"
        f" (tables per call), got embedding_size={embedding_size},"
        f" max_seq_len={max_seq_len}."
      )
    self.cached_sin: Variable | None = None
    self.cached_cos: Variable | None = None
    if embedding_size is not None and max_seq_len is not None:
      sin, cos = self._tables(embedding_size, jnp.arange(float(max_seq_len)))
      self.cached_sin = Variable(sin)
      self.cached_cos = Variable(cos)

  def _tables(self, embedding_size: int, positions: Array) -> tuple[Array, Array]:
    _check_size(embedding_size)
    inv_freq = self.theta ** (-jnp.arange(0.0, embedding_size, 2) / embedding_size)
    # explicit ranks: callers may run under jax.numpy_rank_promotion("raise")
    angles = positions[..., None] * inv_freq.reshape((1,) * positions.ndim + (-1,))
    return jnp.sin(angles), jnp.cos(angles)

  def __call__(
    self, x: Float[Array, "*batch seq d"], input_positions: Array | None = None
  ) -> Float[Array, "*batch seq d"]:
    """Returns ``x`` ``(..., seq_length, d)`` with each position's vector rotated.

    Args:
      x: the vectors, positions on axis -2.
      input_positions: the position of each vector, shape ``(..., seq_length)``
        (broadcast against ``x``'s leading axes). Default: the cached tables when
        the layer has them, else ``arange(seq_length)``.

    Raises:
      InputShapeError: if ``input_positions`` does not end in ``seq_length``.
      LayerConfigError: if ``d`` is odd.
    """
    seq_len, size = x.shape[-2:]
    if input_positions is None and self.cached_sin is not None and self.cached_cos is not None:
      sin, cos = self.cached_sin.value[:seq_len], self.cached_cos.value[:seq_len]
    else:
      if input_positions is None:
        input_positions = jnp.arange(float(seq_len))
      elif input_positions.shape[-1] != seq_len:
        raise InputShapeError(
          f"RoPE: input_positions {input_positions.shape} must end in the sequence length"
          f" of x {x.shape} (axis -2). Fix: pass one position per vector."
        )
      sin, cos = self._tables(size, jnp.asarray(input_positions))
    sin = jnp.concatenate([sin, sin], axis=-1)
    cos = jnp.concatenate([cos, cos], axis=-1)
    if (extra := x.ndim - cos.ndim) > 0:
      sin = sin.reshape((1,) * extra + sin.shape)
      cos = cos.reshape((1,) * extra + cos.shape)
    half = size // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def dot_product_attention_with_rope(
  query: Float[Array, "*batch q heads d"],
  key: Float[Array, "*batch kv heads_k d"],
  value: Float[Array, "*batch kv heads_k vd"],
  *,
  rope: RoPE,
  input_positions: Array | None = None,
  **kwargs: Any,
) -> Float[Array, "*batch q heads vd"]:
  """:func:`dot_product_attention` with :class:`RoPE` applied to ``query`` and ``key``.

  As flax.nnx 0.12.12: every head is rotated by ``rope`` over the sequence axis
  (-3), then attention runs as usual. Pass it as the ``attention_fn`` of
  :class:`MultiHeadAttention` with ``functools.partial(...,
  rope=rope)``; ``MultiHeadAttention(...)(x, input_positions=p)`` forwards
  ``p`` here.

  Args:
    query: ``(*batch, q_length, heads, d)``.
    key: ``(*batch, kv_length, kv_heads, d)``.
    value: ``(*batch, kv_length, kv_heads, v_depth)``.
    rope: the :class:`RoPE` layer.
    input_positions: positions ``(*batch, length)`` of both query and key
      (default: as :class:`RoPE`).
    **kwargs: the other arguments of :func:`dot_product_attention`.

  Returns:
    ``(*batch, q_length, heads, v_depth)``.

  Raises:
    InputShapeError, LayerConfigError: as :class:`RoPE` and
      :func:`dot_product_attention`.

  Example:
    >>> import functools, jax.numpy as jnp, nnx_eqx as nnx
    >>> q = k = v = jnp.ones((2, 5, 4, 8))
    >>> nnx.dot_product_attention_with_rope(q, k, v, rope=nnx.RoPE()).shape
    (2, 5, 4, 8)
    >>> attn = functools.partial(nnx.dot_product_attention_with_rope, rope=nnx.RoPE())
    >>> mha = nnx.MultiHeadAttention(4, 32, attention_fn=attn, rngs=nnx.Rngs(0))
    >>> mha(jnp.ones((2, 5, 32))).shape
    (2, 5, 32)
  """
  if input_positions is None:
    apply = jax.vmap(rope, in_axes=-2, out_axes=-2)
  else:
    apply = jax.vmap(rope, in_axes=(-2, None), out_axes=-2)
  query = apply(query, input_positions)
  key = apply(key, input_positions)
  return dot_product_attention(query, key, value, **kwargs)

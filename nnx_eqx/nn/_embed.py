"""``Embed``: a lookup table of vectors (as flax.nnx.Embed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Shaped

from ..graph.variables._variables import Param
from ..module._module import Module
from ..module._rngs import Rngs
from . import initializers
from ._common import (
  Dtype,
  Initializer,
  InputDtypeError,
  PromoteDtypeFn,
  check_features,
  optional_kwargs,
  promote_dtype,
  read,
)

#: flax.nnx's default embedding initializer: normal with std ``1 / sqrt(features)``.
default_embed_init = initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)


class Embed(Module):
  """Maps integer ids to vectors: ``embedding[ids]`` (as flax.nnx.Embed).

  Args:
    num_embeddings: number of rows (the vocabulary size).
    features: size of each vector.
    dtype: dtype of the output (default: that of ``embedding``).
    param_dtype: dtype of ``embedding`` (default float32).
    embedding_init: initializer of ``embedding``, shape ``(num_embeddings, features)``.
    promote_dtype: casts ``(embedding,)`` (call) or ``(query, embedding)`` (attend).
    embedding_metadata: metadata of the Param.
    rngs: uses the ``params`` stream.

  Raises:
    InputDtypeError: if the ids are not integers.
    InputShapeError: if the query given to :meth:`attend` does not end in ``features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> emb = nnx.Embed(10, 4, rngs=nnx.Rngs(0))
    >>> emb(jnp.array([[1, 2, 3]])).shape, emb.attend(jnp.ones((2, 4))).shape
    ((1, 3, 4), (2, 10))
  """

  def __init__(
    self,
    num_embeddings: int,
    features: int,
    *,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    embedding_init: Initializer = default_embed_init,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    embedding_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self.promote_dtype = promote_dtype
    self.embedding = Param(
      embedding_init(rngs.params(), (num_embeddings, features), param_dtype),
      **(embedding_metadata or {}),
    )
    self.num_embeddings = num_embeddings
    self.features = features
    self.dtype = dtype or self.embedding.value.dtype
    self.param_dtype = param_dtype

  def __call__(
    self, inputs: Shaped[ArrayLike, "*batch"], out_sharding: Any = None
  ) -> Float[Array, "*batch features"]:
    """Looks up ``ids`` (any shape, integer dtype); returns ``(*ids.shape, features)``,
    with the sharding ``out_sharding`` when given (explicit-sharding meshes)."""
    ids = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      ids = jnp.asarray(ids)
      if not jnp.issubdtype(ids.dtype, jnp.integer):
        raise InputDtypeError(
          f"Embed: ids must be integers, got dtype {ids.dtype}. Fix: cast with"
          " `ids.astype(jnp.int32)`."
        )
      (embedding,) = self.promote_dtype((read(self.embedding),), dtype=self.dtype, inexact=False)
      if self.num_embeddings == 1:
        return jnp.broadcast_to(embedding, (*ids.shape, self.features))
      if out_sharding is not None:
        take = jax.sharding.auto_axes(_take_rows, out_sharding=out_sharding)
        return take(embedding, ids)
      return _take_rows(embedding, ids)

  def attend(
    self, query: Float[Array, "*batch features"], out_sharding: Any = None
  ) -> Float[Array, "*batch num"]:
    """Inner products of ``query`` with every embedding: ``query @ embedding.T``,
    shape ``(*batch, num_embeddings)`` (for tied input/output embeddings), with the
    sharding ``out_sharding`` when given.

    Raises:
      InputShapeError: if ``query`` does not end in ``features``.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> emb = nnx.Embed(5, 3, rngs=nnx.Rngs(0))
      >>> table = emb.embedding.value
      >>> bool((emb.attend(emb(jnp.array(2))) == table @ table[2]).all())
      True
    """
    with jax.named_scope(f"{type(self).__name__}.attend"):
      check_features("Embed.attend", query, -1, self.features, arg="query")
      query, embedding = self.promote_dtype((query, read(self.embedding)), dtype=self.dtype)
      return jnp.dot(query, embedding.T, **optional_kwargs(out_sharding=out_sharding))


def _take_rows(embedding: Array, ids: Array) -> Array:
  return jnp.take(embedding, ids, axis=0)

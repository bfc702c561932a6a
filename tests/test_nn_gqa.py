"""Grouped-query attention (fewer key/value heads), is_causal and the shape errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


def randn(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def reference_attention(q, k, v, mask=None):
  """softmax(q k^T / sqrt(d)) v with plain jnp (heads already matched)."""
  logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
  if mask is not None:
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits), v)


def test_gqa_equals_attention_with_repeated_kv_heads():
  q, k, v = randn(2, 4, 6, 8, seed=0), randn(2, 5, 3, 8, seed=1), randn(2, 5, 3, 8, seed=2)
  out = nnx.dot_product_attention(q, k, v)
  # query head i uses key/value head i // 2
  expected = reference_attention(q, jnp.repeat(k, 2, axis=2), jnp.repeat(v, 2, axis=2))
  assert out.shape == (2, 4, 6, 8)
  assert_trees_close(out, expected)
  weights = nnx.dot_product_attention_weights(q, k)
  assert weights.shape == (2, 6, 4, 5)
  w_ref = nnx.dot_product_attention_weights(q, jnp.repeat(k, 2, axis=2))
  assert_trees_close(weights, w_ref)


def test_is_causal_equals_an_explicit_causal_mask():
  q, k, v = randn(1, 4, 2, 8, seed=0), randn(1, 4, 2, 8, seed=1), randn(1, 4, 2, 8, seed=2)
  causal = jnp.tril(jnp.ones((4, 4), bool))
  assert_trees_close(
    nnx.dot_product_attention(q, k, v, is_causal=True), reference_attention(q, k, v, causal)
  )
  pad = jnp.array([True, True, True, False])[None, None, None, :]
  assert_trees_close(
    nnx.dot_product_attention(q, k, v, mask=pad, is_causal=True),
    reference_attention(q, k, v, causal & pad),
  )


@pytest.mark.parametrize(
  "q_shape,k_shape,v_shape,match",
  [
    ((2, 16, 4, 8), (16, 4, 8), (16, 4, 8), "same rank"),
    ((2, 16, 4, 8), (3, 16, 4, 8), (3, 16, 4, 8), "batch dims must match"),
    ((2, 16, 4, 8), (2, 16, 4, 8), (2, 15, 4, 8), "lengths must match"),
    ((2, 16, 4, 8), (2, 16, 4, 7), (2, 16, 4, 8), "depths must match"),
    ((1, 4, 5, 8), (1, 4, 2, 8), (1, 4, 2, 8), r"query heads \(5\) must be a multiple"),
  ],
)
def test_shape_errors_name_the_problem(q_shape, k_shape, v_shape, match):
  with pytest.raises(nnx.InputShapeError, match=match):
    nnx.dot_product_attention(jnp.ones(q_shape), jnp.ones(k_shape), jnp.ones(v_shape))
  assert issubclass(nnx.InputShapeError, ValueError)


def test_mha_num_kv_heads_projections_and_decode_cache():
  mha = nnx.MultiHeadAttention(4, 16, num_kv_heads=2, rngs=nnx.Rngs(0))
  assert mha.query.kernel.value.shape == (16, 4, 4)
  assert mha.key.kernel.value.shape == (16, 2, 4)
  assert mha.value.kernel.value.shape == (16, 2, 4)
  x = randn(1, 3, 16)
  y = mha(x)
  q, k, v = mha.query(x), mha.key(x), mha.value(x)
  expected = mha.out(reference_attention(q, jnp.repeat(k, 2, axis=2), jnp.repeat(v, 2, axis=2)))
  assert_trees_close(y, expected)
  mha.init_cache((1, 3, 16))
  assert mha.cached_key.value.shape == (1, 3, 2, 4)
  assert mha(x[:, :1], decode=True).shape == (1, 1, 16)
  with pytest.raises(nnx.LayerConfigError, match="num_kv_heads=3"):
    nnx.MultiHeadAttention(4, 16, num_kv_heads=3, rngs=nnx.Rngs(0))


def test_mha_is_causal_is_forwarded():
  mha = nnx.MultiHeadAttention(2, 8, rngs=nnx.Rngs(0))
  x = randn(1, 4, 8)
  mask = nnx.make_causal_mask(jnp.ones((1, 4)))
  assert_trees_close(mha(x, is_causal=True), mha(x, mask=mask))

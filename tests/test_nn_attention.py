"""Attention: dot_product_attention against a hand-written einsum, MultiHeadAttention in
flax's parameter layout, the decode cache against full causal attention, flags, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal


def randn(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def np_init(key, shape, dtype=jnp.float32):
  return jnp.asarray(0.3 * np.random.default_rng(sum(shape)).standard_normal(shape), dtype)


def manual_attention(q, k, v, mask=None, bias=None):
  logits = jnp.einsum("...qhd,...khd->...hqk", q / jnp.sqrt(jnp.float32(q.shape[-1])), k)
  if bias is not None:
    logits = logits + bias
  if mask is not None:
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  w = jax.nn.softmax(logits)
  return jnp.einsum("...hqk,...khd->...qhd", w, v), w


def test_dot_product_attention_matches_manual_einsum():
  q, k, v = randn(2, 3, 4, 5, seed=0), randn(2, 6, 4, 5, seed=1), randn(2, 6, 4, 7, seed=2)
  mask = jnp.asarray(np.random.default_rng(3).random((2, 1, 3, 6)) > 0.3)
  bias = randn(1, 4, 3, 6, seed=4)
  for kw in ({}, {"mask": mask}, {"bias": bias}, {"mask": mask, "bias": bias}):
    out, w = manual_attention(q, k, v, **kw)
    assert_trees_close(nnx.dot_product_attention(q, k, v, **kw), out)
    assert_trees_close(nnx.dot_product_attention_weights(q, k, **kw), w)


def test_attention_dropout_on_weights():
  q = k = v = randn(1, 4, 2, 3)
  a = nnx.dot_product_attention(
    q, k, v, dropout_rng=jax.random.key(0), dropout_rate=0.5, deterministic=False
  )
  b = nnx.dot_product_attention(q, k, v, dropout_rate=0.5, deterministic=True)
  assert not np.array_equal(a, b)
  assert_trees_close(b, manual_attention(q, k, v)[0])


def test_attention_shape_errors():
  with pytest.raises(nnx.InputShapeError, match="same rank"):
    nnx.dot_product_attention(randn(2, 3, 4, 5), randn(3, 4, 5), randn(3, 4, 5))
  with pytest.raises(nnx.InputShapeError, match="depths must match"):
    nnx.dot_product_attention_weights(randn(3, 4, 5), randn(3, 4, 6))
  with pytest.raises(nnx.InputShapeError, match="lengths must match"):
    nnx.dot_product_attention(randn(3, 4, 5), randn(3, 4, 5), randn(2, 4, 5))


def test_masks():
  causal = nnx.make_causal_mask(jnp.ones((2, 4)))
  assert causal.shape == (2, 1, 4, 4)
  assert_trees_equal(causal[0, 0], jnp.tril(jnp.ones((4, 4))))
  pad = nnx.make_attention_mask(jnp.array([[1, 1, 0]]), jnp.array([[1, 0, 1]]))
  assert_trees_equal(pad[0, 0], [[1, 0, 1], [1, 0, 1], [0, 0, 0]])
  assert_trees_equal(nnx.combine_masks(causal, None, causal), causal)
  assert nnx.combine_masks(None) is None
  with pytest.raises(nnx.InputShapeError, match="same rank"):
    nnx.combine_masks(causal, jnp.ones((4, 4)))


def make_mha(**kw):
  init = {"kernel_init": np_init, "bias_init": np_init}
  return nnx.MultiHeadAttention(
    num_heads=2, in_features=6, qkv_features=8, rngs=nnx.Rngs(0), **init, **kw
  )


def test_mha_layout_and_math_match_manual_einsums():
  mha = make_mha(out_features=5)
  assert mha.query.kernel.value.shape == (6, 2, 4) and mha.query.bias.value.shape == (2, 4)
  assert mha.out.kernel.value.shape == (2, 4, 5) and mha.out.bias.value.shape == (5,)
  xq, xkv = randn(3, 4, 6, seed=1), randn(3, 7, 6, seed=2)

  def proj(layer, x):
    return jnp.einsum("...i,ihd->...hd", x, layer.kernel.value) + layer.bias.value

  q, k, v = proj(mha.query, xq), proj(mha.key, xkv), proj(mha.value, xkv)
  h, _ = manual_attention(q, k, v)
  expected = jnp.einsum("...hd,hdo->...o", h, mha.out.kernel.value) + mha.out.bias.value
  assert_trees_close(mha(xq, xkv), expected)


def test_mha_decode_cache_equals_full_causal_attention():
  mha = make_mha()
  x = randn(2, 5, 6)
  full = mha(x, mask=nnx.make_causal_mask(jnp.ones((2, 5))))
  mha.init_cache(x.shape)
  assert isinstance(mha.cached_key, nnx.Cache) and mha.cached_key.value.shape == (2, 5, 2, 4)
  step = nnx.jit(lambda m, t: m(t, decode=True))
  steps = [step(mha, x[:, i : i + 1]) for i in range(5)]
  assert int(mha.cache_index.value) == 5
  assert_trees_close(jnp.concatenate(steps, axis=1), full)


def test_mha_decode_errors():
  mha = make_mha(decode=True)
  with pytest.raises(nnx.CacheError, match="call `mha.init_cache"):
    mha(randn(2, 1, 6))
  mha.init_cache((2, 5, 6))
  with pytest.raises(
    nnx.CacheError, match=r"shape \(2, 1, 2, 4\) \(one token\), got \(2, 3, 2, 4\)"
  ):
    mha(randn(2, 3, 6))


def test_mha_config_and_input_errors():
  with pytest.raises(nnx.LayerConfigError, match="qkv_features=7 is not divisible by num_heads=2"):
    nnx.MultiHeadAttention(2, 6, qkv_features=7, rngs=nnx.Rngs(0))
  with pytest.raises(nnx.InputShapeError, match="`inputs_q` has 5 features.*expects 6"):
    make_mha()(randn(2, 3, 5))
  with pytest.raises(nnx.LayerConfigError, match="inputs_v given without inputs_k"):
    make_mha()(randn(2, 3, 6), inputs_v=randn(2, 3, 6))


def test_mha_dropout_follows_the_deterministic_flag():
  mha = make_mha(dropout_rate=0.5)
  x = randn(2, 4, 6)
  with pytest.raises(nnx.MissingFlagError, match="MultiHeadAttention: `deterministic`"):
    mha(x)  # flax default: deterministic=None
  mha.eval()
  y = mha(x)
  assert_trees_equal(y, mha(x))
  mha.train()
  assert not np.array_equal(mha(x), y)
  assert_trees_equal(mha(x, deterministic=True), y)  # the argument wins
  assert int(mha.rngs.count.value) == 1


def test_mha_sow_weights_and_normalize_qk():
  mha = make_mha(normalize_qk=True)
  assert mha.query_ln.bias is None and mha.key_ln.scale.value.shape == (4,)
  mha(randn(1, 3, 6), sow_weights=True)
  (weights,) = nnx.pop(mha, nnx.Intermediate).attention_weights.value
  assert weights.shape == (1, 2, 3, 3)
  assert_trees_close(weights.sum(-1), 1.0)

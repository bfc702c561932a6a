"""What flax.nnx 0.12.12 added or changed since 0.12.8, as nnx_eqx provides it.

RoPE and dot_product_attention_with_rope, capture_noop on sow/perturb, Sequential's
keyword forwarding, attention's dropout checks and decode with is_causal, the reuse
of cond/switch branch wrappers, Metric.reset under vmap, and Pytree._pytree__nodes.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal
from nnx_eqx.transforms import transforms


def _rope_by_pairs(x, theta=10000.0):
  """RoFormer's rotation written out per pair (x[i], x[i + d/2]), in NumPy."""
  x = np.asarray(x, np.float64)
  seq, d = x.shape[-2:]
  out = np.empty_like(x)
  for p in range(seq):
    for i in range(d // 2):
      angle = p * theta ** (-2 * i / d)
      a, b = x[..., p, i], x[..., p, i + d // 2]
      out[..., p, i] = a * np.cos(angle) - b * np.sin(angle)
      out[..., p, i + d // 2] = a * np.sin(angle) + b * np.cos(angle)
  return out


def test_rope_matches_the_pairwise_rotation():
  x = jax.random.normal(jax.random.key(0), (2, 6, 8))
  assert_trees_close(nnx.RoPE()(x), jnp.asarray(_rope_by_pairs(x), jnp.float32), atol=1e-5)
  assert_trees_close(
    nnx.RoPE(theta=50.0)(x), jnp.asarray(_rope_by_pairs(x, 50.0), jnp.float32), atol=1e-5
  )


def test_rope_dot_products_depend_on_relative_position_only():
  rope = nnx.RoPE()
  q, k = jax.random.normal(jax.random.key(1), (2, 16))

  def at(v, pos):
    return rope(jnp.zeros((pos + 1, 16)).at[pos].set(v))[pos]

  assert_trees_close(jnp.dot(at(q, 3), at(k, 9)), jnp.dot(at(q, 20), at(k, 26)), atol=1e-4)


def test_rope_cached_tables_and_explicit_positions_agree():
  x = jax.random.normal(jax.random.key(2), (5, 8))
  cached = nnx.RoPE(embedding_size=8, max_seq_len=12)
  assert cached.cached_sin.value.shape == (12, 4)
  assert_trees_close(cached(x), nnx.RoPE()(x), atol=1e-6)
  assert_trees_close(nnx.RoPE()(x, jnp.arange(5.0)), nnx.RoPE()(x), atol=1e-6)
  shifted = nnx.RoPE()(x, jnp.arange(5.0) + 3)
  assert_trees_close(shifted, nnx.RoPE()(jnp.zeros((8, 8)).at[3:].set(x))[3:], atol=1e-5)


def test_rope_errors():
  with pytest.raises(nnx.LayerConfigError, match="both embedding_size and max_seq_len"):
    nnx.RoPE(embedding_size=8)
  with pytest.raises(nnx.LayerConfigError, match="positive and even"):
    nnx.RoPE()(jnp.ones((3, 5)))
  with pytest.raises(nnx.InputShapeError, match="input_positions"):
    nnx.RoPE()(jnp.ones((3, 4)), jnp.arange(4.0))


def test_attention_with_rope_rotates_query_and_key_per_head():
  q, k, v = jax.random.normal(jax.random.key(3), (3, 2, 5, 4, 8))
  rope = nnx.RoPE()

  def per_head(x):  # (batch, seq, heads, d) -> rotate each head over seq
    return jnp.swapaxes(rope(jnp.swapaxes(x, 1, 2)), 1, 2)

  expected = nnx.dot_product_attention(per_head(q), per_head(k), v)
  assert_trees_close(nnx.dot_product_attention_with_rope(q, k, v, rope=rope), expected)


def test_multi_head_attention_passes_input_positions_to_the_attention_fn():
  rope = nnx.RoPE()
  attn = functools.partial(nnx.dot_product_attention_with_rope, rope=rope)
  mha = nnx.MultiHeadAttention(2, 8, attention_fn=attn, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(4), (2, 5, 8))
  with jax.numpy_rank_promotion("raise"):
    default = mha(x)
    explicit = mha(x, input_positions=jnp.arange(5.0))
    shifted = mha(x, input_positions=jnp.arange(5.0) + 7)
  assert default.shape == (2, 5, 8)
  assert_trees_close(default, explicit, atol=1e-6)
  # self-attention with RoPE only sees relative positions: a common shift changes nothing
  assert_trees_close(default, shifted, atol=1e-4)


@pytest.mark.parametrize("rate", [-0.1, 1.0, 2.0, float("nan"), float("inf")])
def test_attention_rejects_a_dropout_rate_outside_0_1(rate):
  q = jnp.ones((2, 3, 2, 4))
  with pytest.raises(ValueError, match=r"dropout_rate must be in the range \[0, 1\)"):
    nnx.dot_product_attention(q, q, q, dropout_rate=rate, deterministic=True)


def test_attention_dropout_needs_a_key():
  q = jnp.ones((2, 3, 2, 4))
  with pytest.raises(ValueError, match="dropout_rng is required"):
    nnx.dot_product_attention(q, q, q, dropout_rate=0.5, deterministic=False)


def test_decode_with_is_causal_uses_the_cache_mask():
  def model():
    mha = nnx.MultiHeadAttention(2, 4, decode=True, rngs=nnx.Rngs(0))
    mha.init_cache((1, 4, 4))
    return mha

  plain, causal = model(), model()
  seq = jax.random.normal(jax.random.key(5), (1, 4, 4))
  for t in range(4):
    tok = seq[:, t : t + 1]
    assert_trees_equal(plain(tok), causal(tok, is_causal=True))


def test_sequential_forwards_each_keyword_to_the_layers_that_take_it():
  rngs = nnx.Rngs(0)
  bn = nnx.BatchNorm(4, rngs=rngs)
  seq = nnx.Sequential(nnx.Linear(4, 4, rngs=rngs), bn, nnx.relu, nnx.Dropout(0.5))
  x = jnp.ones((3, 4))
  before = bn.mean.value
  out = seq(x, use_running_average=True, deterministic=True)
  assert_trees_equal(bn.mean.value, before)
  assert out.shape == (3, 4)
  seq(x, use_running_average=False, deterministic=False, rngs=nnx.Rngs(dropout=1))
  assert not np.array_equal(bn.mean.value, before)  # the statistics moved

  seen = []

  def producer(h, *, scale=1.0):
    return {"a": h * scale, "b": h}

  def consumer(a, b, **extra):
    seen.append(extra)
    return a + b

  nnx.Sequential(producer, consumer)(x, scale=2.0, tag="t")
  assert seen == [{"scale": 2.0, "tag": "t"}]


def test_sequential_rejects_a_keyword_given_twice():
  seq = nnx.Sequential(lambda h: {"a": h, "scale": 3.0}, lambda a, *, scale=1.0: a * scale)
  with pytest.raises(
    TypeError, match=r"multiple values for arguments \['scale'\] in Sequential\[1\]"
  ):
    seq(jnp.ones(2), scale=2.0)


class _Sows(nnx.Module):
  def __call__(self, x, capture_noop=None):
    self.sow(nnx.Intermediate, "y", x + 1, capture_noop=capture_noop)
    return self.perturb("p", x, capture_noop=capture_noop)


def test_capture_noop_skips_storing_outside_capture_only():
  m = _Sows()
  assert m(2.0, capture_noop=True) == 2.0
  assert not hasattr(m, "y") and not hasattr(m, "p")
  _, sown = nnx.capture(m, nnx.Intermediate)(2.0, capture_noop=True)
  assert sown["y"].value == (3.0,)
  m(2.0)
  assert m.y.value == (3.0,) and hasattr(m, "p")


def test_set_sow_capture_noop_sets_the_default():
  m = _Sows()
  with nnx.set_sow_capture_noop(True):
    m(2.0)
    assert not hasattr(m, "y")
    m(2.0, capture_noop=False)
    assert m.y.value == (3.0,)
  assert nnx.set_sow_capture_noop.current_value() is False
  with pytest.raises(TypeError):
    nnx.set_sow_capture_noop(1)


def test_set_sow_capture_noop_sets_the_default_of_perturb():
  class Foo(nnx.Module):
    def __call__(self, x, capture_noop=None):
      return 3 * self.perturb("p", x, capture_noop=capture_noop)

  m = Foo()
  with nnx.set_sow_capture_noop(True):
    assert m(2.0) == 6.0 and not hasattr(m, "p")
    y, perturbations = nnx.capture(m, nnx.Perturbation)(2.0)
    assert y == 6.0 and perturbations["p"].value == 0.0 and not hasattr(m, "p")
    assert m(2.0, capture_noop=False) == 6.0 and m.p.value == 0.0


@pytest.mark.parametrize("which", ["cond", "switch"])
def test_cond_and_switch_trace_a_branch_once(which):
  traces = []

  def branch(x):
    traces.append(1)
    return jnp.logical_not(x)

  for _ in range(2):
    if which == "cond":
      nnx.cond(jnp.array(True), branch, branch, jnp.array(False))
    else:
      nnx.switch(jnp.array(0), (branch, branch), jnp.array(False))
  assert len(traces) == 1


def test_get_simple_cond_fn_reuses_the_wrapper_of_a_function():
  def f(x):
    return x

  w = transforms._get_simple_cond_fn(f, True)
  assert w is transforms._get_simple_cond_fn(f, True)
  assert w is not transforms._get_simple_cond_fn(f, False)

  class Slotted:
    __slots__ = ()

    def __call__(self, x):
      return x

  s = Slotted()
  assert transforms._get_simple_cond_fn(s, True) is not transforms._get_simple_cond_fn(s, True)


def test_metric_reset_under_vmap_keeps_the_batch_axis():
  metrics = nnx.vmap(lambda _: nnx.MultiMetric(loss=nnx.metrics.Average("loss")))(jnp.arange(3))
  metrics.update(loss=jnp.ones(3))
  metrics.reset()
  assert metrics.loss.total.value.shape == (3,)
  assert metrics.loss.count.value.shape == (3,)
  assert metrics.loss.count.value.dtype == jnp.int32


def test_pytree_nodes_lists_instance_attributes_not_properties():
  class Foo(nnx.Pytree):
    def __init__(self):
      self.x = jnp.zeros(2)
      self.n = 3

    @property
    def value(self):
      return self.x

    @value.setter
    def value(self, v):
      self.x = v

  foo = Foo()
  foo.value = jnp.zeros(4)
  assert foo._pytree__nodes == {"n": False, "x": True}
  assert foo.x.shape == (4,)


def test_layers_take_inputs_by_keyword_as_flax():
  rngs = nnx.Rngs(0)
  x = jnp.ones((1, 5, 2))
  for layer in (
    nnx.Linear(2, 3, rngs=rngs),
    nnx.LinearGeneral(2, 3, rngs=rngs),
    nnx.Conv(2, 3, (3,), rngs=rngs),
    nnx.ConvTranspose(2, 3, (3,), rngs=rngs),
    nnx.PReLU(),
  ):
    assert_trees_equal(layer(inputs=x), layer(x))
  embed = nnx.Embed(3, 2, rngs=rngs)
  assert_trees_equal(embed(inputs=jnp.array([1])), embed(jnp.array([1])))
  drop = nnx.Dropout(0.5)
  assert_trees_equal(drop(inputs=x, deterministic=True), x)
  cell = nnx.GRUCell(2, 3, rngs=rngs)
  carry = cell.initialize_carry((1, 2))
  assert_trees_equal(cell(carry, inputs=x[:, 0]), cell(carry, x[:, 0]))


def test_clone_without_variables_shares_them():
  a = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  seq = nnx.Sequential(a, a)
  c = nnx.clone(seq, variables=False)
  assert c is not seq and c.layers[0] is c.layers[1] and c.layers[0] is not a
  assert c.layers[0].kernel is a.kernel
  c.layers[0].bias.value = c.layers[0].bias.value + 1
  assert_trees_equal(a.bias.value, c.layers[0].bias.value)
  assert nnx.clone(a).kernel is not a.kernel
  with pytest.raises(ValueError, match="variables=True, or arrays=False"):
    nnx.clone(a, variables=False, arrays=True)

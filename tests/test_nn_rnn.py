"""RNN and Bidirectional against a Python loop over the cell."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close, assert_trees_equal


def randn(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def loop(cell, carry, xs):
  """Runs the cell step by step over axis 1 of ``xs`` (batch-major)."""
  ys = []
  for t in range(xs.shape[1]):
    carry, y = cell(carry, xs[:, t])
    ys.append(y)
  return carry, jnp.stack(ys, axis=1)


@pytest.mark.parametrize("make_cell", [nnx.LSTMCell, nnx.GRUCell, nnx.SimpleCell])
def test_rnn_equals_a_python_loop(make_cell):
  cell = make_cell(3, 4, rngs=nnx.Rngs(0))
  x = randn(2, 5, 3)
  carry0 = cell.initialize_carry((2, 3))
  carry, y = nnx.RNN(cell, return_carry=True)(x)
  ref_carry, ref_y = loop(cell, carry0, x)
  assert_trees_close(y, ref_y)
  assert_trees_close(carry, ref_carry)


def test_rnn_time_major_and_unroll():
  cell = nnx.GRUCell(3, 4, rngs=nnx.Rngs(0))
  x = randn(2, 6, 3)
  y = nnx.RNN(cell)(x)
  y_tm = nnx.RNN(cell, time_major=True, unroll=2)(jnp.swapaxes(x, 0, 1))
  assert_trees_close(jnp.swapaxes(y_tm, 0, 1), y)


def test_flip_sequences_keeps_padding_in_place():
  x = jnp.array([[1, 2, 3, 0], [4, 5, 6, 7]])
  out = nnx.nn.flip_sequences(x, jnp.array([3, 4]), num_batch_dims=1, time_major=False)
  assert out.tolist() == [[3, 2, 1, 0], [7, 6, 5, 4]]
  assert nnx.nn.flip_sequences(x, None, 1, False).tolist() == [[0, 3, 2, 1], [7, 6, 5, 4]]


def test_rnn_reverse_with_seq_lengths_and_last_carry():
  cell = nnx.GRUCell(3, 4, rngs=nnx.Rngs(0))
  x = randn(2, 5, 3)
  lengths = jnp.array([3, 5])
  carry, y = nnx.RNN(cell, return_carry=True)(x, seq_lengths=lengths)
  # the carry is each sequence's carry at its last valid step
  c0 = cell.initialize_carry((2, 3))
  for b, n in enumerate([3, 5]):
    ref_carry, _ = loop(cell, c0[b : b + 1], x[b : b + 1, :n])
    assert_trees_close(carry[b : b + 1], ref_carry)
  # reverse + keep_order: output t of sequence 0 comes from its valid part read backwards
  y_rev = nnx.RNN(cell, reverse=True, keep_order=True)(x, seq_lengths=lengths)
  _, ref = loop(cell, c0[:1], x[:1, :3][:, ::-1])
  assert_trees_close(y_rev[:1, :3], ref[:, ::-1])


def test_bidirectional_concatenates_both_directions():
  fwd = nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(0)))
  bwd = nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(1)))
  x = randn(2, 5, 3)
  (cf, cb), y = nnx.Bidirectional(fwd, bwd, return_carry=True)(x)
  ref_f = fwd(x)
  ref_b = bwd(x, reverse=True, keep_order=True)
  assert y.shape == (2, 5, 8)
  assert_trees_close(y[..., :4], ref_f)
  assert_trees_close(y[..., 4:], ref_b)
  # the backward half differs from running the same cell forwards
  assert not np.array_equal(np.asarray(ref_b), np.asarray(bwd(x)))
  assert cf.shape == cb.shape == (2, 4)


def test_broadcast_rngs_share_one_key_over_time():
  class NoisyCell(nnx.SimpleCell):
    def __init__(self, rngs):
      super().__init__(2, 2, rngs=rngs)
      self.drop = nnx.Dropout(0.5, rng_collection="noise", rngs=rngs)

    def __call__(self, carry, x):
      return carry, self.drop(jnp.ones_like(x))

  cell = NoisyCell(nnx.Rngs(0, noise=1))
  shared = nnx.RNN(cell, broadcast_rngs="noise")
  masks = shared(jnp.ones((1, 6, 2)))
  assert int(cell.drop.rngs.count.value) == 1  # one key drawn per call
  assert_trees_equal(masks, jnp.broadcast_to(masks[:, :1], masks.shape))
  per_step = nnx.RNN(cell)(jnp.ones((1, 6, 2)))
  assert int(cell.drop.rngs.count.value) == 7  # carried: one key per step
  assert not np.array_equal(per_step[:, 0], per_step[:, 1]) or not np.array_equal(
    per_step[:, 1], per_step[:, 2]
  )


def test_rnn_under_jit_does_not_retrace():
  rnn = nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(0)))
  counter = TraceCounter()
  f = nnx.jit(counter(lambda m, x: m(x)))
  x = randn(2, 5, 3)
  assert_trees_close(f(rnn, x), rnn(x))
  with assert_no_retrace(counter):
    f(rnn, x)


def test_rnn_rejects_bad_rngs():
  with pytest.raises(nnx.RngsTypeError, match="RNN: `rngs` must be"):
    nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(0)), rngs=jax.random.key(0))


def test_eager_rnn_calls_reuse_the_compiled_scan():
  traces = []

  class CountingCell(nnx.GRUCell):
    def __call__(self, carry, x):
      traces.append(1)
      return super().__call__(carry, x)

  rnn = nnx.RNN(CountingCell(3, 4, rngs=nnx.Rngs(0)))
  y = rnn(randn(2, 5, 3))
  assert len(traces) == 1  # the body is traced once, not once per step
  assert_trees_close(rnn(randn(2, 5, 3)), y)
  assert len(traces) == 1

"""Recurrent cells: one step and a loop over time against the hand-written equations,
carries, the fused LSTM against the plain one, scanning with split/merge, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

XS = jnp.asarray(np.random.default_rng(0).standard_normal((6, 2, 3)), jnp.float32)  # (T, B, in)


def np_init(key, shape, dtype=jnp.float32):
  rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 1000)))
  return jnp.asarray(0.5 * rng.standard_normal(shape), dtype)


INIT = {"kernel_init": np_init, "recurrent_kernel_init": np_init, "bias_init": np_init}


def lin(layer, x):
  y = x @ layer.kernel.value
  return y + layer.bias.value if layer.bias is not None else y


def test_lstm_cell_loop_matches_the_equations():
  cell = nnx.LSTMCell(3, 4, rngs=nnx.Rngs(0), **INIT)
  carry = cell.initialize_carry(XS.shape[1:])
  c = h = jnp.zeros((2, 4))
  assert_trees_equal(carry[0], c)
  sig = jax.nn.sigmoid
  for x in XS:
    carry, y = cell(carry, x)
    i = sig(lin(cell.ii, x) + lin(cell.hi, h))
    f = sig(lin(cell.if_, x) + lin(cell.hf, h))
    g = jnp.tanh(lin(cell.ig, x) + lin(cell.hg, h))
    o = sig(lin(cell.io, x) + lin(cell.ho, h))
    c = f * c + i * g
    h = o * jnp.tanh(c)
    assert_trees_close(carry[0], c)
    assert_trees_close(carry[1], h)
    assert_trees_close(y, h)
  assert cell.ii.bias is None and cell.hi.bias is not None


def test_optimized_lstm_equals_lstm_with_the_same_weights():
  cell = nnx.LSTMCell(3, 4, rngs=nnx.Rngs(0), **INIT)
  fused = nnx.OptimizedLSTMCell(3, 4, rngs=nnx.Rngs(1), **INIT)
  gates_i = [cell.ii, cell.if_, cell.ig, cell.io]
  gates_h = [cell.hi, cell.hf, cell.hg, cell.ho]
  fused.dense_i.kernel.value = jnp.concatenate([g.kernel.value for g in gates_i], axis=1)
  fused.dense_h.kernel.value = jnp.concatenate([g.kernel.value for g in gates_h], axis=1)
  fused.dense_h.bias.value = jnp.concatenate([g.bias.value for g in gates_h])
  a = b = cell.initialize_carry(XS.shape[1:])
  for x in XS:
    a, ya = cell(a, x)
    b, yb = fused(b, x)
  assert_trees_close(yb, ya)
  assert_trees_close(b[0], a[0])


def test_gru_cell_loop_matches_the_equations():
  cell = nnx.GRUCell(3, 4, rngs=nnx.Rngs(0), **INIT)
  carry = cell.initialize_carry(XS.shape[1:])
  h = jnp.zeros((2, 4))
  for x in XS:
    carry, y = cell(carry, x)
    xr, xz, xn = jnp.split(lin(cell.dense_i, x), 3, axis=-1)
    hr, hz, hn = jnp.split(h @ cell.dense_h.kernel.value, 3, axis=-1)
    r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    h = (1.0 - z) * n + z * h
    assert_trees_close(carry, h)
    assert_trees_close(y, h)
  assert cell.dense_h.bias is None


@pytest.mark.parametrize("residual", [False, True])
def test_simple_cell_matches_the_equations(residual):
  cell = nnx.SimpleCell(3, 4, residual=residual, rngs=nnx.Rngs(0), **INIT)
  h = cell.initialize_carry(XS.shape[1:])
  ref = h
  for x in XS:
    h, y = cell(h, x)
    pre = lin(cell.dense_i, x) + ref @ cell.dense_h.kernel.value
    ref = jnp.tanh(pre + ref if residual else pre)
    assert_trees_close(h, ref)


def test_cell_scanned_with_split_merge_equals_the_python_loop():
  cell = nnx.GRUCell(3, 4, rngs=nnx.Rngs(0), **INIT)
  graphdef, params = nnx.split(cell)

  def step(h, x):
    return nnx.merge(graphdef, params)(h, x)

  h0 = cell.initialize_carry(XS.shape[1:])
  h_scan, ys = jax.lax.scan(step, h0, XS)
  h = h0
  for t, x in enumerate(XS):
    h, y = cell(h, x)
    assert_trees_close(ys[t], y)
  assert_trees_close(h_scan, h)


def test_initialize_carry_shapes_dtypes_and_rngs():
  cell = nnx.LSTMCell(3, 5, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0), **INIT)
  c, h = cell.initialize_carry((7, 2, 3))
  assert c.shape == h.shape == (7, 2, 5) and c.dtype == jnp.bfloat16
  ones = nnx.SimpleCell(3, 5, rngs=nnx.Rngs(0), **INIT).initialize_carry(
    (3,), carry_init=jax.nn.initializers.normal(), rngs=nnx.Rngs(carry=1)
  )
  assert ones.shape == (5,) and float(jnp.abs(ones).sum()) > 0
  with pytest.raises(nnx.MissingRngsError, match="carry_init needs PRNG keys"):
    nnx.GRUCell(3, 5, rngs=nnx.Rngs(0), **INIT).initialize_carry(
      (3,), carry_init=jax.nn.initializers.normal()
    )
  normal = jax.nn.initializers.normal()
  kept = nnx.GRUCell(3, 5, keep_rngs=True, carry_init=normal, rngs=nnx.Rngs(0), **INIT)
  assert kept.initialize_carry((3,)).shape == (5,) and int(kept.rngs.count.value) == 1


def test_cell_input_size_error():
  cell = nnx.LSTMCell(3, 4, rngs=nnx.Rngs(0), **INIT)
  with pytest.raises(nnx.InputShapeError, match="LSTMCell: input `x` has 2 features.*expects 3"):
    cell(cell.initialize_carry((2, 3)), jnp.ones((2, 2)))

"""The tolerance policy knows the backend's default float32 matmul precision: CPU
computes in float32; GPUs round a float32 matmul's inputs to TensorFloat-32 and TPUs
to bfloat16 unless jax_default_matmul_precision asks for more."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nnx_eqx.testing import (
  REDUCED_PRECISION_TOLERANCES,
  TOLERANCES,
  assert_trees_close,
  matmul_precision,
  tolerance,
)


@pytest.mark.parametrize(
  "backend,setting,expected",
  [
    ("cpu", None, "float32"),
    ("gpu", None, "tensorfloat32"),
    ("tpu", None, "bfloat16"),
    ("gpu", "highest", "float32"),
    ("tpu", "float32", "float32"),
    ("gpu", "TF32_TF32_F32", "tensorfloat32"),
    ("tpu", "high", "tensorfloat32"),
    ("cpu", "bfloat16", "bfloat16"),
  ],
)
def test_matmul_precision_by_backend_and_setting(backend, setting, expected):
  with jax.default_matmul_precision(setting):
    assert matmul_precision(backend) == expected
  if setting is not None:
    assert matmul_precision(backend, setting) == expected


def test_tolerance_follows_the_precision_for_float32_only():
  assert tolerance(jnp.float32, backend="cpu", setting="default") == TOLERANCES["float32"]
  tf32 = REDUCED_PRECISION_TOLERANCES["tensorfloat32"]
  assert tolerance(jnp.float32, backend="gpu", setting="default") == tf32
  assert tolerance(jnp.complex64, backend="gpu", setting="default") == tf32
  assert tolerance(jnp.bfloat16, backend="gpu", setting="default") == TOLERANCES["bfloat16"]
  assert tolerance(jnp.int32, backend="gpu", setting="default") == (0.0, 0.0)
  # this process: the backend it runs on, at its configured precision
  precision = matmul_precision()
  expected = TOLERANCES["float32"]
  if precision != "float32":
    expected = REDUCED_PRECISION_TOLERANCES[precision]
  assert tolerance(jnp.float32) == expected


def _round_mantissa(x, bits):
  """``x`` (float32) rounded to nearest on ``bits`` explicit mantissa bits, as the
  tensor cores round a float32 matmul's inputs (TensorFloat-32: 10 bits)."""
  drop = 23 - bits
  u = np.asarray(x, np.float32).view(np.uint32)
  u = (u + np.uint32(1 << (drop - 1))) & np.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)
  return u.view(np.float32)


@pytest.mark.parametrize("precision,bits", [("tensorfloat32", 10), ("bfloat16", 7)])
@pytest.mark.parametrize("n", [8, 64, 1024])
def test_reduced_precision_tolerances_cover_rounded_matmul_inputs(precision, bits, n):
  """A matmul with unit-scale outputs whose inputs are rounded as at reduced
  precision stays within that precision's tolerance, and not within the float32
  one, which would fail on such a backend."""
  rng = np.random.default_rng(n)
  a = rng.standard_normal((64, n)).astype(np.float32)
  b = (rng.standard_normal((n, 64)) / np.sqrt(n)).astype(np.float32)
  exact = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
  a_r, b_r = _round_mantissa(a, bits), _round_mantissa(b, bits)
  rounded = np.matmul(a_r.astype(np.float64), b_r.astype(np.float64)).astype(np.float32)
  rtol, atol = REDUCED_PRECISION_TOLERANCES[precision]
  assert_trees_close(rounded, exact, rtol=rtol / 3, atol=atol / 3)  # with a margin of 3
  rtol, atol = TOLERANCES["float32"]  # the float32 policy would not hold
  assert (np.abs(rounded - exact) > atol + rtol * np.abs(exact)).any()


def test_a_given_tolerance_only_loosens_the_policy():
  rtol, atol = tolerance(jnp.float32)  # this backend's policy
  one = jnp.float32(1.0)
  apart = jnp.float32(1.0 + 4 * rtol)  # beyond the policy (atol + rtol)
  with pytest.raises(AssertionError):
    assert_trees_close(one, apart)
  assert_trees_close(one, apart, rtol=8 * rtol)  # a looser tolerance applies
  # a tighter one does not: within the policy still passes
  assert_trees_close(one, jnp.float32(1.0 + rtol / 2), rtol=rtol / 100, atol=atol / 100)

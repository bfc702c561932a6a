"""The one tolerance policy for numeric comparisons.

* **Same compiled program** (the two sides lower to identical stripped StableHLO,
  or one side is a round trip that performs no arithmetic): compare bitwise with
  :func:`assert_trees_equal`.
* **Different compiled programs** (a scan against an unrolled loop, a converted
  model against its original, a fused kernel against a reference): compare with
  :func:`assert_trees_close`, whose per-dtype tolerances are in
  :data:`TOLERANCES`. XLA may reassociate sums, fuse multiply-adds or pick other
  vector widths on another CPU, so such programs agree only to a few ulps times
  the reduction length; ``float32`` uses ``rtol=1e-5, atol=1e-6``.

The float32 tolerances hold where matmuls and convolutions compute in float32,
as on CPU. GPUs (TensorFloat-32, Ampere and newer) and TPUs (one bfloat16 pass)
round a float32 matmul's inputs by default (``jax_default_matmul_precision``
unset), so there :func:`tolerance` returns the looser float32 entries of
:data:`REDUCED_PRECISION_TOLERANCES`; setting the precision to ``"highest"``
restores the float32 policy on any backend.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

#: ``dtype name -> (rtol, atol)`` for comparisons across different programs.
TOLERANCES: dict[str, tuple[float, float]] = {
  "float64": (1e-12, 1e-14),
  "float32": (1e-5, 1e-6),
  "complex64": (1e-5, 1e-6),
  "float16": (2e-3, 1e-4),
  "bfloat16": (1.6e-2, 1e-3),
}


#: ``matmul precision -> (rtol, atol)`` for float32 and complex64 leaves where
#: float32 matmuls run at reduced precision. TensorFloat-32 keeps 10 of float32's
#: 23 mantissa bits (each rounded input is off by up to ``2**-11``, about 5e-4,
#: relative), one bfloat16 pass keeps 7 (``2**-8``, about 4e-3). Rounding the
#: inputs that way on CPU, unit-scale outputs of reductions over 8 to 1024 terms
#: were off by at most 1.9e-3 (TensorFloat-32) and 1.7e-2 (bfloat16), absolute;
#: the tolerances leave a factor of about 3 over that (tests/test_tolerance.py).
REDUCED_PRECISION_TOLERANCES: dict[str, tuple[float, float]] = {
  "tensorfloat32": (5e-3, 5e-3),
  "bfloat16": (5e-2, 5e-2),
}

# jax_default_matmul_precision values (names and dot-algorithm presets) by the
# precision of a float32 matmul they give; other values (fp8, fp16) count as bfloat16.
_FULL = {"highest", "float32", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32_X6"}
_FULL |= {"BF16_BF16_F32_X9", "TF32_TF32_F32_X3"}
_TF32 = {"high", "tensorfloat32", "TF32_TF32_F32", "BF16_BF16_F32_X3"}


def matmul_precision(backend: str | None = None, setting: str | None = None) -> str:
  """The precision of a float32 matmul without an explicit ``precision=``.

  Args:
    backend: ``"cpu"``, ``"gpu"``, ``"tpu"``...; ``None`` is ``jax.default_backend()``.
    setting: a ``jax_default_matmul_precision`` value; ``None`` reads the
      config (itself ``None`` unless set, e.g. by ``JAX_DEFAULT_MATMUL_PRECISION``).

  Returns:
    ``"float32"`` (CPU, or ``"highest"`` anywhere), ``"tensorfloat32"`` (a GPU
    by default) or ``"bfloat16"`` (a TPU by default).

  Example:
    >>> from nnx_eqx.testing import matmul_precision
    >>> matmul_precision("cpu", "default"), matmul_precision("gpu", "default")
    ('float32', 'tensorfloat32')
    >>> matmul_precision("tpu", "default"), matmul_precision("gpu", "highest")
    ('bfloat16', 'float32')
  """
  if setting is None:
    setting = getattr(jax.config, "jax_default_matmul_precision")
  if setting is None or setting == "default":
    backend = jax.default_backend() if backend is None else backend
    return {"cpu": "float32", "gpu": "tensorfloat32", "cuda": "tensorfloat32"}.get(
      backend, "bfloat16"
    )
  if setting in _FULL:
    return "float32"
  return "tensorfloat32" if setting in _TF32 else "bfloat16"


def tolerance(
  dtype: Any, *, backend: str | None = None, setting: str | None = None
) -> tuple[float, float]:
  """``(rtol, atol)`` of the policy for ``dtype``; ``(0, 0)`` for exact dtypes.

  Args:
    dtype: a NumPy/JAX dtype or anything ``np.dtype`` accepts.
    backend, setting: as in :func:`matmul_precision`; by default the backend and
      matmul precision this process computes with.

  Returns:
    The tolerances used by :func:`assert_trees_close` for that dtype: integer,
    boolean and key dtypes compare exactly; float32 and complex64 use
    :data:`TOLERANCES`, or :data:`REDUCED_PRECISION_TOLERANCES` where float32
    matmuls run at reduced precision (a GPU or TPU at its default precision).

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.testing import tolerance
    >>> tolerance(jnp.float32, backend="cpu"), tolerance(jnp.int32)
    ((1e-05, 1e-06), (0.0, 0.0))
    >>> tolerance(jnp.float32, backend="gpu", setting="default")
    (0.005, 0.005)
  """
  name = np.dtype(dtype).name
  if name in ("float32", "complex64"):
    precision = matmul_precision(backend, setting)
    if precision != "float32":
      return REDUCED_PRECISION_TOLERANCES[precision]
  return TOLERANCES.get(name, (0.0, 0.0))


def _leaves(tree: Any) -> tuple[list[tuple[Any, Any]], Any]:
  return jax.tree_util.tree_flatten_with_path(tree)


def _is_literal(x: Any) -> bool:
  """A Python number or a (nested) list/tuple of them, e.g. an expected ``[1.0, 2.0]``."""
  if isinstance(x, (list, tuple)):
    return all(_is_literal(y) for y in x)
  return isinstance(x, (bool, int, float, complex))


def _literal_as(x: Any, like: Any) -> Any:
  """``x`` as an array of ``like``'s dtype if ``x`` is a literal and ``like`` an array."""
  if hasattr(like, "dtype") and not jax.dtypes.issubdtype(like.dtype, jax.dtypes.prng_key):
    if _is_literal(x):
      out = np.asarray(x, dtype=like.dtype)
      return np.broadcast_to(out, np.shape(like)) if out.ndim == 0 else out
  return x


def _compare(a: Any, b: Any, *, exact: bool, rtol: float | None, atol: float | None) -> None:
  a, b = _literal_as(a, b), _literal_as(b, a)
  la, ta = _leaves(a)
  lb, tb = _leaves(b)
  if ta != tb:
    raise AssertionError(f"tree structures differ:\n  {ta}\n  {tb}")
  for (path, x), (_, y) in zip(la, lb):
    where = jax.tree_util.keystr(path) or "<root>"
    if not hasattr(x, "dtype") or not hasattr(y, "dtype"):
      if x != y:
        raise AssertionError(f"at {where}: {x!r} != {y!r}")
      continue
    if x.dtype != y.dtype or np.shape(x) != np.shape(y):
      raise AssertionError(
        f"at {where}: {x.dtype}{list(np.shape(x))} vs {y.dtype}{list(np.shape(y))}"
      )
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    xa, ya = np.asarray(x), np.asarray(y)
    if exact:
      r, t = 0.0, 0.0
    else:
      dr, dt = tolerance(xa.dtype)
      r = dr if rtol is None else max(rtol, dr)  # a given tolerance only loosens the
      t = dt if atol is None else max(atol, dt)  # policy (also on a reduced-precision GPU)
    np.testing.assert_allclose(
      xa.astype(np.float64) if xa.dtype.name == "bfloat16" else xa,
      ya.astype(np.float64) if ya.dtype.name == "bfloat16" else ya,
      rtol=r,
      atol=t,
      equal_nan=True,
      err_msg=f"at {where}",
    )


def assert_trees_close(a: Any, b: Any, *, rtol: float | None = None, atol: float | None = None):
  """Asserts two pytrees agree within the policy's tolerance for each leaf's dtype.

  Use it whenever the two sides come from different compiled programs.

  Args:
    a, b: pytrees with the same structure; array leaves must match in dtype
      and shape, other leaves compare with ``==``. An array compared with a
      Python literal (a number or nested lists of numbers, e.g. an expected
      ``[1.0, 2.0]``) takes the literal in the array's dtype; a number is
      broadcast to the array's shape.
    rtol, atol: loosen the policy (:func:`tolerance`) for every leaf; pass
      them only for a documented reason (e.g. a long recurrence). A value below
      the policy's for a leaf's dtype and backend has no effect, so a tolerance
      written for CPU float32 still holds where matmuls round to TensorFloat-32.

  Raises:
    AssertionError: naming the key path of the first leaf that differs in
      structure, dtype, shape or value (with NumPy's mismatch report).

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.testing import assert_trees_close
    >>> assert_trees_close({"w": jnp.ones(3)}, {"w": jnp.ones(3) + 1e-7})
  """
  _compare(a, b, exact=False, rtol=rtol, atol=atol)


def assert_trees_equal(a: Any, b: Any):
  """Asserts two pytrees are bitwise equal (NaNs equal), leaf by leaf.

  Use it only where both sides run the same compiled program, or where one is
  a data round trip with no arithmetic (split/merge, conversion, checkpoints).
  Python literals compare as in :func:`assert_trees_close`.

  Raises:
    AssertionError: naming the key path of the first leaf that differs.

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.testing import assert_trees_equal
    >>> assert_trees_equal([jnp.arange(3)], [jnp.arange(3)])
  """
  _compare(a, b, exact=True, rtol=None, atol=None)

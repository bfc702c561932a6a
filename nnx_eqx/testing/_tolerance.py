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


def tolerance(dtype: Any) -> tuple[float, float]:
  """``(rtol, atol)`` of the policy for ``dtype``; ``(0, 0)`` for exact dtypes.

  Args:
    dtype: a NumPy/JAX dtype or anything ``np.dtype`` accepts.

  Returns:
    The tolerances used by :func:`assert_trees_close` for that dtype: integer,
    boolean and key dtypes compare exactly.

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.testing import tolerance
    >>> tolerance(jnp.float32), tolerance(jnp.int32)
    ((1e-05, 1e-06), (0.0, 0.0))
  """
  return TOLERANCES.get(np.dtype(dtype).name, (0.0, 0.0))


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
      r = dr if rtol is None else rtol
      t = dt if atol is None else atol
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
    rtol, atol: override the policy (:data:`TOLERANCES`) for every leaf; pass
      them only for a documented reason (e.g. a long recurrence).

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

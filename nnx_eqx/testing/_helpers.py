"""Test helpers: numeric tree comparison, stripped StableHLO, trace counting."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np


def tree_allclose(a: Any, b: Any, *, rtol: float = 0.0, atol: float = 0.0) -> bool:
  """True if two pytrees have the same structure and allclose leaves (exact by default).

  Leaves are compared with dtype and shape; ``rtol=atol=0`` means bitwise
  equality of values (NaNs compare equal).

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.testing import tree_allclose
    >>> tree_allclose({"a": jnp.ones(2)}, {"a": jnp.ones(2)})
    True
  """
  la, ta = jax.tree_util.tree_flatten(a)
  lb, tb = jax.tree_util.tree_flatten(b)
  if ta != tb:  # type: ignore[operator]
    return False
  for x, y in zip(la, lb):
    if hasattr(x, "dtype") != hasattr(y, "dtype"):
      return False
    if hasattr(x, "dtype"):
      if x.dtype != y.dtype or np.shape(x) != np.shape(y):
        return False
      if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x, y = jax.random.key_data(x), jax.random.key_data(y)
      if not np.allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol, equal_nan=True):
        return False
    elif x != y:
      return False
  return True


_LOC = re.compile(r"\s*loc\([^()]*(\([^()]*\)[^()]*)*\)")
_LOC_DEF = re.compile(r"^#loc.*$", re.MULTILINE)
_MODULE_NAME = re.compile(r"module @\S+")
_SYM = re.compile(r"(jit|pjit)_[\w]+")


def stablehlo_text(lowered: Any) -> str:
  """The StableHLO text of a ``jax.stages.Lowered`` with locations, module and
  function names, and argument/result path names stripped, so programs traced
  from different Python code (and different pytree structures) compare.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.testing import stablehlo_text
    >>> a = stablehlo_text(jax.jit(lambda x: x + 1).lower(jnp.ones(2)))
    >>> b = stablehlo_text(jax.jit(lambda y: y + 1).lower(jnp.ones(2)))
    >>> a == b
    True
  """
  text = lowered.as_text() if hasattr(lowered, "as_text") else str(lowered)
  text = _LOC_DEF.sub("", text)
  text = _LOC.sub("", text)
  text = _MODULE_NAME.sub("module @m", text)
  text = _SYM.sub("fn", text)
  text = re.sub(r"mhlo\.frontend_attributes = \{[^}]*\}", "", text)
  # Argument/result names describe Python pytree paths, not the program.
  text = re.sub(r'jax\.(result|arg)_info = "[^"]*"(, )?', "", text)
  text = re.sub(r"\s*\{\}", "", text)
  return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def hlo_equal(a: Any, b: Any) -> bool:
  """True if two lowered computations have identical stripped StableHLO."""
  return stablehlo_text(a) == stablehlo_text(b)


class TraceCounter:
  """Counts how often a wrapped Python function is traced (i.e. executed).

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.testing import TraceCounter
    >>> counter = TraceCounter()
    >>> f = jax.jit(counter(lambda x: x * 2))
    >>> _ = f(jnp.ones(2)); _ = f(jnp.ones(2)); _ = f(jnp.ones(3))
    >>> counter.count
    2
  """

  def __init__(self):
    self.count = 0

  def __call__(self, fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
      self.count += 1
      return fn(*args, **kwargs)

    return wrapped


@contextlib.contextmanager
def assert_no_retrace(counter: TraceCounter) -> Iterator[None]:
  """Asserts that ``counter`` does not increase inside the block.

  Raises:
    AssertionError: naming how many new traces happened.
  """
  before = counter.count
  yield
  if counter.count != before:
    raise AssertionError(f"expected no retrace, but traced {counter.count - before} more time(s)")

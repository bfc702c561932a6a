"""``DiffState``: per-argument ``wrt`` filters for ``nnx.grad``'s ``argnums``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from ..variables._variables import Param
from ._filters import Filter


class DiffState(NamedTuple):
  """Differentiate positional argument ``argnum`` with respect to ``filter``.

  Pass it (or a tuple of them, mixed with ints) as ``argnums`` of
  ``nnx.grad``/``nnx.value_and_grad``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> g = nnx.grad(lambda m: m(jnp.ones((1, 2))).sum(), argnums=nnx.DiffState(0, nnx.Param))(m)
    >>> sorted(g)
    ['bias', 'kernel']
  """

  argnum: int
  filter: Filter


def resolve_argnums(argnums: Any, wrt: Filter) -> tuple[Any, Filter | dict]:
  """Turns ``argnums`` holding DiffStates into plain ``argnums`` plus ``wrt``:
  the given filter when no DiffState is present, else ``{argnum: filter}``
  (an int argnum keeps ``wrt``).

  Raises:
    ValueError: an argument appears twice in ``argnums``.
  """
  single = isinstance(argnums, DiffState) or not isinstance(argnums, tuple | list)
  items = (argnums,) if single else argnums
  if not any(isinstance(a, DiffState) for a in items):
    return argnums, wrt
  nums = tuple(a.argnum if isinstance(a, DiffState) else a for a in items)
  if len(set(nums)) != len(nums):
    raise ValueError(
      f"argnums {argnums!r} names an argument twice. Fix: give each argument once,"
      " with one DiffState filter."
    )
  filters = {a.argnum if isinstance(a, DiffState) else a: getattr(a, "filter", wrt) for a in items}
  return (nums[0] if single else nums), filters


def accepts_diff_state(transform: Callable) -> Callable:
  """Wraps ``grad``/``value_and_grad`` so ``argnums`` may hold DiffStates."""

  @functools.wraps(transform)
  def wrapper(f=None, *, argnums=0, wrt: Filter = Param, **kwargs):
    argnums, wrt = resolve_argnums(argnums, wrt)
    return transform(f, argnums=argnums, wrt=wrt, **kwargs)

  return wrapper

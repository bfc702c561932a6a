"""Calling a lifted transform: split the arguments, run, write updates back.

Every transform in this package (vmap, scan, remat, cond, loops) calls
:func:`dispatch` with a *pure* function ``pure(key, leaves, dyn)`` built on
``_lift``'s mechanism. Non-node argument leaves are split into dynamic ones
(arrays) and static ones (Python values, kept in the hashable ``key``, as
``eqx.filter_jit`` does). Called outside any JAX trace, ``pure`` runs under
a ``jax.jit`` cached on that key, so a second call with the same graph,
shapes and static values traces nothing; inside a trace (``nnx.jit``,
``nnx.grad``, another transform) it is inlined into the enclosing trace.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ...graph._errors import NnxError
from ...graph.tracing._traces import current_trace
from . import _lift

_DYNAMIC = (jax.Array, np.ndarray, np.generic)
_TOP = current_trace()


def is_eager() -> bool:
  """True outside any JAX trace."""
  return current_trace() == _TOP


class RestSpec(NamedTuple):
  """The static part of non-node arguments: structure and Python values."""

  treedef: Any
  dynamic: tuple  # per leaf: True if it is passed as a (traced) array
  statics: tuple


def split_rest(rest: Any) -> tuple[list, RestSpec]:
  """``(dynamic leaves, spec)``; arrays are dynamic, other leaves static."""
  leaves, treedef = jax.tree_util.tree_flatten(rest)
  dyn, mask, statics = [], [], []
  for x in leaves:
    if isinstance(x, _DYNAMIC):
      dyn.append(x)
      mask.append(True)
    else:
      statics.append(x)
      mask.append(False)
  return dyn, RestSpec(treedef, tuple(mask), tuple(statics))


def rest_leaves(spec: RestSpec, dyn) -> list:
  """All leaves (dynamic and static) in order."""
  d, s = iter(dyn), iter(spec.statics)
  return [next(d) if m else next(s) for m in spec.dynamic]


def join_rest(spec: RestSpec, dyn) -> Any:
  return jax.tree_util.tree_unflatten(spec.treedef, rest_leaves(spec, dyn))


class Dispatcher:
  """Runs ``pure(key, leaves, dyn)`` — under a cached ``jax.jit`` when eager.

  ``out_shardings``, when given, is passed to that ``jax.jit`` (a prefix of
  ``pure``'s output), so that eager results carry exactly those shardings.
  """

  def __init__(self, pure: Callable, out_shardings: Any = None):
    self.pure = pure
    options = {} if out_shardings is None else {"out_shardings": out_shardings}
    self.jitted = jax.jit(pure, static_argnums=(0,), **options)

  def __call__(self, static: Any, leaves: list, rest: Any):
    dyn, spec = split_rest(rest)
    key = (static, spec)
    if is_eager():
      try:
        hash(key)
      except TypeError:
        return self.pure(key, leaves, dyn)
      return self.jitted(key, leaves, dyn)
    return self.pure(key, leaves, dyn)


def _fn_name(fn) -> str:
  return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


@functools.lru_cache(maxsize=512)
def _signature(fn) -> inspect.Signature | None:
  try:
    return inspect.signature(fn)
  except (TypeError, ValueError):
    return None


def positional(fn: Callable, args: tuple, kwargs: dict, transform: str) -> tuple:
  """Binds keyword arguments to positions, so that axes specs apply to them.

  Raises:
    NnxError: (a TypeError) for keyword-only arguments or ``**kwargs``.
  """
  if not kwargs:
    return args
  try:
    sig = _signature(fn)
  except TypeError:  # unhashable callable
    sig = inspect.signature(fn)
  bound = sig.bind(*args, **kwargs) if sig is not None else None
  if bound is None or bound.kwargs:
    names = sorted(kwargs if bound is None else bound.kwargs)
    raise KeywordArgumentError(
      f"{transform}: keyword argument(s) {names} of {_fn_name(fn)} cannot be given an axis."
      " Fix: pass them positionally, or close over them (functools.partial)."
    )
  return tuple(bound.args)


class KeywordArgumentError(NnxError, TypeError):
  """A lifted function got keyword arguments that cannot be made positional."""


class Lifted:
  """Base of the callables returned by the transforms; binds as a method.

  Subclasses set ``self.fn`` and ``self._dispatch`` and may override
  :meth:`_static` (extra hashable data for the cache key).
  """

  fn: Callable
  name = "transform"

  def __get__(self, obj, objtype=None):
    if obj is None:
      return self
    return functools.partial(self, obj)

  def _static(self, split, w) -> Any:
    return (w.graphdef if w is not None else None, split)

  def __call__(self, *args, **kwargs):
    args = positional(self.fn, args, kwargs, self.name)
    split, w, leaves, rest = _lift.prepare(args)
    out, updates = self._dispatch(self._static(split, w), leaves, rest)
    return _lift.apply_updates(w, updates, out)

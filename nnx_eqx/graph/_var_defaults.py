"""``var_defaults``: defaults for the ``hijax``/``ref`` options of new Variables.

flax.nnx 0.12 can back Variables by mutable array references (``hijax``/``ref``).
The ``ref`` default applies to new nnx_eqx Variables (their value is stored in
a ``jax.Ref``); ``hijax`` is recorded (so code that sets it runs) and reported
by ``var_defaults()``, but nnx_eqx Variables are never hijax types.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

_DEFAULTS: dict[str, bool] = {"hijax": False, "ref": False}


class VarDefaults(Mapping):
  """A read-only view of the current defaults (``hijax``, ``ref``)."""

  def __init__(self, values: dict[str, bool]):
    self._values = dict(values)

  def __getitem__(self, key: str) -> bool:
    return self._values[key]

  def __getattr__(self, key: str) -> bool:
    try:
      return self.__dict__["_values"][key]
    except KeyError:
      raise AttributeError(key) from None

  def __iter__(self):
    return iter(self._values)

  def __len__(self) -> int:
    return len(self._values)


class _VarDefaultsSetting:
  def __init__(self, changes: dict[str, bool]):
    self._previous = dict(_DEFAULTS)
    self._changes = changes
    _DEFAULTS.update(changes)

  def __enter__(self):
    return self

  def __exit__(self, *exc) -> None:
    _DEFAULTS.update(self._previous)

  def __call__(self, fn):
    _DEFAULTS.update(self._previous)
    changes = self._changes

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      previous = dict(_DEFAULTS)
      _DEFAULTS.update(changes)
      try:
        return fn(*args, **kwargs)
      finally:
        _DEFAULTS.update(previous)

    return wrapper


def var_defaults(*, hijax: bool | None = None, ref: bool | None = None) -> Any:
  """Reads (no arguments) or sets (now / in a ``with`` block / for a decorated
  function) the ``hijax``/``ref`` defaults of new Variables.

  Raises:
    TypeError: if a value is not a bool.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.var_defaults(hijax=True):
    ...   nnx.var_defaults().hijax
    True
    >>> dict(nnx.var_defaults())
    {'hijax': False, 'ref': False}
  """
  changes = {k: v for k, v in (("hijax", hijax), ("ref", ref)) if v is not None}
  if not changes:
    return VarDefaults(_DEFAULTS)
  for k, v in changes.items():
    if not isinstance(v, bool):
      raise TypeError(f"var_defaults: {k} must be a bool, got {v!r}.")
  return _VarDefaultsSetting(changes)

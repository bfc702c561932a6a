"""Classes made at conversion time that pickle by the call that made them.

``nnx.from_eqx`` and ``nnx.to_eqx`` build one class per converted type (named
after it, cached). ``pickle`` stores classes by module and name, which would
find the original type instead, so each made class gets a metaclass that
pickles it as ``factory(*args)``: loading calls the factory, which returns the
cached class (or makes it again in a fresh process). cloudpickle, which
stores such classes by value, works either way.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable
from typing import Any

_MADE: dict[type, tuple[Callable[..., type], tuple]] = {}
_METAS: dict[type, type] = {}


def _reduce_class(cls: type) -> Any:
  made = _MADE.get(cls)
  if made is None:  # a user subclass of a made class: stored by name as usual
    return cls.__qualname__
  return made


def made_class(
  factory: Callable[..., type], args: tuple, name: str, base: type, ns: dict[str, Any]
) -> type:
  """``type(name, (base,), ns)`` that pickles as ``factory(*args)``."""
  base_meta = type(base)
  meta = _METAS.get(base_meta)
  if meta is None:
    meta = _METAS[base_meta] = type(f"Made{base_meta.__name__}", (base_meta,), {})
    copyreg.pickle(meta, _reduce_class)
  cls = meta(name, (base,), ns)
  _MADE[cls] = (factory, args)
  return cls

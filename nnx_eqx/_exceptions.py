"""Public exceptions name the namespace they are imported from.

An exception class defined in a private module (``nnx_eqx.graph._errors``)
reports that module in tracebacks and reprs; :func:`publish` gives each class the
public namespace that exports it (``nnx_eqx`` first, else the shortest public
module path), so ``nnx_eqx.LostUpdateError`` reads as it is imported and pickles
by that name.
"""

from __future__ import annotations

import sys
from typing import Any


def _private(module: str) -> bool:
  return any(part.startswith("_") for part in module.split("."))


def publish(namespace: dict[str, Any], name: str) -> None:
  """Sets ``__module__`` to ``name`` on the exception classes in ``namespace``
  (a module's globals) that are still named by a private module of the package."""
  for key, obj in list(namespace.items()):
    if (
      isinstance(obj, type)
      and issubclass(obj, BaseException)
      and obj.__name__ == key
      and obj.__module__.startswith("nnx_eqx")
      and _private(obj.__module__)
    ):
      _rename(obj, obj.__module__, name)


def _rename(cls: type, old: str, new: str) -> None:
  """Sets ``__module__`` to ``new`` on ``cls`` and on the functions its body
  defines (methods, and those under properties, static and class methods): a
  method left naming the private module would make documentation tools that
  follow ``__module__`` (griffe) resolve it back and forth between the two."""
  cls.__module__ = new
  for attr in vars(cls).values():
    inner = [attr]
    if isinstance(attr, staticmethod | classmethod):
      inner = [attr.__func__]
    elif isinstance(attr, property):
      inner = [attr.fget, attr.fset, attr.fdel]
    for fn in inner:
      if callable(fn) and getattr(fn, "__module__", None) == old:
        try:
          fn.__module__ = new
        except (AttributeError, TypeError):  # (a builtin or slot wrapper)
          pass


def publish_all() -> None:
  """:func:`publish` over the package's public modules imported so far, the
  top-level namespace first, then by the length of their paths."""
  names = sorted(
    (n for n in list(sys.modules) if n.split(".")[0] == "nnx_eqx" and not _private(n)),
    key=lambda n: (n.count("."), n),
  )
  for n in names:
    publish(vars(sys.modules[n]), n)

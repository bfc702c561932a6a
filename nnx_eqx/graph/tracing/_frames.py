"""Whose code a Python frame runs -- JAX's, Equinox's, a call wrapper's, this
package's or the user's -- and whether it is JAX's shape evaluation, told by
identity: the resolved folders of the packages as imported, and the code objects
of JAX's ``eval_shape`` functions. Nothing here compares names or substrings of
paths, so the answers do not depend on where anything sits: a user's script in a
folder named ``jax``, ``equinox`` or after this package is the user's, and JAX
installed in a virtual environment inside a folder named after this package is
JAX.

A package counts once it is imported (``sys.modules``), so Equinox or a type
checker imported after this package is recognised from then on. Code made at
run time without a file of its own (a wrapper that ``beartype`` generates) runs
in the globals of the module it was made for, and belongs where that module's
file lies.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

import jax

PACKAGE, WRAPPER, LIBRARY = 1, 2, 4
"""The kinds of code :func:`kind` tells apart (0: the user's)."""

_OWN = __name__.partition(".")[0]  # this package, as imported
_KINDS = (
  (_OWN, PACKAGE),
  ("jax", LIBRARY),
  ("jaxlib", LIBRARY),
  ("equinox", LIBRARY),
  ("jaxtyping", WRAPPER),  # call wrappers (runtime type checkers): not where a call is made
  ("beartype", WRAPPER),
  ("typeguard", WRAPPER),
)

_EQUINOX = [name for name, _ in _KINDS].index("equinox")

_SEEN: list = [None]
"""``[the modules of _KINDS as last seen in sys.modules]``: the roots and the
cache below were made from those."""

_ROOTS: list[tuple[str, int]] = []
"""``(resolved folder of a package, ending in a separator, its kind)``."""

_BY_FILE: dict[str, int] = {}
"""``file name of a code object -> kind``, for the roots in ``_ROOTS``."""

_EVALUATORS: dict[int, Any] = {}
"""``id -> code object`` of the functions that evaluate shapes only (``jax.eval_shape``,
``jax.jit(f).eval_shape``, ``eqx.filter_eval_shape``)."""


def _code(fn: Any) -> Any:
  """The code object ``fn`` runs (through ``functools.wraps`` wrappers), or None."""
  try:
    return getattr(inspect.unwrap(fn), "__code__", None)
  except ValueError:  # (a cycle of __wrapped__)
    return None


def _shape_evaluators(modules: tuple) -> set:
  codes = {_code(jax.eval_shape), _code(getattr(type(jax.jit(abs)), "eval_shape", None))}
  eqx = modules[_EQUINOX]
  if eqx is not None:
    codes.add(_code(getattr(eqx, "filter_eval_shape", None)))
  codes.discard(None)
  return codes


def refresh() -> None:
  """Makes the roots again if a package of ``_KINDS`` was imported since."""
  modules = tuple(sys.modules.get(name) for name, _ in _KINDS)
  seen = _SEEN[0]
  if seen is not None and all(a is b for a, b in zip(modules, seen, strict=True)):
    return
  roots = []
  for module, (_, k) in zip(modules, _KINDS, strict=True):
    for folder in getattr(module, "__path__", None) or ():  # (a package's folders)
      roots.append((os.path.join(os.path.realpath(folder), ""), k))
  _ROOTS[:] = roots
  _BY_FILE.clear()
  _EVALUATORS.clear()
  _EVALUATORS.update((id(c), c) for c in _shape_evaluators(modules))
  _SEEN[0] = modules


def _file_kind(file: str) -> int:
  k = _BY_FILE.get(file)
  if k is None:
    path = ""
    if os.path.isabs(file):  # (code without a file names none: "<string>", "<stdin>")
      try:
        path = os.path.realpath(file)
      except (OSError, ValueError):
        pass
    k = next((k for root, k in _ROOTS if path.startswith(root)), 0) if path else 0
    _BY_FILE[file] = k
  return k


def kind(frame: Any) -> int:
  """:data:`PACKAGE`, :data:`WRAPPER`, :data:`LIBRARY` or 0 (the user's): whose
  code ``frame`` runs, by the folder its code's file lies in, else that of the
  module whose globals it runs in. Call :func:`refresh` once before a walk."""
  k = _file_kind(frame.f_code.co_filename)
  if k:
    return k
  home = frame.f_globals.get("__file__")
  return _file_kind(home) if isinstance(home, str) else 0


def under_shape_evaluation(frame: Any) -> bool:
  """Whether ``frame`` or a frame it was called from runs JAX's (or Equinox's)
  shape evaluation, where every value is discarded."""
  refresh()
  codes = _EVALUATORS
  while frame is not None:
    if id(frame.f_code) in codes:
      return True
    frame = frame.f_back
  return False


refresh()

"""States, Variables and Variable types of another NNX library, accepted at the boundary.

flax.nnx has its own ``State``, ``Variable`` and Variable classes. ``nnx.update``,
``nnx.merge`` and the filters take them where they take nnx_eqx's: each entry point
makes one call here, which hands a foreign object to the converter its library
registered and returns nnx_eqx's counterpart (paths, Variable types and metadata
kept), or the object itself.

The graph layer knows no other library: a bridge registers a :class:`ForeignLibrary`
(the flax bridge does so at import, without importing flax), and an object can only
come from a library that is imported, so while ``sys.modules`` lacks the library's
module nothing is converted and nothing is imported.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class ForeignLibrary:
  """How nnx_eqx takes the objects of another NNX library.

  Attributes:
    module: the library's module (``"flax.nnx"``); its objects are only looked at
      while it is in ``sys.modules``.
    value: ``obj -> converted or None``: nnx_eqx's ``State`` for the library's State,
      nnx_eqx's Variable for its Variable, None for anything else.
    variable_type: ``cls -> nnx_eqx class or None``: nnx_eqx's Variable class for one
      of the library's Variable classes, None for any other class.
  """

  module: str
  value: Callable[[Any], Any]
  variable_type: Callable[[type], type | None]


_LIBRARIES: dict[str, ForeignLibrary] = {}


def register_foreign_library(library: ForeignLibrary) -> None:
  """Registers (or replaces) the converter of ``library.module``.

  Example:
    >>> from nnx_eqx.graph.state._foreign_libraries import _LIBRARIES
    >>> "flax.nnx" in _LIBRARIES    # the flax bridge registers itself at import
    True
  """
  _LIBRARIES[library.module] = library


def _loaded() -> list[ForeignLibrary]:
  return [lib for lib in _LIBRARIES.values() if lib.module in sys.modules]


def foreign_states(states: tuple) -> tuple:
  """``states`` with each State or Variable of another library replaced by nnx_eqx's
  (the arguments of ``nnx.update``/``nnx.merge``).

  Raises:
    NnxError: the library's converter refused the object (the bridge's error, e.g.
      ``FlaxConversionError``, naming the path and the fix).
  """
  libraries = _loaded()
  if not libraries:
    return states
  return tuple(_converted(s, libraries) for s in states)


def _converted(obj: Any, libraries: list[ForeignLibrary]) -> Any:
  for lib in libraries:
    out = lib.value(obj)
    if out is not None:
      return out
  return obj


def foreign_filter(filter: Any) -> Any:
  """``filter`` with a Variable class of another library replaced by nnx_eqx's paired
  class (``flax.nnx.Param`` -> ``nnx.Param``); anything else is returned as it is."""
  if not isinstance(filter, type):
    return filter
  for lib in _loaded():
    ours = lib.variable_type(filter)
    if ours is not None:
      return ours
  return filter

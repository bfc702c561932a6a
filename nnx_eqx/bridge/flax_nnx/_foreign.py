"""flax.nnx States, Variables and Variable classes where nnx_eqx takes its own.

The graph layer's ``nnx.update``, ``nnx.merge`` and filters call the converter
registered here (see ``nnx_eqx.graph.state._foreign_libraries``) on their arguments. It is
registered when the bridge is imported and imports nothing: it only runs while
``flax.nnx`` is in ``sys.modules``, and reads flax's classes from there.
"""

from __future__ import annotations

import sys
from typing import Any

from ...graph.state._foreign_libraries import ForeignLibrary, register_foreign_library
from ...graph.state._state import State
from ._from_flax import nnx_leaf
from ._types import nnx_type, to_nnx_variable

MODULE = "flax.nnx"


def _flax() -> Any:
  return sys.modules[MODULE]


def value(obj: Any) -> Any:
  """nnx_eqx's State or Variable for a flax ``State``/``Variable`` (same paths,
  paired Variable types, same metadata, the same arrays); None for anything else.

  Raises:
    FlaxConversionError: the flax State holds a leaf that is neither a Variable nor
      an array (its path is named).
  """
  fnnx = _flax()
  if isinstance(obj, fnnx.Variable):
    return to_nnx_variable(obj)
  if isinstance(obj, fnnx.State):
    return State.from_flat_path([(p, nnx_leaf(p, v)) for p, v in fnnx.to_flat_state(obj)])
  return None


def variable_type(cls: type) -> type | None:
  """nnx_eqx's Variable class paired with a flax.nnx Variable class; None for any
  other class."""
  if issubclass(cls, _flax().Variable):
    return nnx_type(cls)
  return None


def install() -> None:
  """Registers this converter with the graph layer (once; no import of flax)."""
  register_foreign_library(ForeignLibrary(MODULE, value, variable_type))

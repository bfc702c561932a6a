"""Variable types across the bridge: each flax.nnx Variable class has one nnx_eqx
class and back.

Built-in types pair by name (``flax.nnx.Param`` <-> ``nnx.Param``, ``BatchStat``,
``RngKey``, ``OptState``, ...). A user subclass met on one side gets a subclass of
the same name on the other, derived from the pair of its nearest paired base, made
once and remembered in both directions, so a round trip gives the original class back.
"""

from __future__ import annotations

from typing import Any

from ...graph import BatchStat, Cache, Intermediate, Param, Perturbation, Variable
from ...module import RngCount, RngKey, RngState
from ...nn import LoRAParam
from ...training import OptArray, OptState, OptVariable
from ...training.metrics import MetricState
from ._import import flax_nnx

_NATIVE: tuple[type, ...] = (
  Variable,
  Param,
  BatchStat,
  Cache,
  Intermediate,
  Perturbation,
  RngState,
  RngKey,
  RngCount,
  OptState,
  OptArray,
  OptVariable,
  MetricState,
  LoRAParam,
)

_TO_NNX: dict[type, type] = {}  # flax Variable class -> nnx_eqx class
_TO_FLAX: dict[type, type] = {}  # nnx_eqx Variable class -> flax class


def _pair_builtins() -> None:
  if _TO_NNX:
    return
  fnnx = flax_nnx()
  from flax.nnx.training import metrics as flax_metrics  # optional: the `flax` extra

  for ours in _NATIVE:
    theirs = getattr(fnnx, ours.__name__, None) or getattr(flax_metrics, ours.__name__)
    _TO_NNX[theirs] = ours
    _TO_FLAX[ours] = theirs


def _derived(cls: type, table: dict[type, type], other: dict[type, type]) -> type:
  """The class paired with ``cls``, deriving one from its nearest paired base."""
  _pair_builtins()
  found = table.get(cls)
  if found is not None:
    return found
  base = next(table[b] for b in cls.__mro__[1:] if b in table)
  made = type(cls.__name__, (base,), {"__doc__": cls.__doc__, "__module__": __name__})
  made.__qualname__ = cls.__qualname__
  table[cls] = made
  other[made] = cls
  return made


def nnx_type(flax_type: type) -> type:
  """The nnx_eqx Variable class for a flax.nnx Variable class."""
  return _derived(flax_type, _TO_NNX, _TO_FLAX)


def flax_type(nnx_type: type) -> type:
  """The flax.nnx Variable class for an nnx_eqx Variable class."""
  return _derived(nnx_type, _TO_FLAX, _TO_NNX)


def to_nnx_variable(v: Any) -> Variable:
  """A new nnx_eqx Variable with ``v``'s (a flax Variable) value, type and metadata."""
  return nnx_type(type(v))(v.get_value(), **v.get_metadata())


def to_flax_variable(v: Variable) -> Any:
  """A new flax.nnx Variable with ``v``'s value, type and metadata.

  A conversion never moves data: a value with a sharding annotation keeps its
  placement (flax would place it again, and refuses to outside a mesh), and the
  ``eager_sharding`` flag is set back afterwards.
  """
  metadata = v.get_metadata()
  if metadata.get("eager_sharding") and _annotated(metadata):
    out = flax_type(type(v))(v.get_value(), **{**metadata, "eager_sharding": False})
    out.set_metadata(eager_sharding=True)
    return out
  return flax_type(type(v))(v.get_value(), **metadata)


def _annotated(metadata: dict) -> bool:
  return any(metadata.get(k) is not None for k in ("out_sharding", "sharding", "sharding_names"))

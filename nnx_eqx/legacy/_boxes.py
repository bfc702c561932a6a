"""How declared dataclass fields are wrapped: the boxes behind ``nnx.param_field``,
``var_field``, ``node_field`` and ``static_field``, and ``box_fields`` that applies
them to an object after ``__init__``. Shared by ``nnx.dataclass`` (Modules) and
``nnx.legacy.Pytree``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..graph._errors import NnxError
from ..graph.variables._variables import Variable
from ..graph.walk._node_types import is_graph_node
from ._node_containers import Node, Static, is_node_leaf

KEY = "nnx_box"
"""The ``dataclasses.field`` metadata key holding a field's box."""


class DataclassError(NnxError, TypeError):
  """A declarative field or ``nnx.dataclass`` was used with an invalid type or value."""


class _Box:
  """How a declared field is wrapped: ``kind`` is ``"var"``, ``"node"`` or ``"static"``."""

  __slots__ = ("kind", "variable_type", "variable_metadata")

  def __init__(self, kind: str, variable_type: Any = None, variable_metadata: dict | None = None):
    self.kind = kind
    self.variable_type = variable_type
    self.variable_metadata = variable_metadata or {}

  def check(self, where: str) -> None:
    t = self.variable_type
    if self.kind == "var" and not (isinstance(t, type) and issubclass(t, Variable)):
      shown = t.__name__ if isinstance(t, type) else repr(t)
      raise DataclassError(
        f"field {where}: var_field expects a Variable subclass (e.g. nnx.Param,"
        f" nnx.BatchStat), got {shown}. Fix: pass a Variable type, or use"
        " nnx.field(...) for a plain attribute."
      )

  def __call__(self, value: Any, where: str) -> Any:
    if self.kind == "var":
      t = self.variable_type
      if isinstance(value, t):
        return value
      if isinstance(value, Variable):
        raise DataclassError(
          f"field {where} is declared var_field({t.__name__}) but was given a"
          f" {type(value).__name__}. Fix: pass a raw value or a {t.__name__}."
        )
      return t(value, **self.variable_metadata)
    if self.kind == "node":
      return value if isinstance(value, Variable) else Node(value)
    if isinstance(value, Static):
      return value
    if isinstance(value, Variable) or is_graph_node(value):
      raise DataclassError(
        f"field {where} is declared static_field() but was given a"
        f" {type(value).__name__}, which is a graph node. Fix: declare it with"
        " node_field()/var_field(), or pass a raw value."
      )
    return Static(value) if is_node_leaf(value) else value


def _boxes(cls: type) -> tuple:
  """``(name, box)`` for each declared field of a dataclass ``cls`` (cached)."""
  cached = cls.__dict__.get("_nnx_dataclass_boxes")
  if cached is not None:
    return cached
  out: tuple = ()
  if dataclasses.is_dataclass(cls):
    out = tuple((f.name, f.metadata[KEY]) for f in dataclasses.fields(cls) if KEY in f.metadata)
  for name, box in out:
    box.check(f"{cls.__name__}.{name}")
  type.__setattr__(cls, "_nnx_dataclass_boxes", out)
  return out


def box_fields(obj: Any) -> None:
  """Wraps the declared fields of ``obj`` (a no-op for non-dataclasses)."""
  cls = type(obj)
  d = obj.__dict__
  for name, box in _boxes(cls):
    if name in d:
      value = box(d[name], f"{cls.__name__}.{name}")
      if value is not d[name]:
        delattr(obj, name)  # a fresh assignment: the box decides the kind, not the raw value
        setattr(obj, name, value)

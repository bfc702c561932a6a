"""nnx_eqx's side of the bridge (a :class:`~._copy.Side`): how its objects are read
and made, and :class:`FlaxModule`'s place in the copy (its wrapper)."""

from __future__ import annotations

import types
from typing import Any

from ...graph import Variable, is_graph_node
from ...graph import node_impl as _node_impl
from ...graph.tracing._traces import current_trace
from ...module import Dict, List, Sequential, data
from ...module._pytree import _has_data, _unwrap
from . import _copy
from ._types import to_nnx_variable

_META = "__metadata__"  # a private item: the node's metadata, where it has one
_OWN = ("flax_type", "flax_private")


def node_impl(t: type) -> Any:
  """nnx_eqx's ``NodeImpl`` of a graph node type."""
  return _node_impl(t)


_PLAIN = (int, float, complex, str, bytes, type(None), type, types.FunctionType)


def _is_state(v: Any) -> bool:
  if isinstance(v, _PLAIN):  # (the common static values, which hold no data)
    return False
  return isinstance(v, Variable) or is_graph_node(v) or _has_data(v)


class NnxSide(_copy.Side):
  """nnx_eqx's objects, with ``wrapper`` (``FlaxModule``) holding flax Modules."""

  name = "nnx_eqx"

  def __init__(self, wrapper: Any):
    self.wrapper = wrapper

  def kind(self, x: Any) -> int | None:
    if isinstance(x, Variable):
      return _copy.VAR
    t = type(x)
    if t is List:
      return _copy.LIST
    if t is Dict:
      return _copy.DICT
    if t is Sequential:
      return _copy.SEQ
    return _copy.MODULE if is_graph_node(x) else None

  def items(self, obj: Any) -> tuple[list, list]:
    impl = node_impl(type(obj))
    out = [(k, _unwrap(v), _is_state(_unwrap(v))) for k, v in impl.children(obj)]
    meta = impl.metadata(obj)
    return out, ([] if meta is None else [(_META, meta)])

  def make(self, cls: type, private: tuple) -> Any:
    meta = next((v for k, v in private if k == _META), None)
    return node_impl(cls).create(cls, meta, current_trace())

  def fill(self, obj: Any, items: list, private: tuple) -> None:
    node_impl(type(obj)).set_children(obj, [(k, v) for k, v in items if k != _META])

  def variable(self, v: Any) -> Any:
    return to_nnx_variable(v)

  def value(self, v: Any) -> Any:
    return v.get_value()

  def set_value(self, v: Any, value: Any) -> None:
    v.value = value

  def container(self, kind: int) -> Any:
    return List() if kind == _copy.LIST else Dict() if kind == _copy.DICT else Sequential()

  def contents(self, c: Any) -> list:
    if type(c) is Dict:
      return [(k, v, _is_state(v)) for k, v in c.items()]
    return [(i, v, _is_state(v)) for i, v in enumerate(c.layers if type(c) is Sequential else c)]

  def refill(self, c: Any, items: list) -> None:
    if type(c) is Dict:
      c.clear()
      c.update(items)
      return
    target = c.layers if type(c) is Sequential else c
    target.clear()
    target.extend(v for _, v in items)

  def new_wrapper(self, cls: type) -> Any:
    # nnx_eqx's own construction (as ``nnx.merge`` makes a module), attributes set
    # into it directly until ``set_private`` completes it
    w = node_impl(self.wrapper).create(self.wrapper, None, current_trace())
    w.__dict__["flax_type"] = cls
    return w

  def wrapped(self, w: Any) -> tuple[type, tuple, list]:
    d = w.__dict__
    attrs = [(k, v) for k, v in d.items() if k not in _OWN and not k.startswith("_nnx_")]
    return d["flax_type"], d["flax_private"].items, attrs

  def set_wrapped(self, w: Any, name: str, value: Any, is_data: bool) -> None:
    plain = is_data and not (isinstance(value, Variable) or is_graph_node(value))
    d = w.__dict__
    if "flax_private" in d:  # (a wrapper made earlier: nnx_eqx's own checks)
      setattr(w, name, data(value) if plain else value)
      return
    d[name] = value
    if plain:  # (an array or a pytree of them: data, as on the flax side)
      d["_nnx_marks"] = {**d.get("_nnx_marks", {}), name: True}

  def del_wrapped(self, w: Any, name: str) -> None:
    delattr(w, name)

  def set_private(self, w: Any, private: tuple) -> None:
    d = w.__dict__
    old = d.get("flax_private")
    if old is None:
      d["flax_private"] = _copy.Private(private)
    elif old.items != private:
      w.flax_private = _copy.Private(private)

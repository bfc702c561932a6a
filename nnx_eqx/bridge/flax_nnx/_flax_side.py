"""The flax.nnx side: :class:`NnxEqxModule` (the flax Module holding an nnx_eqx one)
and how flax's objects are read and made (:data:`FLAX`, a :class:`~._copy.Side`).

This module imports flax at its top, so only ``nnx.to_flax`` / ``nnx.from_flax``
import it, when called.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
from flax import nnx as fnnx
from flax.nnx import graphlib
from flax.nnx.pytreelib import PytreeState
from flax.nnx.pytreelib import is_data as flax_is_data

from ...graph import split
from ...module import Module
from ...module._views import set_mode_flags, view_keywords
from . import _copy
from ._flax_module import NNX
from ._types import to_flax_variable

_OWN = ("nnx_class", "nnx_private")
_STATE = "_pytree__state"  # flax's per-object record: made anew for each rebuilt Module
_NODES = "_pytree__nodes"  # flax's table {attribute: is data} of a Pytree


def _bookkeeping(name: Any) -> bool:
  return isinstance(name, str) and name.startswith(("_pytree__", "_object__"))


class NnxClass:
  """The nnx_eqx class an :class:`NnxEqxModule` holds, as the static value flax sees:
  no class itself, since flax's ``nnx.view`` visits every static value and would
  call a class's own ``set_view`` unbound."""

  __slots__ = ("cls",)

  def __init__(self, cls: type):
    self.cls = cls

  def __eq__(self, other: object) -> bool:
    return type(other) is NnxClass and other.cls is self.cls

  def __hash__(self) -> int:
    return hash(self.cls)

  def __reduce__(self) -> Any:
    return NnxClass, (self.cls,)

  def __repr__(self) -> str:
    return f"NnxClass({self.cls.__module__}.{self.cls.__qualname__})"


class NnxEqxModule(fnnx.Module):
  """A flax.nnx Module holding one nnx_eqx module: what ``nnx.to_flax`` makes of
  each nnx_eqx Module.

  Its attributes are the module's: each submodule an ``NnxEqxModule`` of its own
  (``nnx.List``/``nnx.Dict``/``nnx.Sequential`` become flax's), each Variable a
  flax Variable of the paired type with the same metadata, arrays and static
  attributes as they are, sharing kept (one object under every name). Calling it,
  or any method of the nnx_eqx class, rebuilds the nnx_eqx modules below it from
  the current values, runs the method, and writes back what it changed, so flax's
  ``jit``, ``grad``, ``Optimizer`` and the rest see ordinary flax Modules.

  Attributes:
    nnx_type: the class of the nnx_eqx module (held as ``nnx_class``, a static
      :class:`NnxClass`).
    nnx_private: what the module keeps besides its attributes, to rebuild it.
  """

  def __init__(self, nnx_type: type):
    self.nnx_class = NnxClass(nnx_type)

  @property
  def nnx_type(self) -> type:
    """The class of the nnx_eqx module."""
    return self.__dict__["nnx_class"].cls

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    """Calls the nnx_eqx module (see the class docstring)."""
    return self.nnx_call("__call__", *args, **kwargs)

  def __getattr__(self, name: str) -> Any:
    held = self.__dict__.get("nnx_class")
    cls = None if held is None else held.cls
    found = getattr(cls, name, None) if cls is not None and not name.startswith("_") else None
    if isinstance(found, property):  # (read on the rebuilt object)
      return self.nnx_call("__getattribute__", name)
    if callable(found):
      return functools.partial(self.nnx_call, name)
    raise AttributeError(
      f"{type(self).__name__} (of {getattr(cls, '__name__', '?')}) has no attribute {name!r}"
    )

  def nnx_call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
    """Runs the nnx_eqx module's ``method`` on the current values and keeps its updates."""
    return _copy.call(self, FLAX, NNX, method, args, kwargs)

  def to_nnx(self) -> Any:
    """The nnx_eqx module with this Module's structure and current values (new objects)."""
    return _copy.unwrap(self, FLAX, NNX, {}, None)

  def set_attributes(
    self, *filters: Any, raise_if_not_found: bool = True, graph: Any = None, **attributes: Any
  ) -> None:
    """nnx_eqx's ``set_attributes`` on the held module (filters are nnx_eqx's)."""
    del graph
    self.nnx_call("set_attributes", *filters, raise_if_not_found=raise_if_not_found, **attributes)

  def train(self, **attributes: Any) -> None:
    """nnx_eqx's ``train`` on the held module."""
    self.nnx_call("train", **attributes)

  def eval(self, **attributes: Any) -> None:
    """nnx_eqx's ``eval`` on the held module."""
    self.nnx_call("eval", **attributes)

  def set_view(self, **kwargs: Any) -> None:
    """This layer's step of flax's ``nnx.view``, as nnx_eqx's ``nnx.view`` takes it:
    the nnx_eqx class's own ``set_view`` run on the rebuilt module with the keywords
    it takes, or, for a class without one (nnx_eqx's layers), the mode flags this
    layer holds set (None keeps a flag)."""
    own = getattr(self.nnx_type, "set_view", None)
    if own is None:
      set_mode_flags(self, kwargs, functools.partial(setattr, self))
    else:
      self.nnx_call("set_view", **view_keywords(own, kwargs)[0])


def _has_state(v: Any) -> bool:
  return any(
    isinstance(x, fnnx.Variable) or graphlib.is_node_module(x) or hasattr(x, "dtype")
    for x in jax.tree.leaves(v, is_leaf=lambda y: graphlib.is_node_module(y))
  )


def _impl(t: type) -> Any:
  """flax's ``GraphNodeImpl`` of a graph node type (every Pytree class registers one)."""
  return graphlib.GRAPH_REGISTRY[t]


def _elements(nodes: Any) -> Any:
  """``(key, value, is_data)`` for the items flax's flatten gives."""
  for k, v in nodes:
    if isinstance(v, graphlib.DataElem):
      yield k, v.value, True
    elif isinstance(v, graphlib.StaticElem):
      yield k, v.value, False
    else:  # (a Module that is not a pytree: data is what holds state)
      yield k, v, _has_state(v)


def _fill_list(c: Any, values: list) -> None:
  """Fills an empty flax ``nnx.List`` (from its ``create_empty``) with ``values``: the
  attributes and table flax's own ``List(values)`` has, without its per-item checks."""
  kinds = {_STATE: True, "_length": False}
  items: list[tuple[str, Any]] = [(_STATE, PytreeState()), ("_length", len(values))]
  for i, v in enumerate(values):
    items.append((str(i), v))
    kinds[str(i)] = flax_is_data(v)
  kinds[_NODES] = False
  items.append((_NODES, fnnx.List._pytree__nodes.update(kinds)))
  _impl(fnnx.List).init(c, items)


def _new_list(values: list) -> Any:
  c = _impl(fnnx.List).create_empty(fnnx.List)
  _fill_list(c, values)
  return c


class FlaxSide(_copy.Side):
  """flax.nnx's objects, with ``wrapper`` (``NnxEqxModule``) holding nnx_eqx ones."""

  name = "flax.nnx"
  wrapper = NnxEqxModule

  def kind(self, x: Any) -> int | None:
    if isinstance(x, fnnx.Variable):
      return _copy.VAR
    t = type(x)
    if t is fnnx.List:
      return _copy.LIST
    if t is fnnx.Dict:
      return _copy.DICT
    if t is fnnx.Sequential:
      return _copy.SEQ
    return _copy.MODULE if t in graphlib.GRAPH_REGISTRY else None

  def items(self, obj: Any) -> tuple[list, list]:
    nodes, aux = _impl(type(obj)).flatten(obj)
    out, private = [], [] if aux is type(obj) else [("__aux__", aux)]
    for k, v, is_data in _elements(nodes):
      if k == _STATE:
        private.append((k, jax.tree.structure(v)))
      elif _bookkeeping(k):
        private.append((k, v))
      else:
        out.append((k, v, is_data))
    return out, private

  def make(self, cls: type, private: tuple) -> Any:
    aux = next((v for k, v in private if k == "__aux__"), cls)
    return _impl(cls).create_empty(aux)

  def fill(self, obj: Any, items: list, private: tuple) -> None:
    items = [(k, v.unflatten([]) if k == _STATE else v) for k, v in items if k != "__aux__"]
    _impl(type(obj)).init(obj, items)

  def variable(self, v: Any) -> Any:
    return to_flax_variable(v)

  def value(self, v: Any) -> Any:
    return v.get_value()

  def set_value(self, v: Any, value: Any) -> None:
    v.set_value(value)

  def container(self, kind: int) -> Any:
    if kind == _copy.LIST:
      return _impl(fnnx.List).create_empty(fnnx.List)  # (filled by ``refill``)
    return fnnx.Dict() if kind == _copy.DICT else fnnx.Sequential()

  def contents(self, c: Any) -> list:
    if type(c) is fnnx.Sequential:
      c = c.layers
    nodes, _ = _impl(type(c)).flatten(c)
    if type(c) is fnnx.List:
      return [e for e in _elements(nodes) if type(e[0]) is int]
    return [e for e in _elements(nodes) if not _bookkeeping(e[0])]

  def refill(self, c: Any, items: list) -> None:
    if type(c) is fnnx.List and _STATE not in vars(c):  # (new: made as flax's merge does)
      _fill_list(c, [v for _, v in items])
      return
    if type(c) is fnnx.Dict:
      for k in list(c):
        del c[k]
      for k, v in items:
        c[k] = v
      return
    if type(c) is fnnx.Sequential:
      c.layers = _new_list([v for _, v in items])
      return
    while len(c):
      c.pop()
    for _, v in items:
      c.append(v)

  def new_wrapper(self, cls: type) -> Any:
    # flax's own construction, without its per-attribute checks (``set_wrapped``
    # records each attribute's kind; ``set_private`` writes flax's table once)
    w = _impl(NnxEqxModule).create_empty(NnxEqxModule)
    object.__setattr__(w, _STATE, PytreeState())
    object.__setattr__(w, "nnx_class", NnxClass(cls))
    object.__setattr__(w, _NODES, {"nnx_class": False, "nnx_private": False})  # (being made)
    return w

  def wrapped(self, w: Any) -> tuple[type, tuple, list]:
    d = vars(w)
    attrs = [(k, v) for k, v in d.items() if k not in _OWN and not _bookkeeping(k)]
    return d["nnx_class"].cls, d["nnx_private"].items, attrs

  def set_wrapped(self, w: Any, name: str, value: Any, is_data: bool) -> None:
    kinds = vars(w)[_NODES]
    if type(kinds) is not dict:  # (a wrapper made earlier: flax's own checks)
      setattr(w, name, fnnx.data(value) if is_data else fnnx.static(value))
      return
    object.__setattr__(w, name, value)
    kinds[name] = is_data

  def del_wrapped(self, w: Any, name: str) -> None:
    delattr(w, name)

  def set_private(self, w: Any, private: tuple) -> None:
    kinds = vars(w)[_NODES]
    if type(kinds) is dict:
      object.__setattr__(w, "nnx_private", _copy.Private(private))
      object.__setattr__(w, _NODES, NnxEqxModule._pytree__nodes.update(kinds))
      return
    old = vars(w).get("nnx_private")
    if old is None or old.items != private:
      w.nnx_private = _copy.Private(private)


FLAX = FlaxSide()
"""flax.nnx's side of the bridge, whose wrapper is :class:`NnxEqxModule`."""


def to_flax_graph(module: Module) -> Any:
  """The flax.nnx objects for an nnx_eqx graph (see ``_copy.wrap``)."""
  return _copy.wrap(module, NNX, FLAX, {})


def from_flax_graph(obj: Any) -> Any:
  """The nnx_eqx objects for a flax.nnx graph (see ``_copy.wrap``)."""
  return _copy.wrap(obj, FLAX, NNX, {})


def rngs_to_flax(rngs: Any) -> Any:
  """A flax ``Rngs`` with the keys and counts of an nnx_eqx ``Rngs``."""
  streams: dict = {}
  for p, v in split(rngs)[1].flat_state():
    streams.setdefault(p[0], {})[p[-1]] = v.get_value()
  out = fnnx.Rngs(**{name: s["key"] for name, s in streams.items()})
  for name, s in streams.items():
    getattr(out, name).count.set_value(s["count"])
  return out

"""The flax.nnx side: :class:`NnxEqxModule`, the flax Module that holds an nnx_eqx one.

This module imports flax at its top, so only ``nnx.to_flax`` / ``nnx.from_flax``
import it, when called.
"""

from __future__ import annotations

import functools
from typing import Any

from flax import nnx as fnnx

from ...graph import State, Variable, iter_modules, merge, split
from ...module import view
from .._errors import FlaxConversionError, fmt_path
from . import _tree
from ._import import describe
from ._types import to_flax_variable

_STATIC = ("nnx_graphdef", "nnx_type")
_FLAGS = ("deterministic", "use_running_average")  # mirrored, as FlaxModule does


def _flax_leaf(path: tuple, leaf: Any) -> Any:
  if isinstance(leaf, Variable):
    return to_flax_variable(leaf)
  if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
    return leaf
  raise FlaxConversionError(
    f"The nnx_eqx state holds a {describe(leaf)} at {fmt_path(path)}, neither a Variable"
    " nor an array, so it has no counterpart in flax's state. Fix: keep it in an"
    " nnx.Variable, or make it a static attribute."
  )


def _reserved(name: str) -> bool:
  return name in _STATIC or hasattr(NnxEqxModule, name)


def _flax_dict(items: dict) -> Any:
  return fnnx.Dict(items)


def _flax_list(items: list) -> Any:
  return fnnx.List(items)


def _set(obj: Any, name: str, value: Any) -> None:
  if isinstance(value, (fnnx.Variable, fnnx.Pytree)):
    setattr(obj, name, value)
  else:  # an array kept as a raw attribute, as flax's `nnx.data`
    setattr(obj, name, fnnx.data(value))


class NnxEqxModule(fnnx.Module):
  """A flax.nnx Module holding an nnx_eqx module: what ``nnx.to_flax`` returns.

  Its flax state is the nnx_eqx module's state at the same paths, in flax Variables
  of the paired types with the same metadata; the nnx_eqx ``GraphDef`` (classes,
  static attributes, sharing) is a static attribute. Calling it, or any method of
  the nnx_eqx class, rebuilds the nnx_eqx module from the current values with
  ``nnx.merge``, runs the method, and writes back what it changed, so flax's
  ``jit``, ``grad``, ``Optimizer`` and the rest see an ordinary flax Module. Where
  the module has the mode flags ``deterministic``/``use_running_average``, this
  Module mirrors them, so flax's ``train()``/``eval()`` of a flax model holding it
  reach the nnx_eqx layers.

  Attributes:
    nnx_graphdef: the nnx_eqx ``GraphDef`` of the held module.
    nnx_type: its class.
  """

  def __init__(
    self,
    nnx_graphdef: Any,
    nnx_type: type,
    children: dict[str, Any],
    flags: tuple[str, ...] = (),
  ):
    for k in flags:  # (before nnx_graphdef: set plainly, not applied to the module)
      setattr(self, k, None)
    self.nnx_graphdef = nnx_graphdef
    self.nnx_type = nnx_type
    for k, v in children.items():
      _set(self, k, v)

  def __setattr__(self, name: str, value: Any) -> None:
    d = vars(self)
    if name in _FLAGS and name in d and "nnx_graphdef" in d:
      # flax's train()/eval()/set_attributes on a flax Module holding this one
      module, before = self._merged()
      module.set_attributes(raise_if_not_found=False, **{name: value})
      self._adopt(module, before)
    super().__setattr__(name, value)

  def _mirror(self, values: dict[str, Any]) -> None:
    for k, v in values.items():
      if k in _FLAGS and k in vars(self):
        super().__setattr__(k, v)

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    """Calls the nnx_eqx module (see the class docstring)."""
    return self.nnx_call("__call__", *args, **kwargs)

  def __getattr__(self, name: str) -> Any:
    cls = self.__dict__.get("nnx_type")
    if cls is not None and not name.startswith("_") and callable(getattr(cls, name, None)):
      return functools.partial(self.nnx_call, name)
    raise AttributeError(
      f"{type(self).__name__} (of {getattr(cls, '__name__', '?')}) has no attribute {name!r}"
    )

  def nnx_call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
    """Runs the nnx_eqx module's ``method`` on the current values and keeps its updates."""
    module, before = self._merged()
    out = getattr(module, method)(*args, **kwargs)
    self._adopt(module, before)
    return out

  def to_nnx(self) -> Any:
    """The nnx_eqx module with this Module's structure and current values (new objects)."""
    return self._merged()[0]

  def set_attributes(
    self, *filters: Any, raise_if_not_found: bool = True, graph: Any = None, **attributes: Any
  ) -> None:
    """nnx_eqx's ``set_attributes`` on the held module (filters are nnx_eqx's)."""
    del graph
    module, before = self._merged()
    module.set_attributes(*filters, raise_if_not_found=raise_if_not_found, **attributes)
    self._adopt(module, before)
    if not filters:
      self._mirror(attributes)

  def train(self, **attributes: Any) -> None:
    """nnx_eqx's ``train`` on the held module."""
    module, before = self._merged()
    module.train(**attributes)
    self._adopt(module, before)
    self._mirror({"deterministic": False, "use_running_average": False, **attributes})

  def eval(self, **attributes: Any) -> None:
    """nnx_eqx's ``eval`` on the held module."""
    module, before = self._merged()
    module.eval(**attributes)
    self._adopt(module, before)
    self._mirror({"deterministic": True, "use_running_average": True, **attributes})

  def set_view(self, **kwargs: Any) -> None:
    """nnx_eqx's ``nnx.view`` on the held module, for flax's ``nnx.view`` of a model
    holding this one (a keyword no module takes is ignored; None keeps a flag)."""
    module, before = self._merged()
    self._adopt(view(module, raise_if_not_found=False, **kwargs), before)
    self._mirror({k: v for k, v in kwargs.items() if v is not None})

  # -- internals --------------------------------------------------------------
  def _merged(self) -> tuple[Any, tuple[list, list]]:
    pairs, leaves = [], []
    for p, leaf in fnnx.to_flat_state(fnnx.state(self)):
      leaves.append(leaf)
      pairs.append((p, leaf.get_value() if isinstance(leaf, fnnx.Variable) else leaf))
    module = merge(self.nnx_graphdef, State.from_flat_path(pairs))
    return module, (pairs, leaves)

  def _adopt(self, module: Any, before: tuple[list, list]) -> None:
    graphdef, new_state = split(module)
    pairs, leaves = before
    old_values = {p: (v, leaf) for (p, v), leaf in zip(pairs, leaves)}
    new_flat = list(new_state.flat_state())
    if graphdef == self.nnx_graphdef:
      for p, new in new_flat:
        value = new.get_value() if isinstance(new, Variable) else new
        old, leaf = old_values[p]
        if value is not old:
          if isinstance(leaf, fnnx.Variable):
            leaf.set_value(value)
          else:
            _tree.set_path(self, p, value)
      return

    def leaf_of(path: tuple, x: Any) -> Any:
      mine = old_values.get(path, (None, None))[1]
      if isinstance(x, Variable):
        new_var = to_flax_variable(x)
        if type(mine) is type(new_var):
          mine.set_value(x.get_value())
          return mine
        return new_var
      return _flax_leaf(path, x)

    kids = _tree.children(_tree.nest(new_flat), _reserved, leaf_of, _flax_dict, _flax_list)
    for k in {p[0] for p in old_values if p[0] not in kids}:
      if k in vars(self):
        delattr(self, k)
    self.nnx_graphdef = graphdef
    for k, v in kids.items():
      _set(self, k, v)


def wrap(module: Any) -> NnxEqxModule:
  """The :class:`NnxEqxModule` holding ``module`` (its Variables are copied into
  flax Variables; the arrays are shared)."""
  graphdef, st = split(module)
  kids = _tree.children(_tree.nest(st.flat_state()), _reserved, _flax_leaf, _flax_dict, _flax_list)
  modules = [m for _, m in iter_modules(module)]
  flags = tuple(k for k in _FLAGS if any(k in vars(m) for m in modules))
  return NnxEqxModule(graphdef, type(module), kids, flags)


def rngs_to_flax(rngs: Any) -> Any:
  """A flax ``Rngs`` with the keys and counts of an nnx_eqx ``Rngs``."""
  streams: dict = {}
  for p, v in split(rngs)[1].flat_state():
    streams.setdefault(p[0], {})[p[-1]] = v.get_value()
  out = fnnx.Rngs(**{name: s["key"] for name, s in streams.items()})
  for name, s in streams.items():
    getattr(out, name).count.set_value(s["count"])
  return out

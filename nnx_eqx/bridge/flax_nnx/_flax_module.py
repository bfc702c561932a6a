"""FlaxModule: the nnx_eqx Module holding a live flax.nnx Module (``nnx.from_flax``)."""

from __future__ import annotations

import functools
from typing import Any

from ...graph import Variable, state
from ...module import Dict, List, Module
from .._errors import FlaxConversionError, fmt_path
from . import _tree
from ._import import describe, flax_nnx
from ._types import to_nnx_variable

_STATIC = ("flax_static", "flax_type")
FLAGS = ("deterministic", "use_running_average")
"""The mode flags of flax's ``train()``/``eval()``: a FlaxModule whose flax Module has
them somewhere mirrors them as its own attributes, so ``train()``/``eval()`` (and
``set_attributes``) of an nnx_eqx module holding it reach the flax layers."""


class FlaxGraphDef:
  """A flax ``GraphDef`` as a static attribute: hashed once (flax hashes its nodes on
  every call, which nnx_eqx's jit cache lookup would pay on every step)."""

  __slots__ = ("graphdef", "_hash")

  def __init__(self, graphdef: Any):
    self.graphdef = graphdef
    self._hash = hash(graphdef)

  def __hash__(self) -> int:
    return self._hash

  def __eq__(self, other: object) -> bool:
    return self is other or (
      type(other) is FlaxGraphDef and self._hash == other._hash and self.graphdef == other.graphdef
    )

  def __getstate__(self) -> Any:
    return self.graphdef

  def __setstate__(self, graphdef: Any) -> None:
    self.graphdef = graphdef
    self._hash = hash(graphdef)

  def __repr__(self) -> str:
    return (
      f"FlaxGraphDef({type(self.graphdef).__module__}.GraphDef, hash={self._hash & 0xFFFF:04x})"
    )


def _values(flat: Any) -> tuple[list, list]:
  """``(pairs, leaves)``: ``(path, raw value)`` pairs and the objects that held them."""
  pairs, leaves = [], []
  for p, leaf in flat:
    leaves.append(leaf)
    pairs.append((p, leaf.get_value() if isinstance(leaf, Variable) else leaf))
  return pairs, leaves


def _is_array(x: Any) -> bool:
  return hasattr(x, "shape") and hasattr(x, "dtype")


def nnx_leaf(path: tuple, leaf: Any) -> Any:
  fnnx = flax_nnx()
  if isinstance(leaf, fnnx.Variable):
    return to_nnx_variable(leaf)
  if _is_array(leaf):
    return leaf
  raise FlaxConversionError(
    f"The flax state holds a {describe(leaf)} at {fmt_path(path)}, neither a Variable"
    " nor an array, so it has no counterpart in nnx_eqx's state. Fix: keep it in a"
    " flax.nnx.Variable, or make it a static attribute."
  )


def reserved(name: str) -> bool:
  return name in _STATIC or hasattr(FlaxModule, name)


class FlaxModule(Module):
  """An nnx_eqx Module holding a flax.nnx Module: what :func:`from_flax` returns.

  Its state is the flax Module's state, at flax's paths, as nnx_eqx Variables of the
  paired types (``flax.nnx.Param`` -> ``nnx.Param``, ...) with the same metadata; the
  flax ``GraphDef`` (the class, static attributes and sharing) is a static attribute.
  Calling it, or any method of the flax class (``m.encode(x)``), rebuilds the flax
  Module from the current values with ``flax.nnx.merge``, runs flax's own method (so
  flax's transforms used inside it, e.g. ``nnx.scan`` over layers, keep working), and
  writes back the Variables the method changed (batch statistics, RNG counts). Under
  nnx_eqx's transforms the values are JAX tracers, so the same program is traced.

  Attribute access reaches the state: ``m.l1`` is an ``nnx.Dict`` of the Variables
  under ``l1`` (integer keys give an ``nnx.List``). Methods run on the whole held
  Module; to call a submodule alone, convert it on its own. ``m.train()``,
  ``m.eval()`` and ``m.set_attributes(...)`` run flax's own versions (flax's flags
  are static attributes, so the held ``GraphDef`` changes), as do methods that add
  Variables (``sow``). Where the flax Module has flax's mode flags
  (``deterministic``, ``use_running_average``), the FlaxModule has them too, so
  ``train()``/``eval()`` of an nnx_eqx model holding it reach the flax layers.

  Attributes:
    flax_graphdef: the flax ``GraphDef`` of the held Module (read-only; kept in
      ``flax_static``, a ``FlaxGraphDef`` hashed once).
    flax_type: its class.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> m = nnx.from_flax(flax_nnx.BatchNorm(3, rngs=flax_nnx.Rngs(0)))
    >>> m.flax_type.__name__, type(m.mean).__name__
    ('BatchNorm', 'BatchStat')
    >>> _ = m(jnp.arange(6.0).reshape(2, 3))        # flax's BatchNorm, statistics kept
    >>> moved = m.mean[...]
    >>> bool((moved != 0).all())
    True
    >>> m.eval()                                      # flax's eval: running averages
    >>> _ = m(jnp.ones((2, 3)))
    >>> bool((m.mean[...] == moved).all())
    True
  """

  def __init__(
    self,
    flax_graphdef: Any,
    flax_type: type,
    children: dict[str, Any],
    flags: tuple[str, ...] = (),
  ):
    for k in flags:  # (before flax_static: set plainly, not applied to the flax Module)
      setattr(self, k, None)
    self.flax_static = FlaxGraphDef(flax_graphdef)
    self.flax_type = flax_type
    for k, v in children.items():
      setattr(self, k, v)

  def __setattr__(self, name: str, value: Any) -> None:
    d = self.__dict__
    if name in FLAGS and name in d and "flax_static" in d:
      # nnx_eqx's train()/eval()/set_attributes on a module holding this one
      obj, before = self._merged()
      obj.set_attributes(raise_if_not_found=False, **{name: value})
      self._adopt(obj, before)
    super().__setattr__(name, value)

  def _mirror(self, values: dict[str, Any]) -> None:
    for k, v in values.items():
      if k in FLAGS and k in self.__dict__:
        super().__setattr__(k, v)

  @property
  def flax_graphdef(self) -> Any:
    """The flax ``GraphDef`` of the held Module."""
    return self.flax_static.graphdef

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    """Calls the flax Module's ``__call__`` (see the class docstring)."""
    return self.flax_call("__call__", *args, **kwargs)

  def __getattr__(self, name: str) -> Any:
    cls = self.__dict__.get("flax_type")
    if cls is not None and not name.startswith("_") and callable(getattr(cls, name, None)):
      return functools.partial(self.flax_call, name)
    raise AttributeError(
      f"{type(self).__name__} (of {getattr(cls, '__name__', '?')}) has no attribute {name!r}"
    )

  def flax_call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
    """Runs the flax Module's ``method`` on the current values and keeps its updates.

    Args:
      method: the method's name (``"__call__"`` for a call).
      *args, **kwargs: its arguments.

    Returns:
      What the flax method returns.
    """
    obj, before = self._merged()
    out = getattr(obj, method)(*args, **kwargs)
    self._adopt(obj, before)
    return out

  def to_flax_module(self) -> Any:
    """A flax.nnx Module with this module's structure and current values (new objects)."""
    return self._merged()[0]

  def set_attributes(
    self,
    *filters: Any,
    raise_if_not_found: bool = True,
    graph: bool | None = None,
    **attributes: Any,
  ) -> None:
    """flax.nnx's ``set_attributes`` on the held Module (filters are flax's)."""
    del graph
    obj, before = self._merged()
    obj.set_attributes(*filters, raise_if_not_found=raise_if_not_found, **attributes)
    self._adopt(obj, before)
    if not filters:
      self._mirror(attributes)

  def train(self, **attributes: Any) -> None:
    """flax.nnx's ``train`` on the held Module (``deterministic=False``, ...)."""
    obj, before = self._merged()
    obj.train(**attributes)
    self._adopt(obj, before)
    self._mirror({"deterministic": False, "use_running_average": False, **attributes})

  def eval(self, **attributes: Any) -> None:
    """flax.nnx's ``eval`` on the held Module (``deterministic=True``, ...)."""
    obj, before = self._merged()
    obj.eval(**attributes)
    self._adopt(obj, before)
    self._mirror({"deterministic": True, "use_running_average": True, **attributes})

  def set_view(self, **kwargs: Any) -> None:
    """flax.nnx's ``view`` on the held Module, for ``nnx.view`` of a model holding
    this one: each flax layer's own ``set_view`` takes the keywords it knows
    (``deterministic``, ``use_running_average``, ...; None keeps a flag), and a
    keyword no flax layer takes is ignored."""
    obj, before = self._merged()
    self._adopt(flax_nnx().view(obj, raise_if_not_found=False, **kwargs), before)
    self._mirror({k: v for k, v in kwargs.items() if v is not None})

  # -- internals --------------------------------------------------------------
  def _merged(self) -> tuple[Any, tuple[list, list]]:
    fnnx = flax_nnx()
    pairs, leaves = _values(state(self).flat_state())
    obj = fnnx.merge(self.flax_graphdef, fnnx.from_flat_state(pairs))
    return obj, (pairs, leaves)

  def _adopt(self, obj: Any, before: tuple[list, list]) -> None:
    """Writes ``obj``'s changed values back (or its new structure, if it changed)."""
    fnnx = flax_nnx()
    graphdef, new_state = fnnx.split(obj)
    pairs, leaves = before
    if graphdef == self.flax_graphdef:
      held = {p: (old, leaf) for (p, old), leaf in zip(pairs, leaves)}
      for p, new in fnnx.to_flat_state(new_state):
        new = new.get_value() if isinstance(new, fnnx.Variable) else new
        old, leaf = held[p]
        if new is not old:
          if isinstance(leaf, Variable):
            leaf.value = new
          else:
            _tree.set_path(self, p, new)
      return
    # The structure changed (flags set, values sown): rebuild the state tree, keeping
    # the Variables whose path and type are unchanged.
    old = {p: leaf for (p, _), leaf in zip(pairs, leaves)}

    def leaf_of(path: tuple, x: Any) -> Any:
      mine = old.get(path)
      if isinstance(x, fnnx.Variable):
        new_var = to_nnx_variable(x)
        if type(mine) is type(new_var):
          mine.value = x.get_value()
          return mine
        return new_var
      return nnx_leaf(path, x)

    kids = _tree.children(_tree.nest(fnnx.to_flat_state(new_state)), reserved, leaf_of, Dict, List)
    for k in [p[0] for p in old if p[0] not in kids]:
      if k in self.__dict__:
        delattr(self, k)
    self.flax_static = FlaxGraphDef(graphdef)
    for k, v in kids.items():
      setattr(self, k, v)

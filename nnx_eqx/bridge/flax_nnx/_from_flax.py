"""``nnx.from_flax`` and :class:`FlaxModule`, the nnx_eqx Module that holds a flax.nnx one."""

from __future__ import annotations

import functools
from typing import Any

from ...graph import State, Variable, state
from ...module import Dict, List, Module, Rngs
from .._errors import FlaxConversionError, fmt_path
from . import _tree
from ._import import describe, flax_nnx, flax_side, is_flax_object, is_linen
from ._types import to_nnx_variable

_STATIC = ("flax_static", "flax_type")
_FLAGS = ("deterministic", "use_running_average")
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


def _nnx_leaf(path: tuple, leaf: Any) -> Any:
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


def _reserved(name: str) -> bool:
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
    if name in _FLAGS and name in d and "flax_static" in d:
      # nnx_eqx's train()/eval()/set_attributes on a module holding this one
      obj, before = self._merged()
      obj.set_attributes(raise_if_not_found=False, **{name: value})
      self._adopt(obj, before)
    super().__setattr__(name, value)

  def _mirror(self, values: dict[str, Any]) -> None:
    for k, v in values.items():
      if k in _FLAGS and k in self.__dict__:
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
      return _nnx_leaf(path, x)

    kids = _tree.children(_tree.nest(fnnx.to_flat_state(new_state)), _reserved, leaf_of, Dict, List)
    for k in [p[0] for p in old if p[0] not in kids]:
      if k in self.__dict__:
        delattr(self, k)
    self.flax_static = FlaxGraphDef(graphdef)
    for k, v in kids.items():
      setattr(self, k, v)


def _from_module(obj: Any) -> FlaxModule:
  fnnx = flax_nnx()
  graphdef, st = fnnx.split(obj)
  kids = _tree.children(_tree.nest(fnnx.to_flat_state(st)), _reserved, _nnx_leaf, Dict, List)
  return FlaxModule(graphdef, type(obj), kids, _flags_of(fnnx, obj, graphdef))


def _flags_of(fnnx: Any, obj: Any, graphdef: Any) -> tuple[str, ...]:
  """The mode flags some Module of ``obj`` has (see ``_FLAGS``)."""
  attributes = getattr(graphdef, "attributes", None)  # flax 0.12: [(name, attr), ...]
  if isinstance(attributes, list):
    names = {a[0] for a in attributes if isinstance(a, tuple) and a}
  else:  # another layout of flax's GraphDef: look at the Modules themselves
    names = {k for _, m in fnnx.iter_modules(obj) for k in vars(m)}
  return tuple(k for k in _FLAGS if k in names)


def _from_rngs(obj: Any) -> Rngs:
  fnnx = flax_nnx()
  streams: dict = {}
  for p, v in fnnx.to_flat_state(fnnx.state(obj)):
    streams.setdefault(p[0], {})[p[-1]] = v.get_value()
  rngs = Rngs(**{name: s["key"] for name, s in streams.items()})
  for name, s in streams.items():
    getattr(rngs, name).count.value = s["count"]
  return rngs


def _variables(x: Any) -> list:
  fnnx = flax_nnx()
  if not fnnx.graph.is_graph_node(x):
    return []
  return [v for _, v in fnnx.to_flat_state(fnnx.state(x))]


def _element(x: Any) -> Any:
  fnnx = flax_nnx()
  return from_flax(x) if fnnx.graph.is_graph_node(x) or isinstance(x, fnnx.Variable) else x


def from_flax(obj: Any) -> Any:
  """Converts a live flax.nnx object into the nnx_eqx object that runs its program.

  * A flax ``Module`` (any class: nested Modules, ``nnx.List``/``nnx.Dict``, shared
    references, ``BatchNorm``, ``Dropout``, ``Rngs`` inside) becomes a
    :class:`FlaxModule`: nnx_eqx's state of it is the flax state, path for path, in
    Variables of the paired types with the same metadata, and calling it runs flax's
    own code on those values. This wrapping, rather than a rebuild from nnx_eqx
    layers, is the design because it keeps two things a rebuild cannot: a method
    that uses flax's transforms itself (``flax.nnx.scan`` over stacked layers in
    ``__call__``) gets flax objects as it expects, and every result is bitwise
    flax's, since the same flax code traces the same program. Sharing lives in the
    flax ``GraphDef``: a tied weight is one Variable (at flax's first path), used
    wherever flax uses it, so its gradient sums every use. State updates (batch
    statistics, RNG counts) are written back as in flax, also under ``nnx.jit``,
    ``nnx.grad`` and the other nnx_eqx transforms.
  * A flax ``Rngs`` becomes an ``nnx.Rngs`` with the same keys and counts (it draws
    the same keys).
  * A root flax ``nnx.List`` becomes an ``nnx.List`` of its elements, each converted
    (they must share no Variable; a Module holding the list has no such limit).
  * A flax ``State`` becomes an ``nnx.State`` with the same paths; a flax
    ``Variable`` an nnx_eqx Variable. Types pair by name (``flax.nnx.Param`` ->
    ``nnx.Param``, ``BatchStat``, ``Cache``, ``RngKey``, ...); a user subclass gets
    an nnx_eqx subclass of the same name, and :func:`to_flax` gives the flax class back.
  * A Module made by :func:`to_flax` gives back the nnx_eqx module it holds.

  The result holds new Variables over the flax object's arrays (of any shape and
  dtype; nothing is copied): training it leaves the flax object as it was, and
  :func:`to_flax` of it gives the trained flax Module.

  Args:
    obj: a flax.nnx ``Module`` (or other flax graph node, e.g. an ``Optimizer``),
      ``Rngs``, ``State`` or ``Variable``.

  Returns:
    A :class:`FlaxModule`, an ``nnx.Rngs``, an ``nnx.State``, an nnx_eqx Variable, or
    (for a :func:`to_flax` Module) the nnx_eqx module it holds.

  Raises:
    FlaxConversionError: ``obj`` is a flax Linen module (use flax's own
      ``flax.nnx.bridge``), an object of another library, a flax object whose state
      cannot be held, or a root list whose elements share a Variable (the path and
      the reason are named).
    FlaxNotInstalledError: flax is not installed (an ``ImportError`` naming
      ``pip install 'nnx_eqx[flax]'``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> f = flax_nnx.Linear(3, 2, rngs=flax_nnx.Rngs(0))
    >>> m = nnx.from_flax(f)
    >>> type(m).__name__, sorted(nnx.state(m, nnx.Param))
    ('FlaxModule', ['bias', 'kernel'])
    >>> bool((m(jnp.ones(3)) == f(jnp.ones(3))).all())
    True
  """
  if is_linen(obj):
    raise FlaxConversionError(
      f"nnx.from_flax converts flax.nnx objects; got the Linen module {describe(obj)}."
      " Fix: make it a flax.nnx Module with flax's own Linen bridge first"
      " (`flax.nnx.bridge.ToNNX(linen_module, rngs=...)` then"
      " `flax.nnx.bridge.lazy_init(...)`), and convert that."
    )
  if not is_flax_object(obj):
    if isinstance(obj, (Module, State, Variable)):
      raise FlaxConversionError(
        f"nnx.from_flax expects a flax.nnx object, got the nnx_eqx {describe(obj)}, which"
        " needs no conversion. Fix: use it as it is (nnx.to_flax makes a flax.nnx Module)."
      )
    raise FlaxConversionError(
      f"nnx.from_flax expects a flax.nnx Module, Rngs, State or Variable, got"
      f" {describe(obj)}. Fix: pass the flax.nnx model (for Equinox models, nnx.from_eqx)."
    )
  fnnx = flax_nnx()
  if isinstance(obj, flax_side().NnxEqxModule):
    return obj.to_nnx()
  if isinstance(obj, fnnx.Variable):
    return to_nnx_variable(obj)
  if isinstance(obj, fnnx.State):
    return State.from_flat_path([(p, _nnx_leaf(p, v)) for p, v in fnnx.to_flat_state(obj)])
  if isinstance(obj, fnnx.Rngs):
    return _from_rngs(obj)
  if type(obj) is fnnx.List:  # integer keys cannot be a FlaxModule's attributes
    return List(_tree.each(list(obj), _element, _variables))
  if fnnx.graph.is_graph_node(obj):
    return _from_module(obj)
  raise FlaxConversionError(
    f"nnx.from_flax cannot convert {describe(obj)} at root: it is neither a flax.nnx"
    " Module (graph node), Rngs, State nor Variable. Fix: pass the Module that holds it."
  )

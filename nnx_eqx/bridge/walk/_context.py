"""Conversion contexts: the recursion, paths, sharing and state bookkeeping.

A converter registered with ``nnx.bridge.register`` receives one of these:

* :class:`FromEqxContext` (Equinox -> NNX, here): ``ctx.child(*keys)`` converts a
  child of the current Equinox module, ``ctx.variable(*keys, type=, fn=)`` makes
  the Variable for an array field (or a StateIndex's value),
  ``ctx.state_variables`` the Variables for a tuple-valued StateIndex.
* ``ToEqxContext`` (NNX -> Equinox, in ``_to_eqx``): ``ctx.child(*keys)``
  converts an attribute of the current NNX module, ``ctx.leaf(*keys, fn=)``
  gives the array for a Param (or raw array), ``ctx.state_index(*keys)`` the
  ``StateIndex`` for non-Param Variables.

``fn`` is the layout change applied to the value (e.g. a transpose). Going
through the context is what lets sharing survive: a Variable reached twice
gives the same array object (so it can be tied with ``eqx.nn.Shared``), and
nodes tied by an ``eqx.nn.Shared`` give the same Variable.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ...graph.api._functional import NodeImpl, is_graph_node, node_impl
from ...graph.variables._variables import Param, Variable
from .._errors import UnconvertibleFieldError
from . import _deep_from_eqx as _deep_eqx
from . import _registry
from ._eqx_state import EqxState, Link, fmt_path, is_index, state_value
from ._iter import container_items, fold, rebuild_container

_ARRAYS = (jax.Array, np.ndarray, np.generic)


def is_array(x: Any) -> bool:
  return isinstance(x, _ARRAYS)


def to_key(k: Any) -> Any:
  """``"name"`` -> ``GetAttrKey``, ``3`` -> ``SequenceKey``; key objects pass through."""
  if isinstance(k, str):
    return jtu.GetAttrKey(k)
  if isinstance(k, int):
    return jtu.SequenceKey(k)
  return k


def navigate(tree: Any, path: tuple) -> Any:
  """The node of ``tree`` at a key path of ``GetAttrKey``/``SequenceKey``/``DictKey``."""
  for k in path:
    k = to_key(k)
    if isinstance(k, jtu.GetAttrKey):
      tree = getattr(tree, k.name)
    elif isinstance(k, jtu.SequenceKey):
      tree = tree[k.idx]
    elif isinstance(k, jtu.DictKey):
      tree = tree[k.key]
    elif isinstance(k, jtu.FlattenedIndexKey):
      tree = _children(tree)[k.key]
    else:
      raise TypeError(f"unsupported key {k!r}")
  return tree


def _children(node: Any) -> list:
  def below(x: Any) -> bool:
    return x is not node

  return jtu.tree_flatten(node, is_leaf=below)[0]


def _default_type(value: Any) -> type:
  dtype = getattr(value, "dtype", None)
  if dtype is not None and jnp.issubdtype(dtype, jnp.inexact):
    return Param
  return Variable


def _dict_ok(d: dict) -> bool:
  return all(isinstance(k, str) for k in d)


# --------------------------------------------------------------------------
# Equinox -> NNX
# --------------------------------------------------------------------------
class FromEqxContext:
  """Converts Equinox pytrees to NNX objects (see module doc).

  Args:
    state: the ``eqx.nn.State`` holding the values of the model's StateIndexes.
    native: convert to NNX's native layers where they exist (``eqx.nn.Linear`` ->
      ``nnx.Linear`` with ``kernel = weight.T``) instead of keeping Equinox's
      layout and program (see ``nnx.from_eqx``).
    rngs: the ``nnx.Rngs`` (or ``nnx.RngStream``) given to ``nnx.from_eqx``, or
      None: a converter of a layer that takes keys at call time forks its stream
      from it (``rngs["dropout"].fork()``), as ``nnx.Dropout`` does.

  Attributes:
    obj: the Equinox module being converted by the current converter.
    path: its key path from the root (``jax.tree_util`` keys).
    links: one ``Link`` per StateIndex read, to write changed state back.

  Example:
    >>> import equinox as eqx, jax, nnx_eqx as nnx
    >>> ctx = nnx.bridge.FromEqxContext()
    >>> type(ctx.convert(eqx.nn.Linear(2, 3, key=jax.random.key(0)), ())).__name__
    'Linear'
  """

  def __init__(self, state: Any = None, native: bool = False, rngs: Any = None):
    self.state = state
    self.native = native
    self.rngs = rngs
    self.native_ids: set[int] = set()  # Equinox modules to convert natively anyway
    self.obj: Any = None
    self.path: tuple = ()
    self.links: list[Link] = []
    self._ties: dict[tuple, Any] = {}  # absolute path -> tie group
    self._memo: dict[tuple, Any] = {}  # (group, fn) -> Variable / module
    self._fns: dict[Any, set] = {}  # group -> layout functions used on it
    self._keep: set = set()  # groups whose converters must keep Equinox's layout
    self._link_ids: set[int] = set()
    self._done: dict[int, Any] = {}  # id -> NNX object, made bottom-up by `_deep_eqx`

  # -- API for converters ---------------------------------------------------
  def child(self, *keys: Any) -> Any:
    """Converts the child of the current module at ``keys`` (e.g. ``"layers", 0``)."""
    kp = tuple(map(to_key, keys))
    return self.convert(navigate(self.obj, kp), self.path + kp)

  def variable(self, *keys: Any, type: type | None = None, fn: Any = None, **metadata) -> Any:
    """The Variable for the array (or ``StateIndex``) at ``keys`` of the current
    module, its value passed through ``fn``; None if the field holds None.

    ``type`` defaults to ``Param`` for inexact arrays, ``Variable`` for other
    arrays and :class:`nnx.bridge.EqxState` for a ``StateIndex``.
    """
    kp = tuple(map(to_key, keys))
    value = navigate(self.obj, kp)
    if value is None:
      return None
    return self.make_variable(value, self.path + kp, type, fn, metadata)

  def state_variables(self, *keys: Any, type: type = EqxState) -> tuple:
    """Variables (one per element) for a ``StateIndex`` whose value is a tuple."""
    kp = tuple(map(to_key, keys))
    path = self.path + kp
    index = navigate(self.obj, kp)
    if not is_index(index):
      raise UnconvertibleFieldError(
        f"nnx.from_eqx: expected an eqx.nn.StateIndex at {fmt_path(path)}, got"
        f" {index.__class__.__name__}. Fix: check the converter registered for"
        f" {self.obj.__class__.__name__}."
      )
    value = state_value(index, self.state, path)
    group = self._tie(path)
    out = []
    for i, x in enumerate(value):
      key = (group, ("item", i))
      var = self._memo.get(key) if group is not None else None
      if var is None:
        var = type(x)
        if group is not None:
          self._memo[key] = var
      out.append(var)
    self._link(Link(index, tuple(out), True))
    return tuple(out)

  def keep_layout(self, *keys: Any) -> bool:
    """True if the converter must keep Equinox's layout for the array at ``keys``.

    That is always the case unless the user asked for NNX's native layouts
    (``nnx.from_eqx(..., native=True)``): another layout is another program.
    Even then, an array tied by ``eqx.nn.Shared`` to a place that uses it in
    Equinox's layout keeps it.
    """
    if not (self.native or id(self.obj) in self.native_ids):
      return True
    group = self._tie(self.path + tuple(map(to_key, keys)))
    return group is not None and group in self._keep

  # -- recursion --------------------------------------------------------------
  def make_variable(self, value, path, vtype=None, fn=None, metadata=None) -> Variable:
    if is_index(value):
      raw = state_value(value, self.state, path)
      vtype = vtype or EqxState
    elif is_array(value) or vtype is not None:
      raw = value
      vtype = vtype or _default_type(value)
    else:
      raise UnconvertibleFieldError(
        f"nnx.from_eqx: expected an array at {fmt_path(path)}, got"
        f" {type(value).__name__}. Fix: check the converter registered for"
        f" {type(self.obj).__name__}."
      )
    group = self._tie(path)
    key = (group, fn)
    if group is not None:
      self._fns.setdefault(group, set()).add(fn)
      var = self._memo.get(key)
      if var is not None:
        return var
    var = vtype(raw if fn is None else fn(raw), **(metadata or {}))
    if group is not None:
      self._memo[key] = var
    if is_index(value):
      self._link(Link(value, (var,), False))
    return var

  def tied_node(self, path: tuple, make) -> Any:
    """``make()``, or the object already made for a position tied to ``path``."""
    group = self._tie(path)
    if group is None:
      return make()
    out = self._memo.get((group, "node"))
    if out is None:
      out = self._memo[(group, "node")] = make()
    return out

  def _tie(self, path: tuple) -> Any:
    """The tie group of ``path``, or None (no hashing of long paths when nothing is tied)."""
    return self._ties.get(path) if self._ties else None

  def _link(self, link: Link) -> None:
    if id(link.state_index) not in self._link_ids:
      self._link_ids.add(id(link.state_index))
      self.links.append(link)

  def convert(self, value: Any, path: tuple) -> Any:
    """Converts any Equinox value found at ``path`` (NNX objects are kept as they are)."""
    if isinstance(value, Variable) or is_graph_node(value):
      return value
    if isinstance(value, eqx.Module):
      if is_index(value):
        return self.make_variable(value, path)
      done = self._done.pop(id(value), None)
      if done is not None:  # converted bottom-up by the walk below an ancestor
        return done
      return _deep_eqx.convert_below(self, value, path)
    if is_array(value):
      return self.make_variable(value, path)
    if value is None:
      return None
    if container_items(value) is None:
      if _has_arrays(value):
        raise UnconvertibleFieldError(
          f"nnx.from_eqx: {fmt_path(path)} holds a {type(value).__name__} containing"
          " arrays; the bridge converts arrays, eqx.Modules and tuples/lists/dicts of"
          f" them. Fix: make {type(value).__name__} an eqx.Module, or register a converter"
          f" with `nnx.bridge.register({type(value).__name__}, YourNnxModule,"
          " to_nnx=..., to_eqx=...)`."
        )
      return value  # static: functions, numbers, strings, ...

    def expand(x: Any) -> list | None:
      items = container_items(x)
      if items is not None and type(x) is dict and not _dict_ok(x) and _has_arrays(x):
        raise UnconvertibleFieldError(
          f"nnx.from_eqx: the dict at {fmt_path(path + tuple(_keys_to(x, value)))} has"
          f" non-string keys ({[k for k in x if not isinstance(k, str)][:3]}) and holds"
          " arrays; NNX keeps dicts of nodes as attributes, which need string keys."
          " Fix: use string keys, or a tuple/list."
        )
      return items

    def leaf(x: Any, at: Any) -> Any:
      if x is None or type(x) in (str, int, float, bool):
        return x
      return self.convert(x, at())

    return fold(value, expand, leaf, rebuild_container, path)

  def convert_module(self, value: eqx.Module, path: tuple) -> Any:
    """Converts the ``eqx.Module`` ``value`` (not a StateIndex) found at ``path``."""
    group = self._tie(path)
    if group is not None and (group, "node") in self._memo:
      return self._memo[(group, "node")]
    out = self._module(value, path)
    if group is not None:
      self._memo[(group, "node")] = out
    return out

  def _module(self, value: eqx.Module, path: tuple) -> Any:
    conv = _registry.lookup_to_nnx(type(value))
    if conv is not None:
      out = self.run(conv.to_nnx, value, path)
      if out is not NotImplemented:
        return out
    return self.run(_registry.GENERIC["to_nnx"], value, path)

  def run(self, fn, value, path):
    """Calls ``fn(value, self)`` with ``value``/``path`` as the current module."""
    saved = self.obj, self.path
    self.obj, self.path = value, path
    try:
      return fn(value, self)
    finally:
      self.obj, self.path = saved


def _keys_to(target: Any, root: Any) -> tuple:
  """The keys from ``root`` down to the container ``target`` (for a message)."""
  todo: list = [((), root)]
  while todo:
    keys, x = todo.pop()
    if x is target:
      return keys
    todo.extend((keys + (k,), c) for k, c in container_items(x) or ())
  return ()


def _has_arrays(x: Any) -> bool:
  return any(is_array(leaf) for leaf in jtu.tree_leaves(x))


def build_eqx(cls: type, **fields: Any) -> Any:
  """An instance of the ``eqx.Module`` class ``cls`` with exactly these field
  values, without running its ``__init__`` (as Equinox's own unflatten does)."""
  obj: Any = object.__new__(cls)
  for name, value in fields.items():
    object.__setattr__(obj, name, value)
  return obj


def impl_of(t: type) -> NodeImpl:
  """The graph API's ``NodeImpl`` of a graph node type (which must be one)."""
  impl = node_impl(t)
  if impl is None:
    raise UnconvertibleFieldError(
      f"{t.__name__} is not a graph node type (nnx.Module or registered)."
    )
  return impl

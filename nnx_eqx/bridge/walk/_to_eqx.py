"""``ToEqxContext``: NNX -> Equinox conversion (see ``_context`` for the protocol)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...graph.api._functional import is_graph_node
from ...graph.variables._variables import Param, Variable
from ...graph.walk import _node_types
from ...module._containers import Dict, List
from .._errors import SharedConversionError, UnconvertibleFieldError
from . import _deep_to_eqx as _deep
from . import _registry
from ._context import is_array
from ._eqx_state import fmt_path
from ._iter import container_items, fold, rebuild_container


class ToEqxContext:
  """Converts NNX objects to Equinox pytrees (see module doc).

  Args:
    native: convert to Equinox's native layers where they exist (``nnx.Linear``
      -> ``eqx.nn.Linear`` with ``weight = kernel.T``) instead of keeping the
      NNX layout and program (see ``nnx.to_eqx``).
    view: build the Equinox view that a generically converted module's methods
      run on (a converted Dropout keeps drawing from its NNX stream there),
      rather than a model handed to the user.

  Attributes:
    native, view: as given.
    obj: the NNX module being converted by the current converter.
    path: its attribute path from the root.
    links: temporary StateIndex marker -> ``(variables, packed)``.
    tracked: ids of Equinox objects made from Variables or graph nodes (the
      candidates for ``eqx.nn.Shared`` ties).

  Example:
    >>> import nnx_eqx as nnx
    >>> ctx = nnx.bridge.ToEqxContext()
    >>> ctx.convert(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), ()).kernel.shape
    (2, 3)
  """

  def __init__(self, native: bool = False, view: bool = False):
    self.native = native
    self.view = view
    self.native_made: set[int] = set()  # ids of the native Equinox layers made
    self.tree: Any = None  # the converted tree, before its StateIndexes are filled
    self.obj: Any = None
    self.path: tuple = ()
    self.links: dict[Any, tuple] = {}
    self.tracked: set[int] = set()
    self.state_paths: list[tuple] = []
    self._stack: dict[int, tuple] = {}
    self._nodes: dict[int, Any] = {}
    self._arrays: dict[tuple, Any] = {}
    self._indices: dict[tuple, Any] = {}
    self._owner: dict[int, Any] = {}
    self._var_uses: dict[int, set] = {}
    self._var_paths: dict[int, list] = {}
    self._alive: list = []

  # -- API for converters ---------------------------------------------------
  def child(self, *keys: Any) -> Any:
    """Converts the attribute of the current module at ``keys``."""
    value = _get(self.obj, keys)
    return self.convert(value, self.path + tuple(keys))

  def leaf(self, *keys: Any, fn: Any = None) -> Any:
    """The array for the Param (or raw array) at ``keys``, passed through ``fn``;
    None if the attribute holds None."""
    value = _get(self.obj, keys)
    if value is None:
      return None
    return self.array(value, self.path + tuple(keys), fn)

  def state_index(self, *key_paths: Any) -> eqx.nn.StateIndex:
    """A ``StateIndex`` holding the Variable at ``key_paths[0]`` (one attribute
    name or a tuple of keys), or a tuple of the Variables when several are given."""
    kps = [kp if isinstance(kp, tuple) else (kp,) for kp in key_paths]
    variables = tuple(_get(self.obj, kp) for kp in kps)
    return self.index_for(variables, [self.path + kp for kp in kps], len(kps) > 1)

  # -- recursion --------------------------------------------------------------
  def array(self, value: Any, path: tuple, fn: Any = None) -> Any:
    if isinstance(value, Variable):
      self._use(value, ("array", fn), path)
      key = (id(value), fn)
      out = self._arrays.get(key)
      if out is None:
        raw = value.value
        out = raw if fn is None else fn(raw)
        out = self._emit(out, key)
        self._arrays[key] = out
      return out
    out = value if fn is None else fn(value)
    return self._emit(out, ("raw", path, fn))

  def index_for(self, variables: tuple, paths: list, packed: bool) -> eqx.nn.StateIndex:
    key = tuple(map(id, variables))
    for v, p in zip(variables, paths):
      if not isinstance(v, Variable):
        raise UnconvertibleFieldError(
          f"nnx.to_eqx: expected a Variable at {fmt_path(p)}, got {type(v).__name__}."
          " Fix: check the converter registered for this module type."
        )
      self._use(v, ("state", key), p)
    index = self._indices.get(key)
    if index is None:
      init = tuple(v.value for v in variables) if packed else variables[0].value
      index = eqx.nn.StateIndex(init)
      self._indices[key] = index
      self.links[index.marker] = (variables, packed)
      self.tracked.add(id(index))
      self.state_paths.append(paths[0])
    return index

  def _use(self, var: Variable, how: Any, path: tuple) -> None:
    self._var_uses.setdefault(id(var), set()).add(how)
    self._var_paths.setdefault(id(var), []).append(path)
    self._alive.append(var)

  def _emit(self, obj: Any, owner: Any) -> Any:
    if not is_array(obj):
      return obj
    prev = self._owner.get(id(obj))
    if prev is not None and prev != owner:
      obj = jnp.array(obj, copy=True) if isinstance(obj, jax.Array) else np.copy(obj)
    self._owner[id(obj)] = owner
    self._alive.append(obj)
    if owner[0] != "raw":
      self.tracked.add(id(obj))
    return obj

  def convert(self, value: Any, path: tuple, state_types: tuple | None = None) -> Any:
    """Converts any NNX value found at ``path``.

    Variables become arrays, except those of ``state_types`` (default: every
    non-Param type), which become ``StateIndex`` objects.
    """
    if isinstance(value, Variable):
      if state_types is None:
        is_state = not isinstance(value, Param)
      else:
        is_state = isinstance(value, state_types)
      if not is_state:
        return self.array(value, path)
      return self.index_for((value,), [path], False)
    if is_graph_node(value):
      return self._node(value, path, state_types)
    if isinstance(value, _node_types.LEAF_TYPES):
      return self.array(value, path)
    if _items(value) is None:
      return value

    def leaf(x: Any, at: Any) -> Any:
      if isinstance(x, (Variable, *_node_types.LEAF_TYPES)) or is_graph_node(x):
        return self.convert(x, at(), state_types)
      return x

    return fold(value, _items, leaf, rebuild_container, path)

  def _node(self, value: Any, path: tuple, state_types: tuple | None) -> Any:
    nid = id(value)
    if nid in self._stack:
      raise _deep.cycle_error(path, self._stack[nid])
    out = self._nodes.get(nid)
    if out is not None:  # converted bottom-up by the walk below an ancestor
      return out
    _deep.convert_below(self, value, path, state_types)
    return self._nodes[nid]

  def convert_node(self, value: Any, path: Any, state_types: tuple | None) -> Any:
    """Converts the graph node ``value`` (not converted yet) at ``path``."""
    nid = id(value)
    self._stack[nid] = path
    try:
      out = self._module(value, path, state_types)
    finally:
      del self._stack[nid]
    self._nodes[nid] = out
    self.tracked.add(id(out))
    self._alive.append(value)
    return out

  def _module(self, value: Any, path: tuple, state_types: tuple | None = None) -> Any:
    t = type(value)
    if t is List:  # plain containers of nodes: an Equinox list / dict
      return [self.convert(v, path + (i,), state_types) for i, v in enumerate(value)]
    if t is Dict:
      return {k: self.convert(value[k], path + (k,), state_types) for k in value}
    conv = _registry.lookup_to_eqx(t)
    if conv is not None:
      out = self.run(conv.to_eqx, value, path)
      if out is not NotImplemented:
        return out
    return self.run(_registry.GENERIC["to_eqx"], value, path)

  def run(self, fn, value, path):
    """Calls ``fn(value, self)`` with ``value``/``path`` as the current module."""
    saved = self.obj, self.path
    self.obj, self.path = value, path
    try:
      return fn(value, self)
    finally:
      self.obj, self.path = saved

  def check_layouts(self) -> None:
    """Raises if a shared Variable was converted in two different ways."""
    for vid, hows in self._var_uses.items():
      if len(hows) > 1:
        paths = ", ".join(fmt_path(p) for p in self._var_paths[vid][:4])
        raise SharedConversionError(
          f"nnx.to_eqx: the Variable shared by {paths} is used in different layouts"
          " or state groupings by the layers holding it, so no eqx.nn.Shared can tie"
          " its copies (Shared only selects nodes, it cannot transform them). Fix:"
          " share it only between layers that store it the same way, or convert"
          " those layers with a custom converter."
        )


def _items(x: Any) -> list | None:
  """The ``(key, child)`` pairs of a tuple/list/namedtuple/dict, None for anything else."""
  return container_items(x, jax_keys=False)


def _get(obj: Any, keys: tuple) -> Any:
  for k in keys:
    obj = getattr(obj, k) if isinstance(k, str) else obj[k]
  return obj

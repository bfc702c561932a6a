"""Boolean mode flags of some module classes as leaves of the pytree view.

Equinox keeps a layer's ``inference: bool`` as a pytree leaf, and
``eqx.nn.inference_mode`` flips it with ``eqx.tree_at``, which can only replace
leaves. A class registered with :func:`register_flag` (the Equinox bridge
registers its converted layers) names the attribute that holds its flag; a
module's pytree view then ends with one extra leaf per flagged module in its
graph:

* the root's own flag, read as ``root.inference``;
* for every other flagged module, a :class:`FlagLeaf` (a pytree node whose one
  child is ``.inference``), so Equinox finds it as it finds a nested layer.

Rebuilding from concrete bools sets the flags; any other leaf (a tracer under
``jax.jit``, ``None`` from ``eqx.partition``, a placeholder of ``eqx.tree_at``)
leaves the flags as the GraphDef has them and is only remembered, so that
``module.inference`` returns the very object that was put in. Hence plain
``jax.jit`` over a module still branches on its static flags, and
``nnx.split``/``nnx.jit`` (which never see these leaves) keep them static.
Graphs without registered flags flatten exactly as before.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from . import _version

FLAG_ATTRS: dict[type, str] = {}
_OVERRIDE = "_nnx_flag_leaf"
_CACHE_KEY = object()
_NEUTRAL_KEY = object()


class FlagLeaf:
  """The ``inference`` flag of a module nested in a flattened graph.

  Attributes:
    inference: the flag (a bool, or whatever leaf a pytree map put there).

  Example:
    >>> import jax
    >>> from nnx_eqx.graph._pytree_flags import FlagLeaf
    >>> jax.tree.leaves(FlagLeaf(True))
    [True]
  """

  __slots__ = ("inference",)

  def __init__(self, inference: Any):
    self.inference = inference

  def __repr__(self) -> str:
    return f"FlagLeaf(inference={self.inference!r})"


jax.tree_util.register_pytree_with_keys(
  FlagLeaf,
  lambda f: (((jax.tree_util.GetAttrKey("inference"), f.inference),), None),
  lambda _, children: FlagLeaf(*children),
  lambda f: ((f.inference,), None),
)


def _read(node: Any) -> Any:
  d = node.__dict__
  return d[_OVERRIDE] if _OVERRIDE in d else d[FLAG_ATTRS[type(node)]]


def _flag_property(attr: str) -> property:
  def fget(self):
    d = self.__dict__
    return d[_OVERRIDE] if _OVERRIDE in d else d[attr]

  def fset(self, value):
    self.__dict__.pop(_OVERRIDE, None)
    if attr == "inference":
      if self.__dict__.get("_nnx_in_graph"):
        _version.bump()  # a static attribute of a walked graph changes
      self.__dict__["inference"] = value
    else:
      setattr(self, attr, value)

  return property(fget, fset, doc=f"Equinox's ``inference`` flag (this module's ``{attr}``).")


def register_flag(cls: type, attr: str) -> None:
  """Exposes the bool attribute ``attr`` of ``cls`` as ``cls.inference`` and as a
  leaf of the pytree view of any graph that contains an instance.

  Args:
    cls: a graph node class (e.g. a Module subclass).
    attr: the attribute holding the flag (``"inference"``, ``"deterministic"``...).

  Raises:
    TypeError: if ``cls`` already defines a different ``inference`` attribute.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> from nnx_eqx.graph._pytree_flags import register_flag
    >>> class Drop(nnx.Module):
    ...   def __init__(self): self.deterministic = False
    >>> register_flag(Drop, "deterministic")
    >>> jax.tree.leaves(Drop()), Drop().inference
    ([False], False)
  """
  existing = cls.__dict__.get("inference")
  if existing is not None and not isinstance(existing, property):
    raise TypeError(
      f"register_flag: {cls.__qualname__} defines `inference` itself; it cannot also"
      f" expose {attr!r} under that name. Fix: rename the class attribute."
    )
  FLAG_ATTRS[cls] = attr
  type.__setattr__(cls, "inference", _flag_property(attr))


def flag_indices(w: Any) -> tuple:
  """Node indices of the flagged modules of walk ``w`` (cached on the walk)."""
  cache = w._filter_cache
  idx = cache.get(_CACHE_KEY)
  if idx is None:
    idx = cache[_CACHE_KEY] = tuple(
      i
      for i, n in enumerate(w.nodes)
      if type(n) in FLAG_ATTRS and isinstance(n.__dict__.get(FLAG_ATTRS[type(n)]), bool)
    )
  return idx


def neutral_graphdef(w: Any, walk_uncached: Any, canonical: Any) -> Any:
  """The canonical GraphDef of ``w``'s graph with every flag at False (cached on the walk).

  Pytree structures compare by it, so a tree mapped to other flag values (a
  mask of ``eqx.partition``, the result of ``eqx.nn.inference_mode``) has the
  same structure, as in Equinox, where the flag is only a leaf.
  """
  cache = w._filter_cache
  gd = cache.get(_NEUTRAL_KEY)
  if gd is None:
    idx = flag_indices(w)
    if not any(w.nodes[i].__dict__[FLAG_ATTRS[type(w.nodes[i])]] for i in idx):
      gd = w.graphdef
    else:
      dicts = [(w.nodes[i].__dict__, FLAG_ATTRS[type(w.nodes[i])]) for i in idx]
      saved = [d[a] for d, a in dicts]
      try:
        for d, a in dicts:
          d[a] = False
        gd = walk_uncached(w.nodes[0]).graphdef
      finally:
        for (d, a), v in zip(dicts, saved):
          d[a] = v
    gd = cache[_NEUTRAL_KEY] = canonical(gd)[0]
  return gd


def flag_children(w: Any, idx: tuple, with_keys: bool, key: Any) -> list:
  """The extra pytree children for the flags at node indices ``idx``."""
  out: list = []
  for i in idx:
    node = w.nodes[i]
    value = _read(node) if i == 0 else FlagLeaf(_read(node))
    if with_keys:
      path = ("inference",) if i == 0 else w.node_paths[i]
      out.append((key(path), value))
    else:
      out.append(value)
  return out


def _concrete(v: Any) -> bool | None:
  if isinstance(v, (bool, np.bool_)):
    return bool(v)
  if isinstance(v, (np.ndarray, jax.Array)) and not isinstance(v, jax.core.Tracer):
    if v.shape == () and v.dtype == np.bool_:
      return bool(v)
  return None


def apply_flags(nodes: list, idx: tuple, children: Any) -> bool:
  """Sets (concrete bools) or remembers (anything else) the flags of rebuilt
  ``nodes``; returns whether a flag attribute changed."""
  changed = False
  for i, child in zip(idx, children):
    node = nodes[i]
    v = child.inference if isinstance(child, FlagLeaf) else child
    b = _concrete(v)
    if b is None:
      node.__dict__[_OVERRIDE] = v
    else:
      d, attr = node.__dict__, FLAG_ATTRS[type(node)]
      changed = changed or d[attr] is not b
      d[attr] = b
  return changed

"""Raw ``jax.Ref`` values and other JAX pytrees met by the graph walk (as flax.nnx 0.12).

A raw ``jax.Ref`` (``jax.new_ref(x)``) is a state leaf known by identity, like a
Variable: the walk gives it a node index, a second encounter is a reference to
the first, and merge puts the one Ref back at every place. A ``jax.Ref`` held by
a ref-mode Variable stays part of that Variable's leaf.

A registered JAX pytree of any other type (a ``flax.struct`` or
``jax.tree_util.register_dataclass`` dataclass, an ``OrderedDict``, an Equinox
module, ...) is a container: its children, from JAX's one-level flatten with
key paths, are walked in key order, so the Variables and arrays it holds are
part of the State, and it is rebuilt from them with its treedef. As with lists,
it is not known by identity, and one whose children are all static is static
as a whole. Its definition is a ``MAP`` whose type is a :class:`PytreeKind`.

Graph nodes, Variables, registered leaf types, ``None`` and the plain
containers are handled by the walk before it asks this module.
"""

from __future__ import annotations

from typing import Any

import jax

from ..variables._refs import Ref

_Ref = Ref
_JAX_REF = jax.Ref
_Tracer = jax.core.Tracer
NOT_PYTREE: dict[type, bool] = {}
"""Types known not to be JAX pytree nodes nor ``jax.Ref`` (JAX registers a type before its
instances exist); the walk keeps their instances static without asking further."""


def is_ref(x: Any) -> bool:
  """Whether ``x`` is a ``jax.Ref`` (also a Ref being traced)."""
  return type(x) is _JAX_REF or (isinstance(x, _Tracer) and isinstance(x, _Ref))


def _key(k: Any) -> Any:
  return getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))


def jax_to_nnx_path(jax_path: tuple, /) -> tuple:
  """A JAX key path (``DictKey``, ``SequenceKey``, ``GetAttrKey``, ...) as an nnx
  path of plain keys (flax.nnx's ``graphlib.jax_to_nnx_path``).

  Raises:
    Nothing: entries of other types are kept as they are.

  Example:
    >>> import collections, jax, nnx_eqx as nnx
    >>> P = collections.namedtuple("P", ["x"])
    >>> (path, _), = jax.tree_util.tree_flatten_with_path({"a": [P(1.0)]})[0]
    >>> nnx.graphlib.jax_to_nnx_path(path)
    ('a', 0, 'x')
  """
  return tuple(map(_key, jax_path))


def _is_leaf(treedef: Any) -> bool:
  """Whether a one-level treedef is a leaf (``None`` and empty nodes have no leaves)."""
  return treedef.num_nodes == 1 and treedef.num_leaves == 1


def _is_leaf_of(value: Any, treedef: Any) -> bool:
  """Whether ``treedef`` (``value``'s one-level treedef) is a leaf; if so, ``value``'s
  type is remembered in :data:`NOT_PYTREE` (a tracer's type says nothing of its value)."""
  if not _is_leaf(treedef):
    return False
  if not isinstance(value, (_Tracer, _Ref)):
    NOT_PYTREE[type(value)] = True
  return True


def _flatten_one(value: Any) -> tuple[list, Any]:
  """``value``'s children as ``(key, child)`` pairs in JAX's order, and its treedef
  (no pairs when ``value`` is a leaf for JAX)."""
  pairs, treedef = jax.tree_util.tree_flatten_with_path(value, is_leaf=lambda x: x is not value)
  if _is_leaf(treedef):
    return [], treedef
  return [(_key(p[0]), child) for p, child in pairs], treedef


class PytreeKind:
  """The type slot of a ``MAP`` definition for a registered JAX pytree: its
  one-level treedef and its children's keys in JAX's order; calling it with
  ``(key, child)`` pairs rebuilds the pytree.

  Attributes:
    cls: the pytree's class.
    treedef: its one-level ``PyTreeDef`` (holding the pytree's static data).
    order: its children's keys in JAX's flatten order.
  """

  __slots__ = ("cls", "treedef", "order", "_hash")

  def __init__(self, cls: type, treedef: Any, order: tuple):
    self.cls, self.treedef, self.order = cls, treedef, order
    try:
      self._hash = hash((treedef, order))
    except TypeError:  # unhashable static data: equal only to itself
      self._hash = id(self)

  @property
  def __name__(self) -> str:
    return self.cls.__name__

  def __eq__(self, other: object) -> bool:
    if self is other:
      return True
    if type(other) is not PytreeKind or self._hash != other._hash or self.order != other.order:
      return False
    try:
      return bool(self.treedef == other.treedef)
    except Exception:  # static data that does not compare (e.g. arrays): unequal
      return False

  def __hash__(self) -> int:
    return self._hash

  def __repr__(self) -> str:
    return f"PytreeKind({self.cls.__name__})"

  def __call__(self, items: Any) -> Any:
    children = dict(items)
    return self.treedef.unflatten([children[k] for k in self.order])


def pytree_children(value: Any) -> tuple[PytreeKind, list] | None:
  """``(kind, (key, child) pairs sorted by key)`` if ``value`` is a registered JAX
  pytree with children that have distinct keys, else None (it is static)."""
  t = type(value)
  if t in NOT_PYTREE:
    return None
  pairs, treedef = _flatten_one(value)
  if _is_leaf_of(value, treedef):  # not a pytree type
    return None
  order = tuple(k for k, _ in pairs)
  if not pairs or len(set(order)) != len(order):
    return None
  try:
    items = sorted(pairs, key=lambda kv: kv[0])
  except TypeError:  # keys of mixed types
    items = sorted(pairs, key=lambda kv: (type(kv[0]).__name__, repr(kv[0])))
  return PytreeKind(t, treedef, order), items


def is_generic_pytree(x: Any) -> bool:
  """Whether ``x`` (not a Variable, graph node or registered leaf) is a JAX pytree
  node other than ``None``."""
  if x is None or type(x) in NOT_PYTREE:
    return False
  return not _is_leaf_of(x, jax.tree_util.tree_structure(x, is_leaf=lambda y: y is not x))


class PytreeItemSlot:
  """A raw array stored under ``key`` of a JAX pytree held at ``parent`` (a slot);
  writing rebuilds the pytree with the new child and stores it at ``parent``."""

  __slots__ = ("parent", "key")

  def __init__(self, parent: Any, key: Any):
    self.parent, self.key = parent, key

  @property
  def _value(self) -> Any:
    for k, child in _flatten_one(self.parent._value)[0]:
      if k == self.key:
        return child
    raise KeyError(self.key)

  @_value.setter
  def _value(self, v: Any) -> None:
    pairs, treedef = _flatten_one(self.parent._value)
    self.parent._value = treedef.unflatten([v if k == self.key else c for k, c in pairs])

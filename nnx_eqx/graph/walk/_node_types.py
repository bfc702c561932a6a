"""Graph node and leaf type registries, and the tags of GraphDef definition tuples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from .. import _version
from ..variables._variables import Variable
from ._pytree_nodes import is_generic_pytree

# Tags of the definition tuples that make up a GraphDef.
NODE, VAR, REF, LEAF, STATIC, SEQ, MAP = range(7)
_LEAF_DEF = (LEAF,)
LEAF_TYPES: tuple[type, ...] = (jax.Array, np.ndarray, jax.ShapeDtypeStruct)


def register_leaf_type(cls: type) -> None:
  """Makes instances of ``cls`` graph leaves (like raw arrays) when stored on a
  module: they go into the State instead of the GraphDef.

  Example:
    >>> import nnx_eqx as nnx
    >>> class Box:
    ...   def __init__(self, x): self.x = x
    >>> nnx.graph.register_leaf_type(Box)
    >>> m = nnx.Module(); m.b = Box(1)
    >>> list(nnx.state(m))
    ['b']
  """
  global LEAF_TYPES
  if cls not in LEAF_TYPES:
    LEAF_TYPES = (*LEAF_TYPES, cls)


# --------------------------------------------------------------------------
# Node types
# --------------------------------------------------------------------------
class NodeImpl(NamedTuple):
  """How the engine reads and rebuilds one kind of graph node.

  Attributes:
    children: ``obj -> list[(key, value)]`` in a deterministic order.
    create: ``(cls, metadata, trace) -> obj``, an empty node to be filled.
    set_children: ``(obj, list[(key, value)]) -> None``, fills the node.
    metadata: ``obj -> hashable``, static data kept in the GraphDef.
    set_key: ``(obj, key, value) -> None``, replaces one child in place.
    clear: ``obj -> None``, removes every child (for in-place structural updates).
  """

  children: Callable[[Any], list]
  create: Callable[[type, Any, Any], Any]
  set_children: Callable[[Any, list], None]
  metadata: Callable[[Any], Any]
  set_key: Callable[[Any, Any, Any], None]
  clear: Callable[[Any], None]


_NODE_IMPLS: dict[type, NodeImpl | None] = {}
_REGISTERED: dict[type, NodeImpl] = {}
_BY_TYPE_CACHES: list[dict] = [_NODE_IMPLS]


def type_cache() -> dict:
  """A new dict for facts derived from types through the node registry; it is
  emptied whenever a graph node type is registered."""
  cache: dict = {}
  _BY_TYPE_CACHES.append(cache)
  return cache


def register_graph_node_type(cls: type, impl: NodeImpl) -> None:
  """Registers ``cls`` (and its subclasses) as a graph node type.

  Args:
    cls: the node class.
    impl: a :class:`NodeImpl` describing how to read and rebuild it.
  """
  _REGISTERED[cls] = impl
  for cache in _BY_TYPE_CACHES:
    cache.clear()
  _version.bump()  # which objects are nodes may have changed: cached walks are stale


def node_impl(t: type) -> NodeImpl | None:
  """The NodeImpl for type ``t`` (looked up along its MRO), or None."""
  try:
    return _NODE_IMPLS[t]
  except KeyError:
    impl = None
    for base in t.__mro__:
      impl = _REGISTERED.get(base)
      if impl is not None:
        break
    _NODE_IMPLS[t] = impl
    return impl


def is_graph_node(x: Any) -> bool:
  """True for Modules and registered graph node types."""
  return node_impl(type(x)) is not None


def is_node(x: Any) -> bool:
  """True for graph nodes and Variables (the identity-tracked objects).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.is_node(nnx.Param(jnp.ones(1))), nnx.is_node(jnp.ones(1))
    (True, False)
  """
  return isinstance(x, Variable) or node_impl(type(x)) is not None


def is_node_leaf(x: Any) -> bool:
  """True for values the graph walk stores as state leaves: arrays (``jax.Array``,
  ``np.ndarray``, ``jax.ShapeDtypeStruct``) and types added with
  :func:`register_leaf_type` (flax.nnx's ``graphlib.is_node_leaf``).

  Raises:
    Nothing.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.graphlib.is_node_leaf(jnp.ones(2)), nnx.graphlib.is_node_leaf(1.0)
    (True, False)
  """
  return isinstance(x, LEAF_TYPES)


def is_pytree_node(x: Any) -> bool:
  """True for the containers the graph walk traverses without tracking their
  identity: ``list``, ``tuple``, ``dict`` and any other JAX pytree node
  (namedtuples, ``jax.tree_util.register_dataclass`` classes, ``None``, ...), but
  not graph nodes, Variables or registered leaf types (flax.nnx's
  ``graphlib.is_pytree_node``).

  Raises:
    Nothing.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.graphlib.is_pytree_node([1]), nnx.graphlib.is_pytree_node(nnx.Param(jnp.ones(1)))
    (True, False)
  """
  if type(x) in (list, tuple, dict) or (isinstance(x, tuple) and hasattr(x, "_fields")):
    return True
  if is_node(x) or isinstance(x, LEAF_TYPES):
    return False
  return x is None or is_generic_pytree(x)


def is_node_type(x: type) -> bool:
  """True if the graph walk traverses instances of type ``x``: registered graph node
  types (Modules, ``nnx.List``, ...) and the plain containers of
  :func:`is_pytree_node` (flax.nnx's ``graphlib.is_node_type``).

  Raises:
    Nothing.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.graphlib.is_node_type(nnx.Linear), nnx.graphlib.is_node_type(dict)
    (True, True)
    >>> nnx.graphlib.is_node_type(nnx.Param), nnx.graphlib.is_node_type(int)
    (False, False)
  """
  if x in (list, tuple, dict) or (issubclass(x, tuple) and hasattr(x, "_fields")):
    return True
  return node_impl(x) is not None


def is_node_module(x: Any) -> bool:
  """True for graph nodes (Modules and registered node types), not containers or
  Variables (flax.nnx's ``graphlib.is_node_module``).

  Raises:
    Nothing.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.graphlib.is_node_module(nnx.Dict(a=1)), nnx.graphlib.is_node_module({"a": 1})
    (True, False)
  """
  return node_impl(type(x)) is not None

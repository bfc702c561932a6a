"""``to_tree``/``from_tree``: pytrees of graph nodes as pure pytrees and back.

``to_tree`` replaces every graph node (and Variable) in a pytree by a
:class:`NodeStates` (its GraphDef and States) using one split context, so a
node met twice is a reference the second time; ``from_tree`` rebuilds them
with one merge context, restoring the sharing. With ``ctxtag`` inside an
``update_context`` the pair performs a lifted transform's round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import jax

from .._errors import GraphStructureError
from .._sentinel import MISSING as _MISSING
from ..walk._graphdef import GraphDef
from ..walk._node_types import is_graph_node, is_node
from ..walk._pytree_nodes import jax_to_nnx_path as jax_to_nnx_path
from ..walk._walk import walk
from ._contexts import MergeContext, SplitContext, merge_context, split_context


class InconsistentAliasingError(GraphStructureError):
  """One object reached from arguments given different prefixes (e.g. two
  ``in_axes`` for a module passed twice)."""


class NodeStates:
  """A graph node in tree form: its GraphDef and one State per filter.

  A pytree (the States are its children; the GraphDef is a leafless node).

  Attributes:
    states: the States (or, for ``from_prefixes``, the prefixes).
    metadata: static data carried along (not a pytree child).

  Example:
    >>> import nnx_eqx as nnx
    >>> ns = nnx.NodeStates.from_split(*nnx.split(nnx.Linear(1, 1, rngs=nnx.Rngs(0))))
    >>> sorted(ns.state), type(ns.graphdef).__name__
    (['bias', 'kernel'], 'GraphDef')
  """

  __slots__ = ("_graphdef", "states", "metadata")

  def __init__(self, graphdef: GraphDef | None, states: tuple, metadata: Any = None):
    self._graphdef = graphdef
    self.states = tuple(states)
    self.metadata = metadata

  @property
  def graphdef(self) -> GraphDef:
    """The GraphDef.

    Raises:
      GraphStructureError: if this holds prefixes only (no GraphDef).
    """
    if self._graphdef is None:
      raise GraphStructureError("No graphdef available: these NodeStates hold prefixes only.")
    return self._graphdef

  @property
  def state(self) -> Any:
    """The only State.

    Raises:
      GraphStructureError: if there is not exactly one.
    """
    if len(self.states) != 1:
      raise GraphStructureError(
        f"Expected exactly one State, got {len(self.states)}. Fix: use `.states`."
      )
    return self.states[0]

  @classmethod
  def from_split(
    cls, graphdef: GraphDef | None, state: Any, /, *states: Any, metadata: Any = None
  ) -> NodeStates:
    """From the output of a split: ``NodeStates.from_split(*ctx.split(node))``."""
    return cls(graphdef, (state, *states), metadata)

  @classmethod
  def from_states(cls, state: Any, *states: Any) -> NodeStates:
    """States without a GraphDef."""
    return cls(None, (state, *states))

  @classmethod
  def from_prefixes(cls, prefixes: Any, /, *, metadata: Any = None) -> NodeStates:
    """A prefix (e.g. ``in_axes``) matching NodeStates: one entry per State."""
    return cls(None, tuple(prefixes), metadata)

  def __repr__(self) -> str:
    return f"NodeStates(graphdef={self._graphdef!r}, states={self.states!r})"


jax.tree_util.register_pytree_node(
  NodeStates,
  lambda n: ((n._graphdef, n.states), n.metadata),
  lambda metadata, children: NodeStates(children[0], children[1], metadata),
)


def default_split_fn(ctx: SplitContext, path: tuple, prefix: Any, leaf: Any) -> NodeStates:
  """Splits ``leaf`` into one State."""
  return NodeStates.from_split(*ctx.split(leaf))


def default_merge_fn(ctx: MergeContext, path: tuple, prefix: Any, leaf: NodeStates) -> Any:
  """Merges ``leaf``'s GraphDef and States."""
  return ctx.merge(leaf.graphdef, *leaf.states)


def _check_aliasing(node: Any, prefix: Any, seen: dict, path: tuple) -> None:
  for obj in walk(node, leaf_root=True).nodes:
    known = seen.setdefault(id(obj), (prefix, path, obj))
    if known[0] is not prefix and known[0] != prefix:
      raise InconsistentAliasingError(
        f"Inconsistent aliasing detected: a {type(obj).__name__} reached from"
        f" {'/'.join(map(str, known[1])) or '<root>'} with prefix {known[0]!r} is also"
        f" reached from {'/'.join(map(str, path)) or '<root>'} with prefix {prefix!r}."
        " Fix: give every argument that shares objects the same prefix."
      )


def _map_with_prefix(
  fn: Callable[[Any, tuple, Any], Any], prefix: Any, tree: Any, is_leaf: Callable[[Any], bool]
) -> Any:
  """``tree`` with each leaf ``x`` (per ``is_leaf``) replaced by ``fn(pfx, jax_path, x)``,
  where ``pfx`` is the leaf of ``prefix`` (a prefix of ``tree``) above it, or None."""
  if prefix is _MISSING:
    return jax.tree_util.tree_map_with_path(lambda p, x: fn(None, p, x), tree, is_leaf=is_leaf)

  def per_prefix(jax_path: tuple, pfx: Any, subtree: Any) -> Any:
    return jax.tree_util.tree_map_with_path(
      lambda p, x: fn(pfx, jax_path + p, x), subtree, is_leaf=is_leaf
    )

  return jax.tree_util.tree_map_with_path(per_prefix, prefix, tree, is_leaf=lambda x: x is None)


def to_tree(
  tree: Any,
  /,
  *,
  prefix: Any = _MISSING,
  split_fn: Callable[[SplitContext, tuple, Any, Any], Any] = default_split_fn,
  map_non_graph_nodes: bool = False,
  ctxtag: Hashable | None = None,
  check_aliasing: bool = True,
) -> Any:
  """Replaces the graph nodes and Variables of a pytree by :class:`NodeStates`.

  Args:
    tree: a pytree that may contain graph nodes.
    prefix: a prefix of ``tree`` (e.g. ``in_axes``) whose leaf for each node
      is passed to ``split_fn``; without it the prefix is None.
    split_fn: ``(ctx, path, prefix, node) -> pytree``.
    map_non_graph_nodes: also pass other leaves to ``split_fn``.
    ctxtag: the tag of an enclosing ``update_context``.
    check_aliasing: raise if an object is reached under different prefixes.

  Returns:
    The pure pytree.

  Raises:
    InconsistentAliasingError: (a ``ValueError``) with ``check_aliasing``,
      naming both paths.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> pure = nnx.to_tree((m, 1, {"b": m}))
    >>> type(pure[2]["b"].graphdef.nodes[0]).__name__
    'NodeRef'
    >>> out = nnx.from_tree(pure)
    >>> out[0] is out[2]["b"]
    True
  """
  seen: dict = {}
  with split_context(ctxtag) as ctx:

    def convert(pfx: Any, jax_path: tuple, x: Any) -> Any:
      path = jax_to_nnx_path(jax_path)
      if is_node(x):
        if check_aliasing and prefix is not _MISSING:
          _check_aliasing(x, pfx, seen, path)
        return split_fn(ctx, path, pfx, x)
      return split_fn(ctx, path, pfx, x) if map_non_graph_nodes else x

    return _map_with_prefix(convert, prefix, tree, is_node)


def from_tree(
  tree: Any,
  /,
  *,
  prefix: Any = _MISSING,
  merge_fn: Callable[[MergeContext, tuple, Any, Any], Any] = default_merge_fn,
  is_inner: bool | None = None,
  ctxtag: Hashable | None = None,
) -> Any:
  """Rebuilds the graph nodes of a pytree made by :func:`to_tree`.

  Args:
    tree: the pure pytree.
    prefix: a prefix of ``tree`` whose leaf for each node is passed to
      ``merge_fn`` (as :func:`to_tree`); without it the prefix is None.
    merge_fn: ``(ctx, path, prefix, node_states) -> node``.
    is_inner: inside a transform (True) or back outside (False), for an
      enclosing ``update_context``.
    ctxtag: the tag of an enclosing ``update_context``.

  Returns:
    The pytree with graph nodes (sharing restored).

  Raises:
    StateMismatchError: if some NodeStates do not fit their GraphDef.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> a, b = nnx.from_tree(nnx.to_tree((m, m)))
    >>> a is b and a is not m
    True
  """

  def is_states(x: Any) -> bool:
    return isinstance(x, NodeStates)

  with merge_context(ctxtag, is_inner) as ctx:

    def rebuild(pfx: Any, jax_path: tuple, x: Any) -> Any:
      if isinstance(x, NodeStates):
        return merge_fn(ctx, jax_to_nnx_path(jax_path), pfx, x)
      return x

    return _map_with_prefix(rebuild, prefix, tree, is_states)


def clear_non_graph_nodes(tree: Any) -> Any:
  """``tree`` with every leaf that is not a graph node replaced by None.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.extract.clear_non_graph_nodes((1, [2]))
    (None, [None])
  """
  return jax.tree.map(lambda x: x if is_graph_node(x) else None, tree, is_leaf=is_graph_node)

"""``nnx.extract.prefix``: a pytree of per-leaf values shaped like a graph.

The lifted transforms take :func:`nnx.prefix` (StateAxes per graph node); this
form keeps the graph's own shape, as ``flax.nnx.extract.prefix`` in tree mode.

Transforms such as ``vmap`` take axis *prefixes*: pytrees shaped like their
arguments whose leaves say what to do with each argument leaf. ``prefix``
computes one from a function or a ``{filter: value}`` mapping. In tree mode
the result is a copy of the graph with every leaf (Variables included)
replaced by its value; in graph mode each graph node becomes a
:class:`TreeState` holding a State of values, and nodes shared between the
arguments are a reference with an empty State after their first occurrence.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any

import jax

from .._errors import FilterError, GraphStructureError
from ..pytree import _view as _pytree_view
from ..state._filters import Filter, filter_name, to_predicate
from ..state._state import State
from ..variables._variables import Variable
from ..walk import _graph_mode
from ..walk._duplicates import variable_paths
from ..walk._graphdef import GraphDef, map_defn
from ..walk._links import path_of
from ..walk._node_types import LEAF, REF, VAR, is_node
from ..walk._tree_mode import check_tree_mode
from ..walk._walk import WalkSeed, unflatten, walk, walk_uncached


class TreeState:
  """A graph node in tree form: its GraphDef and a State (of leaves or prefixes).

  A pytree whose leaves are the State's leaves; the GraphDef is static.

  Attributes:
    graphdef: the node's GraphDef (a ``NodeRef`` root for a repeated node).
    state: the State.

  Example:
    >>> import nnx_eqx as nnx
    >>> t = nnx.extract.prefix(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), {nnx.Param: 0}, graph=True)
    >>> type(t).__name__, t.state["kernel"]
    ('TreeState', 0)
  """

  __slots__ = ("graphdef", "state", "aliases")

  def __init__(self, graphdef: GraphDef | None, state: Any, aliases: dict | None = None):
    self.graphdef = graphdef
    self.state = state
    # path -> prefix of each Variable path met again (not in ``state``), so a
    # transform can check every path to a shared Variable gets one prefix.
    self.aliases = aliases or {}

  def __repr__(self) -> str:
    return f"TreeState(graphdef={self.graphdef!r}, state={self.state!r})"


jax.tree_util.register_pytree_with_keys(
  TreeState,
  lambda t: (((jax.tree_util.GetAttrKey("state"), t.state),), t.graphdef),
  lambda graphdef, children: TreeState(graphdef, *children),
  lambda t: ((t.state,), t.graphdef),
)


# id(tree-mode prefix copy) -> its (path, value) entries, while the copy lives.
_TREE_PREFIXES: dict[int, list] = {}


def _remember(copy: Any, entries: list) -> None:
  key = id(copy)
  _TREE_PREFIXES[key] = entries
  weakref.finalize(copy, _TREE_PREFIXES.pop, key, None)


def tree_prefix_entries(obj: Any) -> list | None:
  """The ``(path, value)`` entries of a graph node made by :func:`prefix` in
  tree mode (its leaves are the prefix values), or None for any other node."""
  return _TREE_PREFIXES.get(id(obj))


def without_variables(graphdef: GraphDef) -> GraphDef:
  """The GraphDef with every Variable turned into a raw leaf, so that
  rebuilding puts values where the Variables were.

  Raises:
    GraphStructureError: if a Variable is reachable by two paths (its value
      would have to be in two places).
  """
  var_links: dict[int, Any] = {}  # the Variables met, by index: their paths as links

  def strip(d: tuple, link: Any) -> tuple:
    tag = d[0]
    if tag == VAR:
      var_links[d[2]] = link
      return (LEAF,)
    if tag == REF and d[1] in var_links:
      raise GraphStructureError(
        f"The Variable at {_fmt(path_of(var_links[d[1]]))} is also reached at"
        f" {_fmt(path_of(link))}, so it cannot be replaced by a plain value. Fix: keep the"
        " Variables (recreate them), or remove the shared reference."
      )
    return d

  return GraphDef(
    map_defn(graphdef.defn, strip),
    graphdef.paths,
    graphdef.n_nodes,
    graphdef.tree,
    depth=graphdef.depth,
  )


def _fmt(path: tuple) -> str:
  return "/".join(map(str, path)) or "<root>"


def _prefix_fn(filter_map: Mapping[Filter, Any] | Callable[[tuple, Any], Any]) -> Callable:
  if not isinstance(filter_map, Mapping):
    return filter_map
  rules = [(to_predicate(f), value) for f, value in filter_map.items()]
  names = ", ".join(map(filter_name, filter_map))

  def by_filter(path: tuple, leaf: Any) -> Any:
    for pred, value in rules:
      if pred(path, leaf):
        return value
    raise FilterError(
      f"No filter matched leaf at path {_fmt(path)} with value"
      f" {leaf!r}. Filters: {names}. Fix: add a filter for it, or `...` last as a catch-all."
    )

  return by_filter


def _nnx_path(jax_path: tuple) -> tuple:
  out = []
  for k in jax_path:
    for attr in ("name", "key", "idx"):
      if hasattr(k, attr):
        out.append(getattr(k, attr))
        break
    else:
      out.append(str(k))
  return tuple(out)


def prefix(
  node: Any,
  filter_map: Mapping[Filter, Any] | Callable[[tuple, Any], Any],
  /,
  *,
  graph: bool | None = None,
) -> Any:
  """Replaces every leaf of ``node`` by a prefix value.

  Args:
    node: a graph node, or a pytree containing graph nodes and other leaves.
    filter_map: ``(path, leaf) -> value``, or a mapping ``{filter: value}``
      (the first matching filter gives the value; ``...`` catches all).
    graph: True (graph mode): graph nodes become :class:`TreeState`\\ s, a
      node met again is a reference with an empty State. False (tree mode):
      graph nodes become copies with their leaves replaced by the values.

  Returns:
    A pytree shaped like ``node`` holding the prefix values.

  Raises:
    FilterError: (a ``ValueError``) if no filter of a mapping matches a leaf
      (its path is named).
    SharedReferenceError: in tree mode, if a node is reachable twice.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> axes = nnx.extract.prefix(model, {nnx.Param: 0}, graph=False)
    >>> axes.kernel, axes.bias
    (0, 0)
  """
  fn = _prefix_fn(filter_map)
  graph = _graph_mode.resolve(graph)[0]
  seed = WalkSeed()

  def on_leaf(jax_path: tuple, x: Any) -> Any:
    path = _nnx_path(jax_path)
    if not is_node(x) or isinstance(x, Variable):  # a Variable's prefix is its value
      return fn(path, x)
    if graph:
      w = walk_uncached(x, leaf_root=True, seed=seed)
      values = [fn(path + p, leaf) for p, leaf in zip(w.paths, w.leaf_objects())]
      first = set(w.paths)
      aliases = {p: fn(path + p, v) for p, v in variable_paths(x) if p not in first}
      return TreeState(w.graphdef, State.from_flat_path(zip(w.paths, values)), aliases)
    w = walk(x, leaf_root=True)
    check_tree_mode(w, "prefix")
    values = [fn(path + p, leaf) for p, leaf in zip(w.paths, w.leaf_objects())]
    copy = unflatten(without_variables(w.graphdef), values)
    _remember(copy, list(zip(w.paths, values)))
    if hasattr(copy, "__dict__"):
      # As a JAX pytree the copy flattens like ``x`` with the prefix values where
      # its Variables are, so it is a prefix for plain ``jax.vmap(in_axes=...)``
      # too (mode flags get None).
      _pytree_view.mark_prefix_copy(copy, x)
    return copy

  return jax.tree_util.tree_map_with_path(on_leaf, node, is_leaf=is_node)

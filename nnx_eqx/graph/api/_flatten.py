"""Lower-level graph functions: ``flatten``/``unflatten`` with reference maps.

``flatten`` is ``split`` without States: the GraphDef and the leaves as a
:class:`FlatState` (the graph's own Variables, not copies). A :class:`RefMap`
passed as ``ref_index`` receives ``object -> node index`` for every node and
Variable; ``unflatten`` fills an :class:`IndexMap` (``node index -> object``)
with the objects it builds. With ``ref_outer_index`` (inner object -> index
in an enclosing graph) the GraphDef records each node's outer index, and
``unflatten(..., outer_index_outer_ref=...)`` then updates the enclosing
graph's objects in place instead of creating new ones: the round trip a
lifted transform makes.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import jax

from .._errors import GraphStructureError
from ..state._state import FlatState, State
from ..variables._variables import Variable
from ..walk import _graph_mode
from ..walk._graphdef import GraphDef
from ..walk._tree_mode import check_tree_mode
from ..walk._walk import Walk, WalkSeed, walk, walk_uncached
from ..walk._walk import unflatten as _unflatten
from . import _functional as _graph
from ._functional import check_leaf_count, leaves_of

split = _graph_mode.accepts_graph_keywords(_graph.split)
merge = _graph_mode.accepts_graph_keywords(_graph.merge)


class RefMap(MutableMapping):
  """A mapping keyed by object identity (``object -> node index``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> v = nnx.Param(jnp.ones(1))
    >>> refs = nnx.graphlib.RefMap()
    >>> _ = nnx.graphlib.flatten([v, v], ref_index=refs)
    >>> refs[v], len(refs)
    (0, 1)
  """

  def __init__(self, items: Any = ()):
    self._data: dict[int, tuple[Any, int]] = {}
    for k, v in dict(items).items() if isinstance(items, dict) else items:
      self[k] = v

  @classmethod
  def from_indexmap(cls, indexmap: dict) -> RefMap:
    """The inverse of an :class:`IndexMap` (``index -> object``)."""
    return cls((obj, i) for i, obj in indexmap.items())

  def __getitem__(self, key: Any) -> int:
    return self._data[id(key)][1]

  def __setitem__(self, key: Any, value: int) -> None:
    self._data[id(key)] = (key, value)

  def __delitem__(self, key: Any) -> None:
    del self._data[id(key)]

  def __contains__(self, key: Any) -> bool:
    return id(key) in self._data

  def __iter__(self) -> Iterator[Any]:
    return (k for k, _ in self._data.values())

  def __len__(self) -> int:
    return len(self._data)

  def __repr__(self) -> str:
    return f"RefMap({[(type(k).__name__, i) for k, i in self._data.values()]})"


class IndexMap(dict):
  """A dict ``node index -> object`` (what :func:`unflatten` fills).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> v = nnx.Param(jnp.ones(1))
    >>> nnx.graphlib.IndexMap.from_refmap(nnx.graphlib.RefMap([(v, 0)]))[0] is v
    True
  """

  @staticmethod
  def from_refmap(refmap: RefMap) -> IndexMap:
    """The inverse of a :class:`RefMap`."""
    return IndexMap((i, obj) for obj, i in refmap.items())


def _resolve(graph: bool | None) -> bool:
  return _graph_mode.resolve(graph)[0]


def _flat_result(w: Walk, gd: GraphDef, with_paths: bool) -> tuple:
  leaves = w.leaf_objects()
  if with_paths:
    return gd, FlatState(zip(w.paths, leaves))
  return gd, leaves


def _outer_indices(nodes: list, ref_outer_index: Any) -> tuple:
  return tuple(ref_outer_index.get(obj) if obj is not None else None for obj in nodes)


def flatten(
  node: Any,
  /,
  *,
  ref_index: RefMap | None = None,
  ref_outer_index: RefMap | None = None,
  with_paths: bool = True,
  graph: bool | None = None,
) -> tuple[GraphDef, Any]:
  """Flattens a graph into its GraphDef and its leaves.

  Args:
    node: a graph node, Variable, container of them, or any value (a value
      that is none of these is the only leaf, at the empty path).
    ref_index: if given, receives ``object -> node index`` for every node.
    ref_outer_index: ``object -> index`` in an enclosing graph; the GraphDef
      then records each node's outer index (see :func:`unflatten`).
    with_paths: True returns a :class:`FlatState` of ``(path, leaf)``; False a
      list of leaves.
    graph: False for tree mode (no shared references or cycles allowed).

  Returns:
    ``(graphdef, flat_state)``. The leaves are the graph's own Variables and
    raw values (not copies).

  Raises:
    SharedReferenceError: in tree mode, if an object is found at two paths.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> graphdef, flat = nnx.graphlib.flatten(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> [p for p, _ in flat]
    [('bias',), ('kernel',)]
  """
  tree = not _resolve(graph)
  w = walk(node, leaf_root=True)
  if tree:
    check_tree_mode(w, "flatten")
  if ref_index is not None:
    for i, obj in enumerate(w.nodes):
      ref_index[obj] = i
    for i, ref in enumerate(_held_refs(w.nodes), len(w.nodes)):
      ref_index[ref] = i
  gd = w.graphdef.as_tree() if tree else w.graphdef
  if ref_outer_index is not None:
    gd = gd.with_outer(_outer_indices(w.nodes, ref_outer_index))
  return _flat_result(w, gd, with_paths)


def unflatten(
  graphdef: GraphDef,
  state: Any,
  /,
  *,
  index_ref: dict | None = None,
  outer_index_outer_ref: dict | None = None,
) -> Any:
  """Rebuilds a graph from its GraphDef and leaves (the inverse of :func:`flatten`).

  Args:
    graphdef: from :func:`flatten` or ``nnx.split``.
    state: a :class:`FlatState`, a list of leaves in the GraphDef's order, or
      a (nested) State.
    index_ref: if given, receives ``node index -> object`` for the objects built.
    outer_index_outer_ref: ``outer index -> object``; nodes whose GraphDef
      records an outer index found here are updated in place instead of
      being created anew.

  Returns:
    The root of the graph.

  Raises:
    StateMismatchError: (a ``ValueError``) ``Incorrect number of leaves`` when
      the leaves do not fit the GraphDef, or a path is missing or extra.
    GraphStructureError: if ``graphdef`` is not a GraphDef.

  Example:
    >>> import nnx_eqx as nnx
    >>> graphdef, flat = nnx.graphlib.flatten(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> nnx.graphlib.unflatten(graphdef, flat).kernel.shape
    (2, 3)
  """
  if not isinstance(graphdef, GraphDef):
    raise GraphStructureError(
      f"unflatten expects a GraphDef first, got {type(graphdef).__name__}. Fix: pass the"
      " graphdef returned by `nnx.graphlib.flatten`."
    )
  if isinstance(state, State):
    check_leaf_count(graphdef, len(state.to_flat_dict()))
  leaves = leaves_of(graphdef, (state,))
  reuse = None
  if outer_index_outer_ref is not None and graphdef.outer is not None:
    reuse = {
      i: outer_index_outer_ref[o]
      for i, o in enumerate(graphdef.outer)
      if o is not None and o in outer_index_outer_ref
    }
  nodes: list = []
  root = _unflatten(graphdef, leaves, reuse=reuse, nodes_out=nodes)
  if index_ref is not None:
    index_ref.update((i, obj) for i, obj in enumerate(nodes) if obj is not None)
    index_ref.update(enumerate(_held_refs(nodes), len(nodes)))
  return root


def _held_refs(nodes: list) -> list:
  """The ``jax.Ref`` values of the ref-mode Variables among ``nodes`` that are not
  nodes themselves, each once, in node order. A reference map numbers them after
  the nodes, as flax.nnx gives such a Ref an index of its own (here a Variable and
  its Ref stay one leaf of the GraphDef)."""
  seen = {id(obj) for obj in nodes}
  out = []
  for obj in nodes:
    if isinstance(obj, Variable):
      ref = obj.__dict__.get("_value")
      if isinstance(ref, jax.Ref) and id(ref) not in seen:
        seen.add(id(ref))
        out.append(ref)
  return out


def _flatten_pytree(pytree: Any) -> tuple[list[tuple[Any, Any]], Any]:
  """The children of one pytree node as ``(key, child)`` pairs, and its treedef."""
  children, treedef = jax.tree_util.tree_flatten_with_path(
    pytree, is_leaf=lambda x: x is not pytree
  )
  return [(_key_name(path[0]), child) for path, child in children], treedef


def _unflatten_pytree(leaves: list[tuple[Any, Any]], treedef: Any) -> Any:
  """The inverse of :func:`_flatten_pytree`."""
  return treedef.unflatten([child for _, child in leaves])


def _key_name(key: Any) -> Any:
  for attr in ("name", "key", "idx"):
    if hasattr(key, attr):
      return getattr(key, attr)
  return str(key)


def walk_in_context(node: Any, seed: WalkSeed) -> Walk:
  """A walk of ``node`` in which the objects ``seed`` already holds are references."""
  return walk_uncached(node, leaf_root=True, seed=seed)

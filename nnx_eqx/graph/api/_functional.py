"""The public graph API: split, merge, state, update, pop, clone, iteration.

A *graph node* is a Module (or a type registered with
``register_graph_node_type``). Its children are its attributes: nodes,
Variables (identity-tracked leaves), raw arrays (leaves), tuples/lists/dicts of
those (plain pytree data), or anything else (static, kept in the GraphDef).
Graph nodes are also JAX pytrees that keep their sharing (see
:func:`register_pytree`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp

from .. import _version
from .._errors import GraphStructureError, StateMismatchError, flax_type_note, refuse_other_library
from ..pytree import _view as _pytree_view
from ..state._filters import Filter, to_predicate
from ..state._foreign_libraries import foreign_states
from ..state._state import FlatState, State, _flatten_into
from ..tracing import _lost_updates
from ..tracing._lost_updates import COPY_MARK, note_write
from ..tracing._traces import current_trace
from ..variables._hijax import HijaxVariable as _HijaxVariable
from ..variables._hijax import update_variable as _update_hijax
from ..variables._variables import Variable, new_variable
from ..walk import _graphdef
from ..walk._graphdef import ApplyCaller as ApplyCaller
from ..walk._graphdef import GraphDef as GraphDef
from ..walk._graphdef import StaticValue as StaticValue
from ..walk._links import is_path, path_of, sorted_paths
from ..walk._node_types import LEAF as _LEAF_TAG
from ..walk._node_types import MAP as _MAP_TAG
from ..walk._node_types import NODE as _NODE_TAG
from ..walk._node_types import SEQ as _SEQ_TAG
from ..walk._node_types import VAR as _VAR_TAG
from ..walk._node_types import NodeImpl as NodeImpl
from ..walk._node_types import is_graph_node as is_graph_node
from ..walk._node_types import is_node as is_node
from ..walk._node_types import node_impl as node_impl
from ..walk._node_types import register_graph_node_type as register_graph_node_type
from ..walk._node_types import register_leaf_type as register_leaf_type
from ..walk._paths import delete_at, set_in_container
from ..walk._tree_mode import check_tree_mode
from ..walk._walk import _DELETE as _DELETE
from ..walk._walk import _MODULE_IMPL_HOLDER as _MODULE_IMPL_HOLDER
from ..walk._walk import KEEP_VARIABLES, _BulkOp, bulk
from ..walk._walk import Walk as Walk
from ..walk._walk import unflatten as unflatten
from ..walk._walk import walk as walk
from ..walk._walk import walk_uncached as walk_uncached


# --------------------------------------------------------------------------
# Public graph API
# --------------------------------------------------------------------------
def _build_state(w: Walk, idxs, trace, snapshot: bool = False) -> State:
  """The State of the leaves ``idxs``: holding the graph's own Variables (as
  flax.nnx 0.12), or with ``snapshot`` new copies of them made under ``trace``
  (the seed-era ``partition``/``get_state``, whose States are values)."""
  root: dict = {}
  slots, paths, links = w.slots, w.paths, w.leaf_links
  # the dict of each node/container on the way to a leaf, by ``id`` of its link:
  # each is made once, so the cost is linear in the nodes, not in the path lengths
  dicts = {id(None): root}
  last: Any = dicts  # no link
  d = None
  for i in idxs:
    s = slots[i]
    if isinstance(s, Variable):
      leaf = new_variable(type(s), s._value, s._metadata.copy(), trace) if snapshot else s
    else:
      leaf = s._value
    link = links[i]
    if link is not last:  # consecutive leaves of one node share their parent dict
      last = link
      d = dicts.get(id(link))
      if d is None:
        d = _dict_at(link, dicts)
    d[paths[i][-1]] = leaf  # type: ignore[index]
  return State._from_dict(root)


def _dict_at(link, dicts: dict) -> dict:
  """The State dict at ``link``, made (with those above it) if missing."""
  missing = []
  d = dicts.get(id(link))
  while d is None:
    missing.append(link)
    link = link[0]
    d = dicts.get(id(link))
  for link in reversed(missing):
    sub = State._from_dict({})
    d[link[1]] = sub
    d = dicts[id(link)] = sub._mapping
  return d


def _walk_for(node: Any, graph: bool, fn_name: str) -> Walk:
  """The walk of ``node`` (a leaf root allowed), checked for tree mode; an
  ``eqx.Module`` is refused by name."""
  refuse_other_library(f"nnx.{fn_name}", node)
  w = walk(node, leaf_root=True)
  if not graph:
    check_tree_mode(w, fn_name)
  return w


def _is_root_leaf(w: Walk) -> bool:
  """Whether the root itself is the graph's only leaf (a Variable or a value)."""
  return len(w.paths) == 1 and not w.paths[0]


def _root_leaf_state(w: Walk, idxs, trace, snapshot: bool = False) -> Any:
  """What a State holds for a root leaf: the root Variable (a copy with
  ``snapshot``), or the root value itself; an empty State when the filter did
  not select it."""
  if not idxs:
    return State._from_dict({})
  s = w.slots[0]
  if isinstance(s, Variable):
    return new_variable(type(s), s._value, s._metadata.copy(), trace) if snapshot else s
  return s._value


def states_of(w: Walk, buckets, trace, snapshot: bool = False) -> list:
  build = _root_leaf_state if _is_root_leaf(w) else _build_state
  return [build(w, b, trace, snapshot) for b in buckets]


def split(node: Any, *filters: Filter, graph: bool = True) -> tuple:
  """Splits a graph into its GraphDef and one State per filter.

  The States hold the graph's own Variable objects, as in flax.nnx 0.12:
  setting a Variable's value through a State changes the graph too (copy with
  ``nnx.clone(state)`` for a snapshot). :func:`merge` builds new Modules
  around those Variables.
  A Variable or a plain value (an array, an int) may be split too: its
  "state" is then the Variable itself or the value.

  Args:
    node: a Module (or a graph node, or a tuple/list/dict of them).
    *filters: filters that together must match every leaf; a leaf goes to the
      first filter that matches. No filters means one State with everything.
    graph: False for tree mode: the graph must then be a plain pytree (no
      object reachable twice, no cycle), and the GraphDef is marked as such.

  Returns:
    ``(graphdef, state_1, ..., state_n)``.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    FilterError: if some leaf matches no filter (the message names its path);
      add ``...`` as the last filter to collect the rest.
    UnknownFilterError: if a filter is not a valid filter.
    SharedReferenceError: in tree mode, if an object is found at two paths.

  Example:
    >>> import nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    >>> sorted(params), len(rest)
    (['bias', 'kernel'], 0)
  """
  return split_as(node, filters, graph=graph)


def split_as(node: Any, filters: tuple, *, graph: bool = True, snapshot: bool = False) -> tuple:
  """:func:`split`, with ``snapshot`` giving States of new Variable objects
  (the seed-era ``Module.partition``, whose ``Pure`` is an immutable value)."""
  w = _walk_for(node, graph, "split")
  trace = current_trace()
  if not filters:
    buckets: list = [range(len(w.slots))]
  else:
    buckets = w.partition_indices(filters, exhaustive=True)
  gd = w.graphdef if graph else w.graphdef.as_tree()
  with bulk(len(w.slots)):
    return (gd, *states_of(w, buckets, trace, snapshot))


def graphdef(node: Any, *, graph: bool = True) -> GraphDef:
  """Returns the GraphDef of ``node`` (cached while the graph is unchanged).

  It reads no values, so it is given for a module whose update a plain JAX
  transformation dropped too (to rebuild it: ``nnx.merge(nnx.graphdef(m),
  saved)``), while :func:`state` and :func:`split` of it raise
  :class:`LostUpdateError`.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    SharedReferenceError: with ``graph=False``, if an object is found at two paths.

  Example:
    >>> import nnx_eqx as nnx
    >>> isinstance(nnx.graphdef(nnx.Linear(1, 1, rngs=nnx.Rngs(0))), nnx.GraphDef)
    True
  """
  if _lost_updates.STALE or _lost_updates.PENDING:  # (structure only: nothing stale is read)
    with _lost_updates.overwriting():
      gd = _walk_for(node, graph, "graphdef").graphdef
  else:
    gd = _walk_for(node, graph, "graphdef").graphdef
  return gd if graph else gd.as_tree()


def state(node: Any, *filters: Filter, graph: bool = True) -> Any:
  """Returns the State of ``node``, optionally filtered (non-exhaustive).

  The State holds the graph's own Variables, as in flax.nnx 0.12 (see :func:`split`).

  Args:
    node: a graph node.
    *filters: zero filters gives every leaf; one gives one State; several give
      a tuple of States. Unmatched leaves are dropped.

    graph: False for tree mode (see :func:`split`).

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    UnknownFilterError: if a filter is not a valid filter.
    SharedReferenceError: with ``graph=False``, if an object is found at two paths.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> len(jax.tree.leaves(nnx.state(model, nnx.Param)))
    2
  """
  return state_as(node, filters, graph=graph)


def state_as(node: Any, filters: tuple, *, graph: bool = True, snapshot: bool = False) -> Any:
  """:func:`state`, with ``snapshot`` giving new Variable objects (the seed-era
  ``Module.get_state``/``Module.filter``)."""
  w = _walk_for(node, graph, "state")
  trace = current_trace()
  if not filters:
    return states_of(w, [range(len(w.slots))], trace, snapshot)[0]
  buckets = w.partition_indices(filters, exhaustive=False)
  states = tuple(states_of(w, buckets, trace, snapshot))
  return states[0] if len(filters) == 1 else states


def variables(node: Any, *filters: Filter) -> Any:
  """Like :func:`state` (whose State also holds the graph's own Variables), with
  no filter meaning every Variable; setting their values updates the graph.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> nnx.variables(model, nnx.Param).bias.value = jnp.ones(3)
    >>> model.bias.value.tolist()
    [1.0, 1.0, 1.0]
  """
  refuse_other_library("nnx.variables", node)
  return state_as(node, filters or (...,))


def _flat_of(states) -> dict:
  flat: dict = {}
  with _BulkOp():  # only on the general path of merge, and for update
    for s in states:
      if isinstance(s, State):
        _flatten_into(s._mapping, (), flat)
      elif isinstance(s, dict):
        flat.update(State(s).to_flat_dict())
      else:
        raise GraphStructureError(
          flax_type_note(s, "an nnx_eqx.State")
          or f"Expected a State, got {type(s).__name__}. Fix: pass the States"
          " returned by `nnx.split`/`nnx.state`."
        )
  return flat


def _root_leaf_of(states: tuple) -> Any:
  """The one state that is not an empty State (split of a root leaf)."""
  if len(states) == 1 and isinstance(states[0], FlatState) and len(states[0]) == 1:
    return states[0].leaves[0]
  found = [s for s in states if not (isinstance(s, (State, dict)) and not s)]
  if len(found) != 1:
    raise StateMismatchError(
      f"The GraphDef is of a single leaf, but {len(found)} non-empty states were"
      " given. Fix: pass the states returned by the `nnx.split` of that leaf."
    )
  return found[0]


def merge(graphdef: GraphDef, *states: State, copy: bool = False) -> Any:
  """Builds a new graph from a GraphDef and States (the inverse of :func:`split`).

  Shared Variables and Modules come back shared. The Modules (and other
  nodes) are new objects; the Variables are the States' own, as in flax.nnx
  0.12, so the result shares them with the States (and with the graph they
  were split from): ``nnx.merge(*nnx.split(m))`` updates ``m``'s Variables
  when trained. With ``copy=True`` the Variables are new too, and the States
  and any previous graph are untouched (``nnx.clone`` does this). Variables
  of another JAX trace (a State closed over inside ``jax.jit``, where flax
  would refuse to change them) are always copied.

  Args:
    graphdef: from :func:`split`.
    *states: States that together hold exactly the graph's leaf paths (for a
      GraphDef of a split Variable or value: that Variable or value). Raw
      values in place of Variables are wrapped in new Variables. flax.nnx States
      are taken too, converted (new nnx_eqx Variables over the same arrays).
    copy: True to build new Variable objects (flax.nnx's ``copy``).

  Returns:
    The rebuilt root node.

  Raises:
    WrongLibraryError: if a state is an ``eqx.Module``.
    TypeError: if no state is given.
    StateMismatchError: if a path of the GraphDef is missing from the states,
      or the states hold a path the GraphDef lacks (both are named).
    LostUpdateError: with ``copy=True``, if a Variable of the states is stale
      (a plain JAX transformation dropped its update): the new Variables would
      hold the stale values. Without ``copy`` the graph holds those Variables
      themselves, which raise where they are used.

  Example:
    >>> import nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> graphdef, params = nnx.split(model)
    >>> type(nnx.merge(graphdef, params)).__name__
    'Linear'
  """
  if not isinstance(graphdef, GraphDef):
    raise GraphStructureError(
      flax_type_note(graphdef, "an nnx_eqx.GraphDef")
      or f"merge expects a GraphDef first, got {type(graphdef).__name__}. Fix:"
      " call `nnx.merge(graphdef, *states)` with the graphdef from `nnx.split`."
    )
  refuse_other_library("nnx.merge", states=states)
  if not states:
    raise TypeError("merge() missing 1 required positional argument: 'state'")
  states = foreign_states(states)  # flax.nnx States/Variables, converted
  if copy:  # (new Variables would hold stale values, as ``update``'s targets would)
    _check_sources(states)
  reuse = None if copy else KEEP_VARIABLES
  if len(graphdef.paths) == 1 and not graphdef.paths[0]:  # a split Variable or value
    leaf = _root_leaf_of(states)
    if graphdef.defn[0] != _VAR_TAG:
      return leaf
    return unflatten(graphdef, [leaf], reuse)
  return unflatten(graphdef, leaves_of(graphdef, states), reuse)


def leaves_of(graphdef: GraphDef, states: tuple) -> list:
  """The leaves of ``states`` (States, nested dicts, or one FlatState) in the
  GraphDef's order.

  Raises:
    StateMismatchError: if the states do not hold exactly the GraphDef's paths.
  """
  if len(states) == 1 and isinstance(states[0], FlatState | list):
    flat_leaves = list(states[0].leaves if isinstance(states[0], FlatState) else states[0])
    check_leaf_count(graphdef, len(flat_leaves))
    return flat_leaves
  leaves = _gather(graphdef, states)
  if leaves is None:  # plain dicts, repeated paths, or a mismatch to report
    flat = _flat_of(states)
    leaves = []
    missing = []
    for p in graphdef.paths:
      try:
        leaves.append(flat.pop(p))
      except KeyError:
        missing.append(p)
    if missing or flat:
      raise _mismatch_error(missing, list(flat))
  return leaves


_UNSET = object()


def check_leaf_count(graphdef: GraphDef, n: int) -> None:
  """Raises unless ``n`` is the GraphDef's number of leaves.

  Raises:
    StateMismatchError: naming both counts.
  """
  if n != len(graphdef.paths):
    raise StateMismatchError(
      f"Incorrect number of leaves: the GraphDef has {len(graphdef.paths)}, the state"
      f" {n}. Fix: pass the state flattened from a graph of the same structure."
    )


def _gather(graphdef: GraphDef, states: tuple) -> list | None:
  """The leaves of ``states`` in the GraphDef's order, read by following the
  GraphDef's path tree through the nested States (no flat dict of paths is
  built). None when the states are not exactly the GraphDef's paths, each
  once, all in States: the caller then takes the general path, which
  accepts plain dicts and reports mismatches."""
  tree = graphdef.path_tree()
  leaves = [_UNSET] * len(graphdef.paths)
  found = 0
  for s in states:
    if type(s) is not State:
      return None
    stack = [(s._mapping, tree)]
    while stack:
      m, t = stack.pop()
      for k, v in m.items():
        sub = t.get(k)
        if type(v) is State:
          if type(sub) is dict:
            stack.append((v._mapping, sub))
            continue
          if not v._mapping:  # an empty sub-State holds no path
            continue
          return None
        if type(sub) is not int or leaves[sub] is not _UNSET:
          return None
        leaves[sub] = v
        found += 1
  return leaves if found == len(leaves) else None


def _fmt(p) -> str:
  return "/".join(map(str, p)) or "<root>"


def _mismatch_error(missing, extra) -> StateMismatchError:
  parts = []
  if missing:
    parts.append("missing paths: " + ", ".join(_fmt(p) for p in missing[:8]))
  if extra:
    parts.append("unexpected paths: " + ", ".join(_fmt(p) for p in extra[:8]))
  return StateMismatchError(
    "The states do not match the GraphDef (" + "; ".join(parts) + "). Fix: pass"
    " every State returned by the same `nnx.split` call (use `...` as the last"
    " filter to keep the rest), from a model of the same structure."
  )


def update(node: Any, *states: State) -> None:
  """Writes the values of ``states`` into ``node``'s Variables, in place.

  Paths the graph lacks are added as new attributes when their parent exists
  (e.g. Intermediates produced by a functional call). As in flax.nnx, a value
  may have another shape or dtype than the one it replaces (e.g. parameters
  stacked by ``jax.vmap``). Over a module whose state update a JAX
  transformation dropped, this is the recovery: a write, not a use of the stale
  values, it ends the marks of the Variables it writes (the others stay marked).

  Args:
    node: a graph node.
    *states: States (or nested dicts of values) keyed by paths of ``node``; a
      flax.nnx ``State`` or Variable is taken too (converted as ``nnx.from_flax``
      does: flax's paths, the paired Variable types, the same arrays).

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    StateMismatchError: a path's parent is not in the graph.
    LostUpdateError: ``states`` hold Variables that a dropped update left stale
      (a State taken with ``nnx.state`` before the call shares the module's own
      Variables): their values are the stale ones. Save values apart instead
      (``nnx.state(model).to_pure_dict()``).
    FlaxConversionError: a flax State holds a leaf that is neither a Variable nor
      an array (its path is named).

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> params = jax.tree.map(lambda x: x * 0, nnx.state(model, nnx.Param))
    >>> nnx.update(model, params)
    >>> float(model.kernel.value.sum())
    0.0
  """
  refuse_other_library("nnx.update", node, states)
  states = foreign_states(states)  # flax.nnx States/Variables, converted
  _check_sources(states)  # (values of stale Variables are stale)
  with _lost_updates.overwriting():  # a write of whole values, not a use of stale ones
    w = walk(node, leaf_root=True)
  if _is_root_leaf(w) and isinstance(w.slots[0], Variable):  # a split Variable
    new_leaf = _root_leaf_of(states)
    value = new_leaf._value if isinstance(new_leaf, Variable) else new_leaf
    w.slots[0].__dict__["_value"] = value
    _lost_updates.written(w.slots)
    return
  index = w.path_index()
  added = False
  overwritten: list | None = [] if _lost_updates.STALE else None  # (to end their marks)
  for path, leaf in _flat_of(states).items():
    i = index.get(path)
    new = leaf._value if isinstance(leaf, Variable) else leaf
    if i is not None:
      slot = w.slots[i]
      if overwritten is not None:
        overwritten.append(slot)
      if type(slot) is _HijaxVariable or type(leaf) is _HijaxVariable:
        added |= _update_hijax(slot, leaf)
        continue
      if isinstance(slot, Variable):
        d = slot.__dict__
        if COPY_MARK in d:  # a copy a JAX transform rebuilt: the update may be dropped
          note_write(slot)
        d["_value"] = new
        if isinstance(leaf, Variable) and leaf._metadata != slot._metadata:
          slot.__dict__["_metadata"] = dict(leaf._metadata)
          added = True
      else:
        slot._value = new
      continue
    parent = _node_at(w, path[:-1])
    if parent is None and set_in_container(node, path, leaf):
      continue
    if parent is None:
      _lost_updates.written(overwritten or ())
      raise StateMismatchError(
        f"update: path {_fmt(path)} is not in the graph and its parent"
        f" {_fmt(path[:-1])} is not a node of it. Fix: update with a State"
        " produced from a graph of the same structure."
      )
    setattr(parent, path[-1], leaf.copy() if isinstance(leaf, Variable) else leaf)
    added = True
  if overwritten:
    _lost_updates.written(overwritten)
  if added:
    _version.bump()


def _check_sources(states: tuple) -> None:
  """Raises :class:`LostUpdateError` where a Variable of ``states``, whose values are
  about to be copied, is stale; two dict tests while nothing is pending or stale."""
  if _lost_updates.PENDING or _lost_updates.STALE:
    _lost_updates.check_sources(_variables_of(states))


def _variables_of(states: tuple) -> list:
  """The Variables ``states`` hold (States, nested dicts, or one FlatState)."""
  return jax.tree.leaves(states, is_leaf=lambda x: isinstance(x, Variable))


def _node_at(w: Walk, path: tuple):
  for link, obj in zip(w.node_links, w.nodes):
    if is_path(link, path) and not isinstance(obj, Variable):
      return obj
  return None


def pop(node: Any, *filters: Filter, graph: bool = True) -> Any:
  """Removes the leaves matching ``filters`` from the graph and returns them.

  Args:
    node: a graph node.
    *filters: one filter gives one State; several give a tuple.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    UnknownFilterError: if a filter is not a valid filter.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> model.y = nnx.Intermediate(jnp.ones(3))
    >>> sorted(nnx.pop(model, nnx.Intermediate)), hasattr(model, "y")
    (['y'], False)
  """
  if not filters:
    raise TypeError("pop expects at least one filter, e.g. nnx.pop(model, nnx.Intermediate)")
  w = _walk_for(node, graph, "pop")
  buckets = w.partition_indices(filters, exhaustive=False)
  trace = current_trace()
  states = tuple(_build_state(w, b, trace) for b in buckets)
  popped = sorted((w.paths[i] for b in buckets for i in b), key=_path_sort_key, reverse=True)
  for path in popped:  # last first, so list indices stay valid
    if path:
      delete_at(node, path)
  _version.bump()
  return states[0] if len(filters) == 1 else states


def clone(node: Any, variables: bool = True, *, graph: bool = True, arrays: bool = False) -> Any:
  """A deep copy of the graph with the same sharing (``merge(*split(node))``).

  By default the copy's Variables hold the same (immutable) JAX arrays as the
  originals; with ``arrays=True`` every array is copied to a new buffer (as
  flax.nnx), e.g. so one of the two can be donated. With ``variables=False``
  (flax.nnx 0.12.12) only the Modules and containers are copied: the copy holds
  the original's Variable objects, so writing to one writes to both.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    SharedReferenceError: with ``graph=False``, if an object is found at two paths.
    ValueError: ``arrays=True`` with ``variables=False`` (shared Variables
      cannot hold copied arrays).

  Example:
    >>> import nnx_eqx as nnx
    >>> a = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> b = nnx.clone(a)
    >>> b is not a and b.kernel is not a.kernel
    True
    >>> c = nnx.clone(a, variables=False)
    >>> c is not a and c.kernel is a.kernel
    True
  """
  if arrays and not variables:
    raise ValueError(
      "clone: arrays=True copies the arrays of new Variables, but variables=False shares"
      " the Variables. Fix: pass variables=True, or arrays=False."
    )
  w = _walk_for(node, graph, "clone")
  if not variables:  # the same Variable objects in the new structure
    return unflatten(
      w.graphdef, [s if isinstance(s, Variable) else s._value for s in w.slots], KEEP_VARIABLES
    )
  leaves = [s.copy() if isinstance(s, Variable) else s._value for s in w.slots]
  if arrays:
    leaves = [copy_arrays(x) for x in leaves]
  return unflatten(w.graphdef, leaves)


def copy_arrays(x: Any) -> Any:
  """``x`` (a Variable copy or a value) with its JAX arrays in new buffers."""

  def copy(a: Any) -> Any:
    return jnp.array(a, copy=True) if isinstance(a, jax.Array) else a

  if isinstance(x, Variable):
    x.__dict__["_value"] = jax.tree.map(copy, x.__dict__["_value"])
    return x
  return jax.tree.map(copy, x)


def set_metadata(node: Any, /, *, only: Filter = Variable, **metadata: Any) -> None:
  """Sets metadata entries on every Variable of ``node`` that ``only`` selects, in place.

  Entries not named are kept (as :meth:`Variable.set_metadata` with keywords).

  Args:
    node: a graph node (Module, Variable, or a container of them).
    only: a filter selecting the Variables to change (default: all).
    **metadata: the entries to set.

  Raises:
    UnknownFilterError: if ``only`` is not a valid filter.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> m.count = nnx.BatchStat(0)
    >>> nnx.set_metadata(m, frozen=True, only=nnx.Param)
    >>> m.kernel.get_metadata("frozen"), m.count.get_metadata("frozen", None)
    (True, None)
  """
  pred = to_predicate(only)
  w = walk(node, leaf_root=True)
  for link, obj in zip(w.node_links, w.nodes):
    if isinstance(obj, Variable) and pred(path_of(link), obj):
      obj.set_metadata(**metadata)


def iter_graph(node: Any, *, graph: bool = True) -> Iterator[tuple[tuple, Any]]:
  """Yields ``(path, value)`` for every Module, Variable and raw array leaf,
  depth first with children before their parent (as flax.nnx does).

  Modules and Variables reachable by several paths are yielded once (at
  their first path); raw arrays are yielded at every path.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    SharedReferenceError: with ``graph=False``, if an object is found at two
      paths (raised on the first ``next``).

  Example:
    >>> import nnx_eqx as nnx
    >>> [p for p, _ in nnx.iter_graph(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))]
    [('bias',), ('kernel',), ()]
  """
  return _iter_walk(_walk_for(node, graph, "iter_graph"))


def _iter_walk(w: Walk) -> Iterator[tuple[tuple, Any]]:
  """``iter_graph`` over an existing walk."""
  slots = iter(w.slots)  # VAR and LEAF entries hold the slots in walk order
  stack: list = [(w.graphdef.defn, (), False)]
  while stack:
    d, path, expanded = stack.pop()
    tag = d[0]
    if tag == _NODE_TAG:
      if expanded:
        yield path, w.nodes[d[2]]
        continue
      stack.append((d, path, True))
      stack.extend((sub, (*path, k), False) for k, sub in reversed(d[3]))
    elif tag == _VAR_TAG:
      yield path, next(slots)
    elif tag == _LEAF_TAG:
      yield path, next(slots)._value
    elif tag == _SEQ_TAG:
      stack.extend((sub, (*path, j), False) for j, sub in reversed(list(enumerate(d[2]))))
    elif tag == _MAP_TAG:
      stack.extend((sub, (*path, k), False) for k, sub in reversed(d[2]))


def _key_sort_key(k):
  return (type(k).__name__, k)


def _path_sort_key(path):
  return tuple(map(_key_sort_key, path))


def iter_modules(node: Any, *, graph: bool = True) -> Iterator[tuple[tuple, Any]]:
  """Yields ``(path, module)`` for every graph node (Modules), each once, parents first.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    SharedReferenceError: with ``graph=False``, if an object is found at two paths.

  Example:
    >>> import nnx_eqx as nnx
    >>> [type(m).__name__ for _, m in nnx.iter_modules(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))]
    ['Linear']
  """
  w = _walk_for(node, graph, "iter_modules")
  nodes = [(link, n) for link, n in zip(w.node_links, w.nodes) if is_graph_node(n)]
  for i, path in sorted_paths([link for link, _ in nodes], _key_sort_key):
    yield path, nodes[i][1]


# Graph nodes as JAX pytrees: nested, sharing kept (see _pytree_view)
register_pytree = _pytree_view.register_pytree


# GraphDef's seed-era ``merge``/``apply`` methods call back into this module.
# the seed-era GraphDef.merge/apply: a Pure's states are values, never shared
_graphdef.ENGINE.update(merge=functools.partial(merge, copy=True), split=split)

"""The one lifting mechanism shared by every lifted transform.

A lifted transform runs in four steps:

1. :func:`split_args` finds the graph nodes (Modules, Variables) in the call's
   arguments, and :func:`graph.walk` turns them into a GraphDef plus a flat
   list of leaf values (cached while the graph is unchanged, so a repeated
   call only reads the current values).
2. Inside the JAX transform, :func:`call_inner` rebuilds fresh nodes from the
   (traced) leaves, calls the user function, then compares the graph after the
   call with the one before: if only values changed, it returns just the
   leaves that changed (identity of tracers), so unchanged parameters are
   never carried through as outputs; if the structure changed (attributes
   added, modules returned), it returns the new structure and all its leaves.
3. :func:`apply_updates` writes those leaves back into the caller's objects
   — only after the transform returned, so an exception leaves the caller's
   modules exactly as they were.
"""

from __future__ import annotations

import functools
import inspect
import operator
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from ...graph import _version
from ...graph._errors import SharedReferenceError
from ...graph.api import _functional as _graph
from ...graph.api._functional import GraphDef, Walk, is_node, node_impl
from ...graph.tracing._traces import current_trace
from ...graph.variables._variables import Variable
from ...graph.walk import _node_types
from ...module._module import Module
from .._errors import BoundMethodError, CapturedNodeError


class ArgSplit(NamedTuple):
  """Where the graph nodes sit in an argument tuple (hashable, static).

  ``positions`` lists top-level argument indices holding nodes (fast path);
  ``generic`` is set instead when nodes are nested in containers, which then
  hold :class:`Hole` placeholders. ``arg_of_node`` gives, per node, the index
  of the top-level argument holding it, and ``node_paths`` (generic only) its
  key path inside that argument (e.g. ``('kernel',)`` for a Variable of a State).
  """

  positions: tuple
  generic: bool
  arg_of_node: tuple
  node_paths: tuple = ()


_CONTAINERS = (tuple, list, dict)

# Per type: whether its instances are JAX pytree nodes (States, NamedTuples,
# registered classes...), whose leaves may hold Variables. ``None`` is not.
_PYTREE_TYPES: dict = _node_types.type_cache()


def _is_pytree_type(t: type, a: Any) -> bool:
  r = _PYTREE_TYPES.get(t)
  if r is None:
    if t is type(None):
      r = False
    else:
      leaves = jax.tree_util.tree_leaves(a)
      r = not (len(leaves) == 1 and leaves[0] is a)
    _PYTREE_TYPES[t] = r
  return r


def _is_node_leaf(x) -> bool:
  return isinstance(x, Variable) or node_impl(type(x)) is not None


class _TypeSplit(NamedTuple):
  """How to split arguments of given types: the ArgSplit, and C-level getters
  of the node arguments and of the rest (``args + (None,)`` picked so that a
  node's place holds the trailing None)."""

  split: ArgSplit
  nodes: Callable[[tuple], Any]
  rest: Callable[[tuple], Any]


# Per tuple of argument types without containers: whether an argument is a
# node depends on its type alone (a Variable or a registered node type).
_SPLITS: dict = _node_types.type_cache()


def split_args(args: tuple) -> tuple[ArgSplit, tuple, tuple]:
  """Returns ``(argsplit, nodes, rest)``: the nodes found in ``args``, and
  ``args`` with each node replaced by a placeholder."""
  types = tuple(map(type, args))
  ts = _SPLITS.get(types)
  if ts is None:
    ts = _split_of_types(args, types)
    if ts is None:
      return _split_generic(args)
  if not ts.split.positions:
    return ts.split, (), args
  return ts.split, ts.nodes(args), ts.rest(args + (None,))


def _split_of_types(args: tuple, types: tuple) -> _TypeSplit | None:
  """The split for these argument types; None when an argument is a pytree
  (a container with items, a State, ...) that may hold nodes: see
  :func:`_split_generic`."""
  positions = []
  for i, (a, t) in enumerate(zip(args, types)):
    if issubclass(t, Variable) or node_impl(t) is not None:
      positions.append(i)
    elif _is_pytree_type(t, a) and (t not in _CONTAINERS or a):
      return None
  pos = tuple(positions)
  n = len(args)
  ts = _TypeSplit(
    ArgSplit(pos, False, pos) if pos else _EMPTY_SPLIT,
    _getter(pos),
    _getter(tuple(n if i in pos else i for i in range(n))),
  )
  if not any(t in _CONTAINERS for t in types):  # an empty container may fill up later
    _SPLITS[types] = ts
  return ts


def _getter(idx: tuple) -> Callable[[tuple], tuple]:
  """``seq -> tuple(seq[i] for i in idx)``, done by ``operator.itemgetter``."""
  if len(idx) == 1:
    i = idx[0]
    return lambda seq: (seq[i],)
  if not idx:
    return lambda seq: ()
  return operator.itemgetter(*idx)


def _split_generic(args: tuple) -> tuple[ArgSplit, tuple, tuple]:
  """Nodes nested in pytrees (containers, States, ...): each is replaced by a
  :class:`Hole`; an argument holding no node is kept as it is."""
  nodes_l: list = []
  arg_of: list = []
  paths: list = []
  rest_l = []
  for i, a in enumerate(args):
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(a, is_leaf=_is_node_leaf)
    flat = [x for _, x in with_paths]
    found = len(nodes_l)
    for j, (path, x) in enumerate(with_paths):
      if _is_node_leaf(x):
        flat[j] = Hole(len(nodes_l))
        nodes_l.append(x)
        arg_of.append(i)
        paths.append(tuple(map(_plain_key, path)))
    rest_l.append(jax.tree_util.tree_unflatten(treedef, flat) if len(nodes_l) > found else a)
  return ArgSplit((), True, tuple(arg_of), tuple(paths)), tuple(nodes_l), tuple(rest_l)


def _plain_key(k: Any) -> Any:
  """A JAX key-path entry as the key a State uses (``DictKey('a')`` -> ``'a'``)."""
  for attr in ("key", "idx", "name"):
    if hasattr(k, attr):
      return getattr(k, attr)
  return k


def arg_path(split: ArgSplit, path: tuple) -> tuple:
  """The key path, inside its top-level argument, of the object at walk path
  ``path`` (``(node index, *path in the node)``)."""
  if split.generic:
    return split.node_paths[path[0]] + tuple(path[1:])
  return tuple(path[1:])


_EMPTY_SPLIT = ArgSplit((), False, ())


def join_args(split: ArgSplit, rest: tuple, nodes) -> tuple:
  """Inverse of :func:`split_args`: puts ``nodes`` back into ``rest``."""
  if split.generic:
    return tuple(jax.tree_util.tree_map(lambda h: _fill(h, nodes), rest, is_leaf=_is_hole))
  if not split.positions:
    return tuple(rest)
  args = list(rest)
  for i, n in zip(split.positions, nodes):
    args[i] = n
  return tuple(args)


class Updates:
  """What a lifted call changed, returned through the JAX transform.

  As a pytree, ``values`` are its children; ``structure`` (None, or
  ``(graphdef, in_index)`` after a structural change) and ``index`` are
  static aux data.
  """

  __slots__ = ("structure", "index", "values")

  def __init__(self, structure, index: tuple, values: list):
    self.structure, self.index, self.values = structure, index, values


jax.tree_util.register_pytree_node(
  Updates,
  lambda u: (u.values, (u.structure, u.index)),
  lambda aux, vals: Updates(aux[0], aux[1], list(vals)),
)


class Hole:
  """Placeholder for a graph node inside a lifted function's output."""

  __slots__ = ("k",)

  def __init__(self, k: int):
    self.k = k


jax.tree_util.register_pytree_node(Hole, lambda h: ((), h.k), lambda k, _: Hole(k))


def _is_hole(x) -> bool:
  return isinstance(x, Hole)


def _fill(x, nodes):
  return nodes[x.k] if isinstance(x, Hole) else x


def merge_inner(graphdef: GraphDef | None, leaves) -> tuple[tuple, list]:
  """Rebuilds the nodes inside a transform; returns ``(nodes, per-index objects)``."""
  if graphdef is None:
    return (), []
  objs: list = []
  nodes = _graph.unflatten(graphdef, leaves, nodes_out=objs)
  return nodes, objs


def collect_updates(graphdef: GraphDef | None, in_leaves, nodes: tuple, objs: list, out: Any):
  """Compares the graph after the call with the one before (see module doc).

  Returns ``(out, updates)`` where graph nodes in ``out`` are replaced by
  :class:`Hole` placeholders.
  """
  flat, treedef = jax.tree_util.tree_flatten(out, is_leaf=_is_node_leaf)
  w = _graph.walk_uncached(nodes) if graphdef is not None else None
  node_pos = [i for i, x in enumerate(flat) if _is_node_leaf(x)]
  if node_pos:
    # A Variable returned that the input graph does not hold (e.g. a grads
    # State) is plain output data: only Modules and graph Variables keep identity.
    known = {id(o) for o in w.nodes} if w is not None else set()
    node_pos = [i for i in node_pos if not isinstance(flat[i], Variable) or id(flat[i]) in known]
  if not node_pos:
    if w is None:
      return out, Updates(None, (), [])
    if w.graphdef == graphdef and all(map(operator.is_, w.nodes, objs)):
      new = w.leaves()
      changed = tuple(i for i, (a, b) in enumerate(zip(in_leaves, new)) if a is not b)
      return out, Updates(None, changed, [new[i] for i in changed])
  out_nodes = tuple(flat[i] for i in node_pos)
  _check_not_captured(out_nodes, {id(o) for o in objs})
  w = _graph.walk_uncached((nodes, out_nodes))
  id_to_in = {id(o): i for i, o in enumerate(objs)}
  in_index = tuple(id_to_in.get(id(n), -1) for n in w.nodes)
  for k, i in enumerate(node_pos):
    flat[i] = Hole(k)
  out = jax.tree_util.tree_unflatten(treedef, flat)
  return out, Updates((w.graphdef, in_index), tuple(range(len(w.slots))), w.leaves())


def _check_not_captured(out_nodes: tuple, inputs: set) -> None:
  """Raises if an output node is neither an input nor made in this trace.

  Raises:
    CapturedNodeError: naming the node's type and the fix.
  """
  trace = current_trace()
  for n in out_nodes:
    if id(n) in inputs:
      continue
    d = getattr(n, "__dict__", {})
    owner = d.get("_trace", d.get("_nnx_trace", trace))
    if owner != trace:
      raise CapturedNodeError(
        f"Cannot extract graph node from different trace level: the function returned a"
        f" {type(n).__name__} it captured by closure (Cannot return captured Variable or"
        " Module: it was created outside the transform and not passed in). Fix: pass it"
        " as an argument, or return a copy of its values."
      )


def call_inner(
  fn: Callable,
  graphdef,
  split: ArgSplit,
  leaves,
  rest: tuple,
  *,
  before: Callable | None = None,
  after: Callable | None = None,
  values_only: bool = False,
  name: str = "transform",
  no_alias: bool | None = None,
  share_out: bool = False,
):
  """Rebuilds nodes, calls ``fn`` and collects updates: ``(out, updates)``.

  Optional hooks let a transform adjust the rebuilt graph: ``before(nodes)``
  runs before ``fn`` (e.g. to drop a mapped axis from sharding metadata) and
  ``out = after(nodes, out)`` runs after it, before updates are collected.
  With ``values_only`` (flax's ``graph_updates=False``) only new values of the
  Variables passed in are collected: structural changes are dropped, and
  Modules in ``out`` are plain pytree data (no identity with the inputs), so
  ``out`` may not hold a Variable passed in (see :func:`check_no_output_alias`;
  ``name`` is the transform's, for the message). ``no_alias`` (default:
  ``values_only``) makes that check alone. With ``share_out``, Modules made
  inside and returned keep their sharing (as flax.nnx.jit's): then updates
  are collected as without ``values_only``.
  """
  nodes, objs = merge_inner(graphdef, leaves)
  if before is not None:
    before(nodes)
  args = join_args(split, rest, nodes)
  no_alias = values_only if no_alias is None else no_alias
  walk_before = (values_only or no_alias) and graphdef is not None
  w0 = _graph.walk_uncached(nodes) if walk_before else None
  out = fn(*args)
  if no_alias and w0 is not None:
    check_no_output_alias(w0, out, name, split.arg_of_node)
  if after is not None:
    out = after(nodes, out)
  if values_only and not (share_out and _holds_nodes(out)):
    if w0 is None:
      return out, Updates(None, (), [])
    new = w0.leaves()
    changed = tuple(i for i, (a, b) in enumerate(zip(leaves, new)) if a is not b)
    return out, Updates(None, changed, [new[i] for i in changed])
  return collect_updates(graphdef, leaves, nodes, objs, out)


def _holds_nodes(out: Any) -> bool:
  return any(map(_is_node_leaf, jax.tree_util.tree_leaves(out, is_leaf=_is_node_leaf)))


def check_no_output_alias(w: Walk, out: Any, name: str, arg_of_node: tuple) -> None:
  """Raises if ``out`` holds (at any depth) a Variable of the walked inputs.

  Without graph updates an output is plain pytree data: a returned input
  Variable would come back as a second, unrelated copy (flax.nnx refuses it
  too, as "Duplicate <Variable>").

  Raises:
    SharedReferenceError: (a ``ValueError``) naming the input and output paths.
  """
  first = {id(n): p for n, p in zip(w.nodes, w.node_paths) if isinstance(n, Variable)}
  for path, x in jax.tree_util.tree_leaves_with_path(out, is_leaf=_is_node_leaf):
    if not _is_node_leaf(x):
      continue
    inner = [(x, ())] if isinstance(x, Variable) else _variables_of(x)
    for var, sub in inner:
      if id(var) in first:
        at = "/".join(map(str, first[id(var)][1:])) or "<root>"
        out_at = (jax.tree_util.keystr(path) or "<root>") + "".join(f".{k}" for k in sub)
        raise SharedReferenceError(
          f"nnx.{name}: Duplicate {type(var).__name__} found at paths: argument"
          f" {arg_of_node[first[id(var)][0]]} at {at}, and the output at {out_at}."
          f" nnx.{name} with graph_updates=False does not support Variable aliasing"
          " (duplicate inputs or outputs, or input Variables returned as outputs). Fix:"
          " return a copy (nnx.clone), or use graph=True, graph_updates=True so outputs"
          " keep their identity."
        )


def _variables_of(node: Any) -> list:
  """``(variable, path)`` of each Variable reachable from a graph node."""
  w = _graph.walk_uncached(node)
  return [(n, p) for n, p in zip(w.nodes, w.node_paths) if isinstance(n, Variable)]


def check_no_input_alias(w: Walk | None, split: ArgSplit, name: str) -> None:
  """Raises if the walked arguments reach one object by two paths (for a
  transform without graph updates, as flax.nnx's "Duplicate <Variable>").

  Raises:
    SharedReferenceError: (a ``ValueError``) naming both paths.
  """
  if w is None or w.shared is None:
    return
  first, second, obj = w.shared

  def fmt(p: tuple) -> str:
    return f"argument {split.arg_of_node[p[0]]} at {'/'.join(map(str, p[1:])) or '<root>'}"

  raise SharedReferenceError(
    f"nnx.{name}: Duplicate {type(obj).__name__} found at paths: {fmt(first)}, and"
    f" {fmt(second)}. nnx.{name} with graph_updates=False does not support Variable"
    " aliasing (duplicate inputs or outputs, or input Variables returned as outputs)."
    " Fix: pass each Variable once (or a copy made with nnx.clone), or use graph=True,"
    " graph_updates=True."
  )


def apply_updates(w: Walk | None, updates: Updates, out: Any) -> Any:
  """Writes updates into the caller's objects and fills output placeholders."""
  if updates.structure is None:
    if updates.index:
      w.set_leaves(updates.index, updates.values)  # type: ignore[union-attr]
    return out
  g2, in_index = updates.structure
  old = w.nodes if w is not None else []
  reuse = {j: old[i] for j, i in enumerate(in_index) if i >= 0}
  _, out_nodes = _graph.unflatten(g2, updates.values, reuse=reuse)
  _version.bump()
  return jax.tree_util.tree_map(lambda h: _fill(h, out_nodes), out, is_leaf=_is_hole)


def prepare(args: tuple):
  """Step 1 for a call: ``(argsplit, walk or None, leaves, rest)``."""
  split, nodes, rest = split_args(args)
  if not nodes:
    return split, None, [], rest
  w = _graph.walk(nodes)
  return split, w, w.leaves(), rest


def _no_walk() -> None:
  return None


class LastCall:
  """A transform's previous call, for the fast path of the next one.

  When the next call passes arguments of the same types, the same node
  objects, and no structural change happened anywhere in between (the global
  version is unchanged), its split and walk are those of the previous call:
  only the current leaf values are read. The walk is held weakly, so this
  keeps no model alive.
  """

  __slots__ = ("types", "ts", "walk", "extra")

  def __init__(self):
    self.types: tuple | None = None
    self.ts: _TypeSplit | None = None
    self.walk: Callable[[], Walk | None] = _no_walk
    self.extra: Any = None

  def prepare(self, args: tuple, make_extra: Callable[[tuple, ArgSplit, Walk | None], Any]):
    """:func:`prepare` plus ``extra = make_extra(args, split, walk)``, which is kept
    with the call: ``(argsplit, walk or None, leaves, rest, extra)``."""
    types = tuple(map(type, args))
    if types == self.types:
      w = self.walk()
      if w is not None and w.epoch == _version._epoch[0]:
        ts = self.ts
        if all(map(operator.is_, ts.nodes(args), w.refs)):  # type: ignore[union-attr]
          return ts.split, w, w.leaves(), ts.rest(args + (None,)), self.extra  # type: ignore[union-attr]
    split, w, leaves, rest = prepare(args)
    extra = make_extra(args, split, w)
    ts = _SPLITS.get(types)
    if ts is not None and w is not None:
      self.types, self.ts, self.walk, self.extra = types, ts, weakref.ref(w), extra
    return split, w, leaves, rest, extra


def reject_bound_method(fn: Callable, name: str) -> None:
  """Raises if ``fn`` (possibly inside ``functools.partial``) is a Module's bound method.

  A bound method closes over its Module, so the transform could not lift it:
  its state would enter as constants and updates would be lost.

  Raises:
    BoundMethodError: (a ValueError) naming the method and the fix.
  """
  g = fn
  while isinstance(g, functools.partial):
    g = g.func
  if inspect.ismethod(g) and isinstance(g.__self__, Module):
    owner = type(g.__self__).__name__
    method = g.__func__.__name__
    raise BoundMethodError(
      f"{name} does not support bound methods (got {owner}.{method} bound to an instance)."
      f" Fix: decorate the method inside the class (@{name}), or transform the unbound"
      f" {owner}.{method} and pass the module as its first argument."
    )


def leaf_arg_index(w: Walk, split: ArgSplit) -> list[int]:
  """Per leaf, the index of the top-level argument it belongs to."""
  return [split.arg_of_node[p[0]] for p in w.paths]


__all__ = [
  "ArgSplit",
  "Updates",
  "split_args",
  "join_args",
  "prepare",
  "LastCall",
  "call_inner",
  "collect_updates",
  "apply_updates",
  "merge_inner",
  "leaf_arg_index",
  "reject_bound_method",
  "is_node",
]

"""The walk of ``nnx.to_eqx``: convert a subgraph bottom-up with an explicit stack.

Converters call ``ctx.child``, which converts the child before returning, so a
chain of N modules would nest N converter calls. Instead, every graph node that
``ToEqxContext`` meets for the first time goes through :func:`convert_below`,
which walks the subgraph below it with its own stack and converts its modules
in post-order: when a module's converter runs, the modules it holds are
already converted (and cached), so each converter call returns without going
deeper. It is the one path, for shallow and deep graphs alike.

The walk enters the modules whose every attribute the conversion converts: NNX
modules without a registered converter (generic conversion), ``nnx.List`` /
``nnx.Dict``, and modules made from Equinox (their non-static fields). A module
with a registered converter is converted when its turn comes; its own children
are left to it (a converter may skip an attribute, e.g. a Dropout's ``rngs``),
and each child it converts starts a walk of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...graph.api._functional import is_graph_node
from ...graph.variables._variables import Variable
from ...graph.walk._links import path_of
from ...module._containers import Dict, List
from .._errors import CycleError
from . import _registry
from ._context import impl_of
from ._eqx_state import EqxState, fmt_path
from ._iter import KeyPath, container_items


def cycle_error(path: Any, ancestor: Any) -> CycleError:
  """The error for a module at ``path`` that refers back to one it is inside of."""
  return CycleError(
    f"nnx.to_eqx: the graph has a reference cycle: {fmt_path(tuple(path))} refers back"
    f" to its ancestor {fmt_path(tuple(ancestor))}, and an Equinox pytree"
    " cannot contain cycles. Fix: break the cycle before converting (e.g."
    " delete the back-reference attribute and restore it afterwards)."
  )


def _structural(node: Any) -> bool:
  t = type(node)
  return t is List or t is Dict or _registry.lookup_to_eqx(t) is None


def _attributes(node: Any, state_types: tuple | None) -> tuple[list, tuple | None]:
  """The ``(key, value)`` attributes the conversion of ``node`` converts, in its
  order, and the ``state_types`` it converts them with."""
  t = type(node)
  items = list(impl_of(t).children(node))
  if t is List or t is Dict:
    return items, state_types
  eqx_type = getattr(t, "eqx_type", None)  # an nnx.bridge.EqxModule (made by _generic)
  if eqx_type is not None:
    d = dict(items)
    fields = dataclasses.fields(eqx_type)
    keep = [f.name for f in fields if f.name in d and not f.metadata.get("static", False)]
    return [(k, d[k]) for k in keep], (EqxState,)
  return items, None


def _nodes_in(value: Any) -> list:
  """``(keys, node)`` for the graph nodes in ``value`` (through tuples, lists and
  dicts, as the conversion goes), in the conversion's order."""
  out: list = []
  todo: list = [(None, value)]
  while todo:
    link, x = todo.pop()
    if isinstance(x, Variable):
      continue
    if is_graph_node(x):
      out.append((path_of(link), x))
      continue
    items = container_items(x, jax_keys=False)
    if items:
      todo.extend(((link, k), c) for k, c in reversed(items))
  return out


def convert_below(ctx: Any, root: Any, path: tuple, state_types: tuple | None) -> None:
  """Converts ``root`` (a graph node not converted yet, found at ``path``) and the
  modules below it, deepest first, into ``ctx``'s cache. Their paths are
  :class:`KeyPath` objects, which cost O(1) to extend.

  Raises:
    CycleError: a module refers back to one it is inside of (both paths named).
  """
  root_path = KeyPath(path, ())
  open_: dict[int, KeyPath] = {id(root): root_path}
  stack: list[list] = [[root, root_path, state_types, _children(root, state_types), 0]]
  while stack:
    frame = stack[-1]
    node, at, st, children, i = frame
    if i < len(children):
      frame[4] = i + 1
      rel, child, child_st = children[i]
      cid = id(child)
      if cid in ctx._nodes:
        continue
      ancestor = open_.get(cid)
      if ancestor is None:  # (a KeyPath: the root's is empty, so falsy)
        ancestor = ctx._stack.get(cid)
      if ancestor is not None:
        raise cycle_error(at + rel, ancestor)
      child_at = at + rel
      open_[cid] = child_at
      stack.append([child, child_at, child_st, _children(child, child_st), 0])
      continue
    stack.pop()
    del open_[id(node)]
    ctx.convert_node(node, at, st)


def _children(node: Any, state_types: tuple | None) -> list:
  """``(keys, child, state_types)`` of the graph nodes the walk enters below ``node``."""
  if not _structural(node):
    return []
  attrs, child_st = _attributes(node, state_types)
  out = []
  for k, v in attrs:
    for rel, child in _nodes_in(v):
      out.append(((k, *rel), child, child_st))
  return out

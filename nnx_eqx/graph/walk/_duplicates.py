"""``find_duplicates``: every path of each object reachable more than once."""

from __future__ import annotations

from typing import Any

from ..state._filters import Filter, to_predicate
from ..variables._variables import Variable
from ._node_types import MAP, NODE, REF, SEQ, VAR, node_impl
from ._walk import walk


def _occurrences(defn: tuple) -> dict[int, list[tuple]]:
  """Node index -> the paths where the GraphDef's definition reaches it, in walk order."""
  out: dict[int, list[tuple]] = {}
  stack: list[tuple[tuple, tuple]] = [((), defn)]
  while stack:
    path, d = stack.pop()
    tag = d[0]
    if tag in (NODE, VAR, REF):
      out.setdefault(d[2] if tag != REF else d[1], []).append(path)
    if tag == NODE:
      stack.extend(((*path, k), sub) for k, sub in reversed(d[3]))
    elif tag == SEQ:
      stack.extend(((*path, j), sub) for j, sub in reversed(list(enumerate(d[2]))))
    elif tag == MAP:
      stack.extend(((*path, k), sub) for k, sub in reversed(d[2]))
  return out


def find_duplicates(node: Any, /, *, only: Filter = ...) -> list[list[tuple]]:
  """The paths of every Module or Variable reachable from ``node`` by more than one path.

  Args:
    node: a graph node (or a container of them).
    only: a filter on ``(path, object)``; a repeated path is listed only if
      it matches (the first path is always listed).

  Returns:
    One list of paths per shared object, first path first, in walk order.

  Raises:
    UnknownFilterError: if ``only`` is not a valid filter.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Module()
    >>> m.a = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
    >>> m.c = m.a
    >>> nnx.find_duplicates(m)
    [[('a',), ('c',)]]
  """
  pred = to_predicate(only)
  w = walk(node, leaf_root=True)
  dups = []
  for i, paths in sorted(_occurrences(w.graphdef.defn).items()):
    kept = paths[:1] + [p for p in paths[1:] if pred(p, w.nodes[i])]
    if len(kept) > 1:
      dups.append(kept)
  return dups


def shared_variable_paths(defn: tuple) -> dict[int, list[tuple]]:
  """Node index -> every path of each Variable reachable by more than one path.

  Paths through shared Modules count: a Variable inside a Module reached at
  ``a`` and ``b`` has paths ``a/...`` and ``b/...``. ``defn`` is a GraphDef's
  definition; the result is empty (cheaply) when nothing is shared.
  """
  occ = _occurrences(defn)
  if all(len(p) < 2 for p in occ.values()):
    return {}
  defs: dict[int, tuple] = {}
  stack = [defn]
  while stack:
    d = stack.pop()
    if d[0] in (NODE, VAR):
      defs[d[2]] = d
    if d[0] == NODE:
      stack.extend(sub for _, sub in d[3])
    elif d[0] == SEQ:
      stack.extend(d[2])
    elif d[0] == MAP:
      stack.extend(sub for _, sub in d[2])
  found: dict[int, list[tuple]] = {}
  active: set[int] = set()

  def visit(d: tuple, path: tuple) -> None:
    tag = d[0]
    if tag == REF:
      d = defs.get(d[1], d)  # (a raw jax.Ref repeated: no Variable)
      tag = d[0]
    if tag == VAR:
      found.setdefault(d[2], []).append(path)
    elif tag == NODE and d[2] not in active:  # (a cycle ends at the repeated node)
      active.add(d[2])
      for k, sub in d[3]:
        visit(sub, (*path, k))
      active.discard(d[2])
    elif tag == SEQ:
      for j, sub in enumerate(d[2]):
        visit(sub, (*path, j))
    elif tag == MAP:
      for k, sub in d[2]:
        visit(sub, (*path, k))

  visit(defn, ())
  return {i: p for i, p in found.items() if len(p) > 1}


def variable_paths(root: Any) -> list[tuple[tuple, Any]]:
  """``(path, Variable)`` for every path from ``root`` to a Variable, repeats
  included (through shared Modules too; a cycle is followed once)."""
  out: list[tuple[tuple, Any]] = []
  active: set[int] = set()

  def visit(x: Any, path: tuple) -> None:
    if isinstance(x, Variable):
      out.append((path, x))
      return
    impl = node_impl(type(x))
    if impl is None or id(x) in active:
      return
    active.add(id(x))
    for k, v in impl.children(x):
      visit(v, (*path, k))
    active.discard(id(x))

  visit(root, ())
  return out


def variables_with_paths(node: Any) -> list[tuple[Variable, list[tuple]]]:
  """Each Variable of ``node`` once, in walk order, with every path that reaches it
  (through containers and shared Modules too), first path first."""
  w = walk(node, leaf_root=True)
  shared = shared_variable_paths(w.graphdef.defn)
  out = []
  for i, paths in _occurrences(w.graphdef.defn).items():
    obj = w.nodes[i]
    if isinstance(obj, Variable):
      out.append((obj, shared.get(i, paths[:1])))
  return out

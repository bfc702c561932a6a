"""``find_duplicates``: every path of each object reachable more than once."""

from __future__ import annotations

from typing import Any

from ._filters import Filter, to_predicate
from ._node_types import MAP, NODE, REF, SEQ, VAR
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

"""Random NNX module graphs' parts, and graph comparison helpers.

``all_paths``, ``sharing_classes`` and ``same_graph`` compare module graphs
(paths, aliasing, GraphDefs and leaves); ``VARIABLE_TYPES`` and ``DTYPES`` are
what the ``graphs()`` strategy (in ``_graph_strategies``, which needs
hypothesis) draws from. Nothing here needs hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..graph.api import _functional as _graph
from ..graph.variables._variables import BatchStat, Cache, Intermediate, Param, Variable
from ..module._module import Module
from ._helpers import tree_allclose


class Node(Module):
  """A plain Module used as a random graph's node."""


class Counter(Variable):
  """A user Variable subclass, to exercise type dispatch."""


VARIABLE_TYPES: tuple[type, ...] = (Param, BatchStat, Cache, Intermediate, Variable, Counter)
"""The Variable types ``graphs`` draws from: the built-in ones and a user-defined subclass."""
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "int32", "uint8", "bool")


def all_paths(node: Any) -> Iterator[tuple[tuple, Any]]:
  """Yields ``(path, object)`` for every path to every node and Variable
  (shared objects appear once per path; cycles are not followed twice)."""
  on_stack: set[int] = set()  # ancestors of the current object (explicit stack: any depth)
  done = object()
  stack: list = [(node, ())]
  while stack:
    v, path = stack.pop()
    if v is done:
      on_stack.discard(path)
      continue
    if isinstance(v, Variable) or _graph.is_graph_node(v):
      yield path, v
      impl = _graph.node_impl(type(v))
      if impl is None or id(v) in on_stack:
        continue
      on_stack.add(id(v))
      stack.append((done, id(v)))
      stack.extend((e, path + (k,)) for k, e in reversed(list(impl.children(v))))
    elif isinstance(v, (tuple, list)):
      stack.extend((e, path + (j,)) for j, e in reversed(list(enumerate(v))))
    elif isinstance(v, dict):
      stack.extend((e, path + (k,)) for k, e in reversed(list(v.items())))
    elif not path:
      yield path, v


def sharing_classes(node: Any) -> set[frozenset]:
  """The partition of all paths by object identity (which paths alias)."""
  groups: dict[int, set] = {}
  for path, obj in all_paths(node):
    groups.setdefault(id(obj), set()).add(path)
  return {frozenset(g) for g in groups.values()}


def same_graph(a: Any, b: Any) -> bool:
  """True if two graphs have equal GraphDefs, the same sharing, and bitwise
  equal leaves with equal dtypes and Variable metadata."""
  wa, wb = _graph.walk_uncached(a), _graph.walk_uncached(b)
  # Equal GraphDefs have equal sharing: a repeat of a node or Variable is a
  # reference to its first index (unlike ``sharing_classes``, which lists every
  # path to every object, this costs nothing more for deep graphs).
  if wa.graphdef != wb.graphdef:
    return False
  for sa, sb in zip(wa.slots, wb.slots):
    if type(sa) is not type(sb):
      return False
    if isinstance(sa, Variable) and sa._metadata != sb._metadata:
      return False
  return tree_allclose(wa.leaves(), wb.leaves())

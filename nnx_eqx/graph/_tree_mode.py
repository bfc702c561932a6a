"""Tree mode (``graph=False``): graphs must be plain pytrees.

In tree mode a graph is treated like a JAX pytree, so each Variable and
Module may appear at one path only and there are no cycles. The walk records
the first repeated reference it meets; :func:`check_tree_mode` turns it into
an error naming both paths.
"""

from __future__ import annotations

import jax

from ._errors import SharedReferenceError
from ._node_types import STATIC
from ._variables import Variable
from ._walk import Walk


def _fmt(path: tuple) -> str:
  return "/".join(map(str, path)) or "<root>"


def _raise(fn_name: str, kind: str, first: tuple, second: tuple, what: str) -> None:
  raise SharedReferenceError(
    f"nnx.{fn_name}(graph=False): the same {kind} object is found at paths"
    f" {_fmt(first)} and {_fmt(second)} ({what}). Tree mode does not support shared"
    " references or cycles: it treats the graph as a plain pytree. Fix: use graph mode"
    f" (`nnx.{fn_name}(..., graph=True)`, or outside `nnx.set_graph_mode(False)`), or"
    " give each path its own object."
  )


def check_shared_refs(w: Walk, fn_name: str) -> None:
  """Raises if a graph without nodes (a plain container) holds one
  ``jax.Ref`` at two paths (the walk keeps such containers static).

  Raises:
    SharedReferenceError: naming both paths.
  """
  if w.nodes or not w.graphdef.defn or w.graphdef.defn[0] != STATIC:
    return
  seen: dict[int, tuple] = {}
  for jax_path, leaf in jax.tree_util.tree_leaves_with_path(w.graphdef.defn[1].value):
    if isinstance(leaf, jax.Ref):
      path = tuple(getattr(k, "idx", getattr(k, "key", getattr(k, "name", k))) for k in jax_path)
      if id(leaf) in seen:
        _raise(fn_name, "Ref", seen[id(leaf)], path, "a shared reference")
      seen[id(leaf)] = path


def check_tree_mode(w: Walk, fn_name: str) -> None:
  """Raises if the walked graph shares an object or has a cycle.

  Args:
    w: the walk of the graph.
    fn_name: the API function, for the message (e.g. ``"split"``).

  Raises:
    SharedReferenceError: (a ``ValueError``) naming the path of the first
      occurrence and of the repeated one.
  """
  if w.shared is None:
    check_shared_refs(w, fn_name)
    return
  first, second, obj = w.shared
  kind = "Variable" if isinstance(obj, Variable) else type(obj).__name__
  cycle = second[: len(first)] == first
  _raise(fn_name, kind, first, second, "a reference cycle" if cycle else "a shared reference")

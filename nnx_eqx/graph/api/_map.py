"""``nnx.map``: a copy of a graph with every leaf replaced by ``f(path, leaf)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..state._state import State
from ..walk import _graph_mode
from ..walk._tree_mode import check_tree_mode
from ..walk._walk import unflatten, walk
from ._functional import merge, split
from ._prefix import without_variables


def map_leaves(
  f: Callable[[tuple, Any], Any],
  node: Any,
  /,
  *,
  graph: bool | None = None,
  recreate_variables: bool = True,
) -> Any:
  """A new graph like ``node`` whose leaves are ``f(path, leaf)``.

  ``node`` is split, ``f`` is applied to each ``(path, leaf)`` of its State
  (leaves are copies of the Variables, or raw arrays), and the results are
  merged back: a raw value returned for a Variable becomes that Variable's
  new value, a Variable returned replaces it. ``node`` is left unchanged.

  Args:
    f: ``(path, leaf) -> new leaf``.
    node: a graph node (or a Variable, or a container of them).
    graph: False for tree mode (no shared references or cycles allowed).
    recreate_variables: False puts ``f``'s results in place of the Variables
      as they are (raw values stay raw) instead of making Variables of them.

  Returns:
    The new graph (same structure and sharing as ``node``).

  Raises:
    SharedReferenceError: in tree mode, if an object is found at two paths.
    GraphStructureError: with ``recreate_variables=False``, if a Variable is
      reachable by two paths.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> zeros = nnx.map(lambda path, v: jnp.zeros_like(v), model)
    >>> float(abs(zeros.kernel.value).sum()), zeros is model
    (0.0, False)
  """
  if not _graph_mode.resolve(graph)[0]:
    check_tree_mode(walk(node, leaf_root=True), "map")
  graphdef, state = split(node)
  if not isinstance(state, State):  # a split Variable or value is its own state
    return merge(graphdef, f((), state))
  mapped = {p: f(p, leaf) for p, leaf in state.to_flat_dict().items()}
  if not recreate_variables:
    return unflatten(without_variables(graphdef), [mapped[p] for p in graphdef.paths])
  return merge(graphdef, State.from_flat_path(mapped.items()))

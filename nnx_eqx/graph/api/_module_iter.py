"""``nnx.iter_modules`` as flax.nnx: the Modules of a graph, children first.

The engine's :func:`._graph.iter_modules` lists every graph node (the
``nnx.List``/``nnx.Dict`` containers and RNG streams included, parents first),
which the engine's own passes need; this one yields what flax.nnx yields.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..walk._node_types import is_graph_node
from ._functional import _iter_walk, _walk_for


def iter_modules(node: Any, *, graph: bool = True) -> Iterator[tuple[tuple, Any]]:
  """Yields ``(path, module)`` for every Module of ``node``, each once, in
  flax.nnx's order (children before their parent, keys sorted; the root last).

  The ``nnx.List``/``nnx.Dict`` containers that lists and dicts of Modules
  become, and ``Rngs``/RNG streams, are not yielded (flax keeps plain lists and
  its Rngs are not Modules); the Modules inside containers are.

  Raises:
    WrongLibraryError: if ``node`` is an ``eqx.Module`` or a flax.nnx Module (convert it
      with ``nnx.from_eqx`` / ``nnx.from_flax``).
    SharedReferenceError: with ``graph=False``, if an object is found at two paths.

  Example:
    >>> import nnx_eqx as nnx
    >>> class Block(nnx.Module):
    ...   def __init__(self, rngs):
    ...     self.layers = [nnx.Linear(1, 1, rngs=rngs), nnx.Linear(1, 1, rngs=rngs)]
    ...     self.drop = nnx.Dropout(0.5, rngs=rngs)
    >>> [(p, type(m).__name__) for p, m in nnx.iter_modules(Block(nnx.Rngs(0)))]
    [(('drop',), 'Dropout'), (('layers', 0), 'Linear'), (('layers', 1), 'Linear'), ((), 'Block')]
  """
  return _modules(_walk_for(node, graph, "iter_modules"))  # (checked before the first next)


def _modules(w: Any) -> Iterator[tuple[tuple, Any]]:
  for path, n in _iter_walk(w):
    if is_graph_node(n) and not getattr(type(n), "_nnx_skip_iter_modules", False):
      yield path, n

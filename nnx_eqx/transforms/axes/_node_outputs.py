"""Modules and Variables created inside a scan body and returned as stacked outputs.

A scan body may build new graph nodes (e.g. one layer per step, as flax.nnx
allows): their leaves are returned as ordinary stacked outputs and, after
the scan, one node of the same structure is rebuilt holding the stacked
arrays (the scanned axis where ``out_axes`` puts it).
"""

from __future__ import annotations

from typing import Any

import jax

from ...graph.api import _functional as _graph
from .._errors import AxisSpecError
from ..lifting import _lift
from ._specs import broadcast_prefix, resolve


class NewNode:
  """Placeholder for the ``k``-th new node among a body's stacked outputs
  (a pytree without leaves)."""

  __slots__ = ("k",)

  def __init__(self, k: int):
    self.k = k


jax.tree_util.register_pytree_node(NewNode, lambda n: ((), n.k), lambda k, _: NewNode(k))


class NewNodes:
  """The new graph nodes among the stacked outputs ``ys`` of one traced step.

  Attributes:
    ys: ``(ys with NewNode placeholders, the new nodes' leaf values)``.
    ys_prefix: the out axes of ``ys`` (one per leaf of the new nodes).

  Raises:
    AxisSpecError: an output node was passed in (or holds state passed in):
      only the carry may return the inputs' objects.
  """

  def __init__(self, inputs: Any, ys: Any, ys_prefix: Any, transform: str):
    known = {id(o) for o in _graph.walk_uncached(tuple(inputs)).nodes} if inputs else set()
    flat, tree = jax.tree_util.tree_flatten(ys, is_leaf=_lift._is_node_leaf)
    specs = broadcast_prefix(ys_prefix, ys, "out_axes")
    nodes: list = []
    node_specs: list = []
    marked = []
    for x, spec in zip(flat, specs):
      if _lift._is_node_leaf(x):
        marked.append(NewNode(len(nodes)))
        nodes.append(x)
        node_specs.append(spec)
      else:
        marked.append(x)
    w = _graph.walk_uncached(tuple(nodes))
    for i, o in enumerate(w.nodes):
      if id(o) in known:
        path = w.node_paths[i]
        raise AxisSpecError(
          f"{transform} does not support Variable aliasing between inputs and stacked"
          f" outputs: the stacked output {'/'.join(map(str, path))} is a {type(o).__name__}"
          " passed in to the body. Fix: return objects passed in through the carry"
          " (nnx.Carry); stacked outputs must be created by the body."
        )
    self.graphdef = w.graphdef
    axes = [
      resolve(node_specs[p[0]], p[1:], o, "out_axes") for p, o in zip(w.paths, w.leaf_objects())
    ]
    self.ys = (jax.tree_util.tree_unflatten(tree, marked), list(w.leaves()))
    self.ys_prefix = (ys_prefix, axes)

  def rebuild(self, ys: Any) -> Any:
    """The stacked outputs with the new nodes rebuilt from their stacked leaves."""
    marked, leaves = ys
    nodes = _graph.unflatten(self.graphdef, leaves)
    return jax.tree_util.tree_map(
      lambda x: nodes[x.k] if isinstance(x, NewNode) else x,
      marked,
      is_leaf=lambda x: isinstance(x, NewNode),
    )

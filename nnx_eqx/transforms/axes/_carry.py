"""Loop carries of lifted scan, cond and loops.

State that a body leaves unchanged stays a closed-over constant, as in a
hand-written loop. Which leaves change is only known once the body has been
traced, so a body that changes a leaf that is not yet carried raises
:class:`Promote`; the transform then traces again with that leaf carried
(at most once more per newly found leaf set). Modules in a carry are
replaced by :class:`NodeRef` placeholders (their state travels as state).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ...graph.walk._node_types import NODE, REF, SEQ, VAR
from .._errors import CarryIdentityError, CarryMismatchError
from ..lifting import _lift


class Promote(Exception):
  """Raised inside a traced body: the leaves ``indices`` changed and must be carried."""

  def __init__(self, indices: frozenset):
    super().__init__(sorted(indices))
    self.indices = indices


class NodeRef:
  """Placeholder for the ``k``-th input graph node inside a carry."""

  __slots__ = ("k",)

  def __init__(self, k: int):
    self.k = k

  def __eq__(self, other):
    return isinstance(other, NodeRef) and other.k == self.k

  def __hash__(self):
    return hash(("NodeRef", self.k))


jax.tree_util.register_pytree_node(NodeRef, lambda r: ((), r.k), lambda k, _: NodeRef(k))


def _is_ref(x) -> bool:
  return isinstance(x, NodeRef)


def mark_nodes(tree: Any, nodes: tuple, where: str) -> Any:
  """Replaces graph nodes in ``tree`` by ``NodeRef`` of their index in ``nodes``.

  Raises:
    CarryIdentityError: a node in ``tree`` is not one of ``nodes``.
  """
  index: dict[int, int] = {}
  for k, n in enumerate(nodes):
    index.setdefault(id(n), k)  # a node passed twice is known by its first place

  def mark(x):
    if not _lift._is_node_leaf(x):
      return x
    k = index.get(id(x))
    if k is None:
      raise CarryIdentityError(
        f"{where} holds a {type(x).__name__} that is not one of the Modules passed in:"
        " Carry references must be the same between iterations (scan Variable identity"
        " must be preserved across iterations). Fix: return the same Module objects that"
        " were passed as the carry, updated in place (their state is carried for you)."
      )
    return NodeRef(k)

  return jax.tree_util.tree_map(mark, tree, is_leaf=_lift._is_node_leaf)


def first_places(graphdef: Any, n: int) -> list[int]:
  """Per input node ``k`` (of ``n``), the first place the same object takes
  among the inputs (``k`` itself unless the node was passed before)."""
  d = graphdef.defn if graphdef is not None else None
  if not d or d[0] != SEQ:
    return list(range(n))
  owner: dict[int, int] = {}
  out = []
  for j, sub in enumerate(d[2]):
    if sub[0] == REF:
      out.append(owner.get(sub[1], j))
      continue
    if sub[0] in (NODE, VAR):
      owner[sub[2]] = j
    out.append(j)
  return out


def fill_refs(tree: Any, nodes: tuple) -> Any:
  """Puts ``nodes[k]`` where ``NodeRef(k)`` is."""
  return jax.tree_util.tree_map(
    lambda x: nodes[x.k] if isinstance(x, NodeRef) else x, tree, is_leaf=_is_ref
  )


def has_refs(tree: Any) -> bool:
  return any(isinstance(x, NodeRef) for x in jax.tree_util.tree_leaves(tree, is_leaf=_is_ref))


def aval(x) -> tuple:
  return (tuple(np.shape(x)), jax.numpy.result_type(x) if not hasattr(x, "dtype") else x.dtype)


def check_same(new: list, old: list, names: list[str], transform: str) -> None:
  """Raises if a carried value changed shape or dtype across a step."""
  for a, b, name in zip(new, old, names):
    if aval(a) != aval(b):
      (sa, da), (sb, db) = aval(b), aval(a)
      raise CarryMismatchError(
        f"{transform}: {name} enters a step with shape {sa} and dtype {da} but"
        f" leaves it with shape {sb} and dtype {db}. Fix: keep its shape and dtype"
        " (cast with .astype, or initialise it with the shape it will have)."
      )


def check_tree(new_def, old_def, where: str, transform: str) -> None:
  if new_def != old_def:
    raise CarryMismatchError(
      f"{transform}: the {where} changed structure across a step: it enters as {old_def}"
      f" and leaves as {new_def}. Fix: return a carry with the same structure."
    )

"""Read-only views of a GraphDef's nodes, named as in flax's ``graphlib``.

A GraphDef keeps its structure as one nested definition tuple (see
``_node_types``). ``GraphDef.nodes`` lists its identity-tracked objects in
walk order through these small records: a :class:`NodeDef` for each graph
node, a :class:`VariableDef` for each Variable, a :class:`NodeRef` for each
repeated reference; a GraphDef made in tree mode has a single
:class:`TreeNodeDef`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._node_types import MAP, NODE, REF, SEQ, VAR


@dataclasses.dataclass(frozen=True)
class NodeDef:
  """A graph node (a Module or registered node type) in a GraphDef.

  Attributes:
    type: the node's class.
    index: its index among the GraphDef's nodes.
    attributes: the keys of its children, in walk order.
  """

  type: type
  index: int
  attributes: tuple


@dataclasses.dataclass(frozen=True)
class VariableDef:
  """A Variable in a GraphDef.

  Attributes:
    type: the Variable's class (e.g. ``nnx.Param``).
    index: its index among the GraphDef's nodes.
    metadata: its metadata (a dict).
  """

  type: type
  index: int
  metadata: dict = dataclasses.field(compare=False)


@dataclasses.dataclass(frozen=True)
class NodeRef:
  """A second reference to a node or Variable already in the GraphDef.

  Attributes:
    index: the index of the referenced node.
  """

  index: int


@dataclasses.dataclass(frozen=True)
class TreeNodeDef:
  """A GraphDef made in tree mode (``graph=False``): a plain pytree structure.

  Attributes:
    type: the root's class.
    path_index: ``(path, leaf index)`` for every leaf, in (sorted) walk order.
  """

  type: type
  path_index: tuple


def node_views(defn: tuple, metadata_of: Any) -> list:
  """The records of ``defn``'s nodes, Variables and references, in walk order.

  ``metadata_of`` turns a Variable's metadata definition into a dict.
  """
  out: list = []
  stack = [defn]
  while stack:
    d = stack.pop()
    tag = d[0]
    if tag == NODE:
      _, cls, i, attrs, _meta = d
      out.append(NodeDef(cls, i, tuple(k for k, _ in attrs)))
      stack.extend(sub for _, sub in reversed(attrs))
    elif tag == VAR:
      _, cls, i, mdef = d
      out.append(VariableDef(cls, i, metadata_of(mdef)))
    elif tag == REF:
      out.append(NodeRef(d[1]))
    elif tag == SEQ:
      stack.extend(reversed(d[2]))
    elif tag == MAP:
      stack.extend(sub for _, sub in reversed(d[2]))
  return out

"""flax.nnx 0.12's update-context placeholders for ref-mode Variables.

Within ``update_context(tag)``, the inner split (the outputs of a transform)
does not hand ``jax.Ref`` values back out: a ref-mode Variable whose Ref came
in from the outer split gets the value :class:`NoUpdate` (the caller keeps its
own Ref, already updated in place), one with a Ref made inside gets an
:class:`ArrayRefOutput` holding the Ref's current value, and the outer merge
turns those back into the caller's Ref and a new Ref.
"""

from __future__ import annotations

from typing import Any

import jax

from ._variables import Variable, new_variable


class NoUpdate:
  """The value of a ref-mode Variable whose Ref the caller already holds.

  A pytree with no leaves.

  Raises:
    TypeError: never.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> jax.tree.leaves(nnx.graphlib.NoUpdate())
    []
  """

  __slots__ = ()

  def __eq__(self, other: object) -> bool:
    return type(other) is NoUpdate

  def __hash__(self) -> int:
    return hash(NoUpdate)

  def __repr__(self) -> str:
    return "NoUpdate()"


class ArrayRefOutput:
  """The value of a ref-mode Variable whose Ref was made inside a transform:
  ``value`` is the Ref's content, put in a new Ref by the outer merge.

  Raises:
    TypeError: never.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.graphlib.ArrayRefOutput(jnp.ones(2)).value.shape
    (2,)
  """

  __slots__ = ("value",)

  def __init__(self, value: Any):
    self.value = value

  def __repr__(self) -> str:
    return f"ArrayRefOutput({self.value!r})"


jax.tree_util.register_pytree_node(NoUpdate, lambda _: ((), None), lambda *_: NoUpdate())
jax.tree_util.register_pytree_node(
  ArrayRefOutput, lambda a: ((a.value,), None), lambda _, children: ArrayRefOutput(children[0])
)

NO_UPDATE = NoUpdate()


def outer_ref_ids(outer_nodes: list) -> set[int]:
  """The ids of the Refs held by the Variables of an outer split."""
  return {
    id(v._value)
    for v in outer_nodes
    if isinstance(v, Variable) and isinstance(v.__dict__.get("_value"), jax.Ref)
  }


def to_placeholders(tree: Any, outer_refs: set[int]) -> Any:
  """``tree`` (States or a FlatState's leaves) with each ref-mode Variable
  replaced by a copy holding :data:`NO_UPDATE` or an :class:`ArrayRefOutput`."""

  def mark(x: Any) -> Any:
    if not isinstance(x, Variable):
      return x
    value = x.__dict__.get("_value")
    if not isinstance(value, jax.Ref):
      return x
    new = NO_UPDATE if id(value) in outer_refs else ArrayRefOutput(value[...])
    return new_variable(type(x), new, dict(x._metadata), x._trace)

  return jax.tree.map(mark, tree, is_leaf=lambda x: isinstance(x, Variable))


def resolve_placeholders(nodes: list, saved: dict[int, Any]) -> None:
  """After the outer merge: :data:`NO_UPDATE` values get back the Ref the Variable
  held before (``saved`` by id), :class:`ArrayRefOutput` values a new Ref."""
  for v in nodes:
    if isinstance(v, Variable):
      value = v.__dict__.get("_value")
      if type(value) is NoUpdate and id(v) in saved:
        v.__dict__["_value"] = saved[id(v)]
      elif type(value) is ArrayRefOutput:
        v.__dict__["_value"] = jax.new_ref(value.value)

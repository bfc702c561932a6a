"""``jax.Ref`` values in what a jitted function returns (as flax.nnx 0.12's jit).

``jax.jit`` refuses a mutable array as an output. ``nnx.jit`` lets the wrapped
function return Refs (raw, or as the storage of ref-mode Variables, e.g. in a
Module built inside): at trace time a Ref that came in as an argument becomes
an :class:`_InputRef` marker (no data) and the caller gets its own Ref object
back; a Ref created inside becomes a :class:`_NewRef` carrying its current
value, which the caller receives in a new Ref. flax.nnx does the same with its
``NoUpdate``/``ArrayRefOutput`` placeholders.
"""

from __future__ import annotations

from typing import Any

import jax


class _InputRef:
  """Marks the Ref passed in at flat input position ``i``."""

  __slots__ = ("i",)

  def __init__(self, i: int):
    self.i = i


class _NewRef:
  """Marks a Ref created inside; ``value`` is its value at the end of the call."""

  __slots__ = ("value",)

  def __init__(self, value: Any):
    self.value = value


jax.tree_util.register_pytree_node(_InputRef, lambda m: ((), m.i), lambda i, _: _InputRef(i))
jax.tree_util.register_pytree_node(
  _NewRef, lambda m: ((m.value,), None), lambda _, children: _NewRef(children[0])
)


def _is_marker(x: Any) -> bool:
  return type(x) is _InputRef or type(x) is _NewRef


def lower_refs(result: Any, inputs: Any) -> tuple[Any, bool]:
  """At trace time: ``result`` with its Refs replaced by markers, and whether any was."""
  found = False
  ids: dict[int, int] | None = None

  def lower(x: Any) -> Any:
    nonlocal found, ids
    if not isinstance(x, jax.Ref):
      return x
    found = True
    if ids is None:
      ids = {id(r): i for i, r in enumerate(jax.tree.leaves(inputs))}
    i = ids.get(id(x))
    return _InputRef(i) if i is not None else _NewRef(x[...])

  result = jax.tree.map(lower, result)
  return result, found


def raise_refs(result: Any, inputs: Any) -> Any:
  """After the call: markers replaced by the caller's input Refs or new Refs."""
  leaves = jax.tree.leaves(inputs)

  def restore(x: Any) -> Any:
    if type(x) is _InputRef:
      return leaves[x.i]
    if type(x) is _NewRef:
      return jax.new_ref(x.value)
    return x

  return jax.tree.map(restore, result, is_leaf=_is_marker)

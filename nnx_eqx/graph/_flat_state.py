"""FlatState: a graph's leaves as ``(path, leaf)`` pairs in walk order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import jax

from ._state import State


class FlatState(Sequence):
  """The leaves of a graph as ``(path, leaf)`` pairs, in the GraphDef's order.

  What ``nnx.graphlib.flatten`` returns; ``nnx.graphlib.unflatten`` and
  ``nnx.merge`` accept it. A pytree whose leaves are the leaves.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> flat = nnx.graphlib.FlatState([(("a",), 1), (("b", 0), 2)])
    >>> flat.paths, flat.leaves, flat[1]
    ((('a',), ('b', 0)), (1, 2), (('b', 0), 2))
    >>> flat.to_nested_state()["b"][0]
    2
  """

  __slots__ = ("_paths", "_leaves")

  def __init__(self, items: Iterable[tuple[tuple, Any]]):
    pairs = list(items)
    self._paths = tuple(p for p, _ in pairs)
    self._leaves = tuple(v for _, v in pairs)

  @classmethod
  def from_sorted_keys_values(cls, paths: Iterable[tuple], leaves: Iterable[Any]) -> FlatState:
    """A FlatState from parallel sequences of paths and leaves."""
    return cls(zip(paths, leaves))

  @property
  def paths(self) -> tuple:
    """The paths, in order."""
    return self._paths

  @property
  def leaves(self) -> tuple:
    """The leaves (Variables or raw values), in order."""
    return self._leaves

  @overload
  def __getitem__(self, i: int) -> tuple[tuple, Any]: ...

  @overload
  def __getitem__(self, i: slice) -> FlatState: ...

  def __getitem__(self, i):
    if isinstance(i, slice):
      return FlatState(zip(self._paths[i], self._leaves[i]))
    return self._paths[i], self._leaves[i]

  def __len__(self) -> int:
    return len(self._leaves)

  def __iter__(self) -> Iterator[tuple[tuple, Any]]:
    return iter(zip(self._paths, self._leaves))

  def __repr__(self) -> str:
    return f"FlatState({list(self)!r})"

  def to_nested_state(self) -> State:
    """The same leaves as a nested State keyed by the paths."""
    return State.from_flat_path(zip(self._paths, self._leaves))


jax.tree_util.register_pytree_node(
  FlatState,
  lambda f: (f.leaves, f.paths),
  lambda paths, leaves: FlatState.from_sorted_keys_values(paths, leaves),
)

"""Function forms of State views that flax.nnx 0.12 exposes at top level."""

from __future__ import annotations

from typing import Any

from ._state import State


def to_flat_state(state: State | dict) -> list[tuple[tuple, Any]]:
  """The ``(path, leaf)`` pairs of a State, in its traversal order.

  Args:
    state: a State (or a nested dict, wrapped into one).

  Returns:
    A list of ``(path_tuple, leaf)``; ``len`` is the number of leaves.

  Raises:
    TypeError: if ``state`` is neither a State nor a dict.

  Example:
    >>> import nnx_eqx as nnx
    >>> flat = nnx.to_flat_state(nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0))))
    >>> [p for p, _ in flat]
    [('bias',), ('kernel',)]
  """
  if isinstance(state, dict):
    state = State(state)
  if not isinstance(state, State):
    raise TypeError(f"to_flat_state expects a State, got {type(state).__name__}.")
  return list(state.flat_state().items())


def from_flat_state(flat: Any) -> State:
  """Inverse of :func:`to_flat_state`: a nested State from ``(path, leaf)`` pairs.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.from_flat_state([(("a", "b"), 1)]).a.b
    1
  """
  return State.from_flat_path(flat)


def to_pure_dict(state: State) -> dict:
  """``state.to_pure_dict()``: nested dicts of raw values.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.to_pure_dict(nnx.State({"w": nnx.Param(jnp.ones(1))}))["w"].shape
    (1,)
  """
  return state.to_pure_dict()

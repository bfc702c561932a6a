"""``GraphState``: a State bundled with its GraphDef, made by :func:`unpack`.

``nnx.merge(graph_state, ...)`` needs no separate GraphDef, and a GraphState
is a pytree whose leaves and key paths are those of its State (the GraphDef is
static), so it passes through ``jax.jit``/``nnx.grad`` like a State.
"""

from __future__ import annotations

from typing import Any

import jax

from .._errors import GraphStructureError
from ..state._filters import Filter
from ..state._state import State, _state_flatten, _state_flatten_with_keys, _state_unflatten
from ..walk._graphdef import GraphDef
from . import _functional as _graph

_OWN = ("_graphdef", "_state")


class GraphState:
  """A :class:`State` together with the :class:`GraphDef` it belongs to.

  Indexing, attribute access, ``in``, iteration and assignment act on the
  State.

  Attributes:
    _graphdef: the GraphDef.
    _state: the State.

  Example:
    >>> import nnx_eqx as nnx
    >>> gs = nnx.unpack(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> sorted(gs), type(nnx.merge(gs)).__name__
    (['bias', 'kernel'], 'Linear')
  """

  def __init__(self, graphdef: GraphDef, state: State):
    object.__setattr__(self, "_graphdef", graphdef)
    object.__setattr__(self, "_state", state)

  def __getitem__(self, key):
    return self._state[key]

  def __setitem__(self, key, value) -> None:
    self._state[key] = value

  def __getattr__(self, name: str):
    if name.startswith("__") or name in _OWN:
      raise AttributeError(name)
    return getattr(self._state, name)

  def __setattr__(self, name: str, value: Any) -> None:
    setattr(self._state, name, value)

  def __contains__(self, key) -> bool:
    return key in self._state

  def __iter__(self):
    return iter(self._state)

  def __len__(self) -> int:
    return len(self._state)

  def __repr__(self) -> str:
    return f"GraphState({self._state!r})"


def _flatten_with_keys(g: GraphState):
  children, keys = _state_flatten_with_keys(g._state)
  return children, (g._graphdef, keys)


def _flatten(g: GraphState):
  children, keys = _state_flatten(g._state)
  return children, (g._graphdef, keys)


def _unflatten(aux, children) -> GraphState:
  return GraphState(aux[0], _state_unflatten(aux[1], children))


# Same leaves and key paths as the State; the GraphDef is static.
jax.tree_util.register_pytree_with_keys(GraphState, _flatten_with_keys, _unflatten, _flatten)


def unpack(node: Any, *filters: Filter, graph: bool | None = None) -> Any:
  """``split`` with the GraphDef bundled into each State (a :class:`GraphState`).

  Args:
    node: a graph node.
    *filters: as for ``nnx.split``; zero or one filter gives one GraphState,
      more give a tuple.
    graph: accepted for flax compatibility.

  Returns:
    One GraphState or a tuple of them; ``nnx.merge(*graph_states)`` rebuilds.

  Raises:
    FilterError: if the filters do not cover every leaf.

  Example:
    >>> import nnx_eqx as nnx
    >>> params, rest = nnx.unpack(nnx.BatchNorm(2, rngs=nnx.Rngs(0)), nnx.Param, ...)
    >>> sorted(params), sorted(rest)
    (['bias', 'scale'], ['mean', 'var'])
  """
  graphdef, *states = _graph.split(node, *filters)
  if len(states) == 1:
    return GraphState(graphdef, states[0])
  return tuple(GraphState(graphdef, s) for s in states)


def unbundle(args: tuple) -> tuple:
  """``(graph_state, ...)`` → ``(graphdef, state, ...)`` for ``merge``; other args pass.

  Raises:
    GraphStructureError: if GraphStates are mixed with plain States, or their
      GraphDefs differ.
  """
  if not args or not isinstance(args[0], GraphState):
    return args
  first = args[0]
  states = []
  for a in args:
    if not isinstance(a, GraphState):
      raise GraphStructureError(
        f"merge: Expected GraphState object after a GraphState, got {type(a).__name__}."
        " Fix: pass only the GraphStates from `nnx.unpack`, or a GraphDef and States."
      )
    if a._graphdef != first._graphdef:
      raise GraphStructureError(
        "merge: the GraphDef must be the same for every GraphState. Fix: merge GraphStates"
        " unpacked from the same graph."
      )
    states.append(a._state)
  return (first._graphdef, *states)


def as_states(states: tuple) -> tuple:
  """GraphStates replaced by their States (for ``update``)."""
  return tuple(s._state if isinstance(s, GraphState) else s for s in states)

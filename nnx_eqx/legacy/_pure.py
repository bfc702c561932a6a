"""Pure: the ``(states, moduledef)`` pair returned by ``Module.partition`` (the seeds' PureModule).

It unpacks like the seeds' 2-tuple, is a JAX pytree (the states are its
children, the GraphDef its static data), so it can be a ``jax.jit`` or
``jax.vmap`` argument or result, and it calls the module functionally.
"""

from __future__ import annotations

from typing import Any

import jax

from ..graph.api import _functional as _graph
from ..graph.state._filters import Filter
from ..graph.state._state import State
from ..graph.walk import _node_types
from ..graph.walk._graphdef import GraphDef


class Pure(tuple):
  """A ``(states, graphdef)`` pair with functional helpers (the seeds' PureModule).

  ``states`` is one State or a tuple of States. ``pure.apply(...)`` calls the
  module built from them and returns ``(out, new_pure)``; ``pure.call(...)``
  returns only ``out``. Both chain attribute and item access before the call,
  as ``GraphDef.apply`` does: ``pure.apply.encoder(x)``,
  ``pure.call.layers[0](x)``. The inputs are never modified. A Pure stored on
  a Module is a State leaf (as in the seeds).

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> pure = nnx.Linear(2, 3, rngs=nnx.Rngs(0)).partition()
    >>> y, pure = jax.jit(lambda p, x: p.apply(x))(pure, jnp.ones((1, 2)))
    >>> y.shape, type(pure.merge()).__name__
    ((1, 3), 'Linear')
    >>> (params, rest), moduledef = pure.partition(nnx.Param, ...)
    >>> sorted(params), pure.call(jnp.ones((1, 2))).shape
    (['bias', 'kernel'], (1, 3))
  """

  __slots__ = ()

  def __new__(cls, states, graphdef):
    if isinstance(graphdef, GraphDef):  # a seed moduledef: apply keeps the seeds' order
      graphdef = graphdef.as_seed()
    return super().__new__(cls, (states, graphdef))

  def __getnewargs__(self):
    return tuple(self)

  @property
  def states(self):
    """The State, or tuple of States."""
    return self[0]

  @property
  def graphdef(self):
    """The GraphDef (``moduledef``)."""
    return self[1]

  moduledef = graphdef

  def _state_tuple(self) -> tuple:
    s = self[0]
    return s if isinstance(s, tuple) else (s,)

  def merge(self) -> Any:
    """Builds a new module from the states."""
    return _graph.merge(self[1], *self._state_tuple(), copy=True)

  def get_state(self) -> State:
    """All states merged into one State."""
    return State.merge(*self._state_tuple())

  @property
  def apply(self) -> _PureCaller:
    """Functional call: ``pure.apply(*args)`` or ``pure.apply.method(*args)`` →
    ``(out, new_pure)`` where ``new_pure`` holds the updated state in one State."""
    return _PureCaller(self[1].apply(*self._state_tuple()), True)

  @property
  def call(self) -> _PureCaller:
    """Like :attr:`apply`, but returns only the output (state updates are dropped)."""
    return _PureCaller(self[1].apply(*self._state_tuple()), False)

  def filter(self, first: Filter, /, *filters: Filter):
    """Selects leaves of the merged state (non-exhaustive), as ``State.filter``."""
    return self.get_state().filter(first, *filters)

  def partition(self, first: Filter, /, *filters: Filter) -> Pure:
    """Re-splits the state by filters (exhaustive): one filter gives
    ``Pure(state, graphdef)``, several ``Pure((s1, s2, ...), graphdef)``.

    Raises:
      FilterError: if some leaf matches no filter (its path is named).
    """
    return Pure(self.get_state().split(first, *filters), self[1])

  def pop_state(self, first: Filter, /, *filters: Filter) -> tuple:
    """``(popped, rest_pure)``: the matching leaves and a Pure with the rest."""
    *popped, rest = self.get_state().split(first, *filters, ...)
    return (popped[0] if not filters else tuple(popped)), Pure(rest, self[1])

  def update_state(self, *updates: Any) -> Pure:
    """A new Pure whose state is this one's updated with States, Pures or Modules."""
    states = [self.get_state()]
    for u in updates:
      if isinstance(u, Pure):
        states.append(u.get_state())
      elif isinstance(u, State):
        states.append(u)
      elif isinstance(u, tuple):
        states.extend(u)
      else:
        states.append(_graph.state_as(u, (), snapshot=True))
    return Pure(State.merge(*states), self[1])

  def __repr__(self) -> str:
    return f"Pure(states={self[0]!r}, graphdef={self[1]!r})"


class _PureCaller:
  """Chains attribute/item access on a ``GraphDef.apply`` caller; wraps its result."""

  __slots__ = ("_inner", "_with_state")

  def __init__(self, inner, with_state: bool):
    self._inner = inner
    self._with_state = with_state

  def __getattr__(self, name: str) -> _PureCaller:
    if name.startswith("__"):
      raise AttributeError(name)
    return _PureCaller(getattr(self._inner, name), self._with_state)

  def __getitem__(self, key) -> _PureCaller:
    return _PureCaller(self._inner[key], self._with_state)

  def __call__(self, *args, **kwargs):
    out, (state, graphdef) = self._inner(*args, **kwargs)
    return (out, Pure(state, graphdef)) if self._with_state else out


def _flatten(p: Pure) -> tuple:
  return (p[0],), p[1]


def _flatten_with_keys(p: Pure) -> tuple:
  return ((jax.tree_util.GetAttrKey("states"), p[0]),), p[1]


def _unflatten(graphdef: Any, children: Any) -> Pure:
  return Pure(children[0], graphdef)


jax.tree_util.register_pytree_with_keys(Pure, _flatten_with_keys, _unflatten, _flatten)
_node_types.register_leaf_type(Pure)

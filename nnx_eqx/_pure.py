"""Pure: the ``(state, moduledef)`` pair returned by ``Module.partition``.

It unpacks like the seeds' 2-tuple, is a JAX pytree (the states are its
children, the GraphDef its static data), and can call the module functionally.
"""

from __future__ import annotations

from typing import Any

import jax

from . import _graph


class Pure(tuple):
  """A ``(states, graphdef)`` pair with functional helpers (the seeds' PureModule).

  ``states`` is one State or a tuple of States. As a pytree its leaves are the
  states' leaves, so it can be passed to ``jax.jit``.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> pure = nnx.Linear(2, 3, rngs=nnx.Rngs(0)).partition()
    >>> y, pure = jax.jit(lambda p, x: p.apply(x))(pure, jnp.ones((1, 2)))
    >>> y.shape, type(pure.merge()).__name__
    ((1, 3), 'Linear')
  """

  def __new__(cls, states, graphdef):
    return super().__new__(cls, (states, graphdef))

  @property
  def states(self):
    return self[0]

  @property
  def graphdef(self):
    return self[1]

  moduledef = graphdef

  def _state_tuple(self) -> tuple:
    s = self[0]
    return s if isinstance(s, tuple) else (s,)

  def merge(self) -> Any:
    """Builds the module."""
    return _graph.merge(self[1], *self._state_tuple())

  def get_state(self):
    """All states merged into one State."""
    from ._state import State

    return State.merge(*self._state_tuple())

  def apply(self, *args, **kwargs):
    """Calls the module: returns ``(out, new_pure)``."""
    out, (state, graphdef) = self[1].apply(*self._state_tuple())(*args, **kwargs)
    return out, Pure(state, graphdef)

  def call(self, *args, **kwargs):
    """Calls the module and returns only its output."""
    return self.apply(*args, **kwargs)[0]

  def __getattr__(self, name):
    caller = getattr(self[1].apply(*self._state_tuple()), name)
    graphdef = self[1]

    def method(*args, **kwargs):
      out, (state, gd) = caller(*args, **kwargs)
      return out, Pure(state, gd)

    del graphdef
    return method


jax.tree_util.register_pytree_node(Pure, lambda p: ((p[0],), p[1]), lambda gd, ch: Pure(ch[0], gd))

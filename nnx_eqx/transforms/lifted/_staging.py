"""``nnx.checkify`` and ``nnx.make_jaxpr`` lifted over Modules (as flax.nnx).

Both trace the function over the Modules' leaf values with the lifting
mechanism of :mod:`._lift`: ``checkify`` runs it and writes updates back;
``make_jaxpr`` only stages it out and leaves the Modules as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from jax.experimental import checkify as jax_checkify

from ...graph.walk._graph_mode import resolve
from .._errors import UnsupportedModeError
from ..lifting import _lift
from ..lifting._dispatch import join_rest, split_rest


def _pure(f: Callable, args: tuple):
  """``(walk, pure, leaves, dyn)`` where ``pure(leaves, dyn) -> (out, updates)``."""
  split, w, leaves, rest = _lift.prepare(args)
  dyn, spec = split_rest(rest)
  graphdef = w.graphdef if w is not None else None

  def pure(leaves, dyn):
    return _lift.call_inner(f, graphdef, split, leaves, join_rest(spec, dyn))

  return w, pure, list(leaves), dyn


def checkify(
  f: Callable, errors: frozenset = jax_checkify.user_checks, **checkify_kwargs: Any
) -> Callable:
  """``jax.experimental.checkify.checkify`` lifted over Modules.

  Args:
    f: the function (may take Modules; its updates are written back).
    errors: the checks to enable, as ``checkify.checkify`` (e.g.
      ``checkify.float_checks``).
    **checkify_kwargs: passed to ``checkify.checkify``.

  Returns:
    A function returning ``(error, out)``; ``error.throw()`` raises a failed check.

  Raises:
    BoundMethodError: ``f`` is a Module's bound method.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from jax.experimental import checkify
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> err, y = nnx.checkify(lambda m, x: m(x), errors=checkify.float_checks)(m, jnp.ones(2))
    >>> err.get() is None, y.shape
    (True, (2,))
  """
  _lift.reject_bound_method(f, "nnx.checkify")

  @functools.wraps(f)
  def wrapper(*args):
    w, pure, leaves, dyn = _pure(f, args)
    err, (out, updates) = jax_checkify.checkify(pure, errors=errors, **checkify_kwargs)(leaves, dyn)
    return err, _lift.apply_updates(w, updates, out)

  return wrapper


def make_jaxpr(
  f: Callable, *, graph: bool | None = None, graph_updates: bool | None = None, **kwargs: Any
) -> Callable:
  """``jax.make_jaxpr`` lifted over Modules: the jaxpr of ``f`` over their leaves.

  The Modules are not modified (updates stay in the jaxpr's outputs), which is
  why graph updates must be off, as in flax.

  Args:
    f: the function.
    graph, graph_updates: as flax; ``graph_updates`` must resolve to False
      in graph mode.
    **kwargs: passed to ``jax.make_jaxpr`` (e.g. ``return_shape``).

  Returns:
    A function returning the ``ClosedJaxpr`` for given arguments.

  Raises:
    BoundMethodError: ``f`` is a Module's bound method.
    UnsupportedModeError: (a ValueError) graph updates are on.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> jaxpr = nnx.make_jaxpr(lambda m, x: m(x), graph_updates=False)(m, jnp.ones(2))
    >>> "dot_general" in str(jaxpr)
    True
  """
  graph, graph_updates = resolve(graph, graph_updates)
  if graph and graph_updates:
    raise UnsupportedModeError(
      "nnx.make_jaxpr does not support graph_updates=True. Fix: pass graph_updates=False"
      " (the jaxpr's outputs then hold the updates; the Modules are left as they are)."
    )
  _lift.reject_bound_method(f, "nnx.make_jaxpr")

  @functools.wraps(f)
  def wrapper(*args):
    _, pure, leaves, dyn = _pure(f, args)
    return jax.make_jaxpr(pure, **kwargs)(leaves, dyn)

  return wrapper


__all__ = ["checkify", "make_jaxpr"]

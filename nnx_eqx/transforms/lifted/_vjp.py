"""``nnx.vjp`` and ``nnx.jvp``: ``jax.vjp``/``jax.jvp`` lifted over Modules (as flax.nnx).

Module arguments enter as their leaf values (the lifting mechanism of
:mod:`._lift`); state updates made by the function travel out as auxiliary
data and are written back once the JAX transform returned. Cotangents and
tangents of a Module have the Module's own structure: a copy of it whose
leaves hold the (co)tangent values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ...graph._errors import NnxError
from ..lifting import _lift


class TangentStructureError(NnxError, TypeError):
  """The tangents given to :func:`jvp` do not have the structure of the primals."""


def _inner(f: Callable, graphdef, split: _lift.ArgSplit, has_aux: bool) -> Callable:
  """``(leaves, rest) -> (out, (aux, updates))`` for the JAX transform."""

  def inner(leaves, rest):
    out, updates = _lift.call_inner(f, graphdef, split, leaves, rest)
    if has_aux:
      out, aux = out
      return out, (aux, updates)
    return out, (None, updates)

  return inner


def _with_nodes(split: _lift.ArgSplit, graphdef, leaves, rest) -> tuple:
  """The argument tuple with each Module rebuilt from ``leaves``."""
  nodes, _ = _lift.merge_inner(graphdef, list(leaves))
  return _lift.join_args(split, rest, nodes)


def vjp(
  f: Callable | None = None,
  *primals: Any,
  has_aux: bool = False,
  reduce_axes: Sequence[Any] = (),
):
  """``jax.vjp`` lifted over Modules (as flax.nnx.vjp).

  Evaluates ``f(*primals)`` once, writes its state updates (counters,
  BatchStats) back into the Module arguments, and returns a function mapping
  an output cotangent to one cotangent per primal. A Module's cotangent is a
  Module of the same type and structure whose leaves hold the gradients (an
  integer leaf gets a ``float0`` zero, as in JAX).

  Args:
    f: the function. Without ``primals``, returns ``f`` wrapped so that
      calling it with the primals runs the vjp (also the decorator form
      ``@nnx.vjp``).
    *primals: arrays, pytrees and Modules at which to linearise ``f``.
    has_aux: ``f`` returns ``(out, aux)``; ``aux`` is not differentiated.
    reduce_axes: deprecated in JAX; must be empty.

  Returns:
    ``(out, vjp_fn)``, or ``(out, vjp_fn, aux)`` with ``has_aux``.
    ``vjp_fn(cotangent)`` returns a tuple with one entry per primal.

  Raises:
    BoundMethodError: ``f`` is a Module's bound method.
    NotImplementedError: ``reduce_axes`` is given.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> out, vjp_fn = nnx.vjp(lambda m, x: m(x).sum(), m, jnp.ones((3, 2)))
    >>> m_ct, x_ct = vjp_fn(jnp.ones(()))
    >>> m_ct.kernel.value.shape, m_ct.bias.value.tolist(), x_ct.shape
    ((2, 1), [3.0], (3, 2))
  """
  if reduce_axes:
    raise NotImplementedError("nnx.vjp: reduce_axes is deprecated in JAX; leave it empty.")
  if f is None:
    return functools.partial(vjp, has_aux=has_aux)
  _lift.reject_bound_method(f, "nnx.vjp")
  if not primals:
    return functools.partial(vjp, f, has_aux=has_aux)
  split, w, leaves, rest = _lift.prepare(primals)
  graphdef = w.graphdef if w is not None else None
  out, raw_vjp, (aux, updates) = jax.vjp(
    _inner(f, graphdef, split, has_aux), list(leaves), rest, has_aux=True
  )
  out, aux = _lift.apply_updates(w, updates, (out, aux))

  def vjp_fn(cotangent):
    leaf_ct, rest_ct = raw_vjp(cotangent)
    return _with_nodes(split, graphdef, leaf_ct, rest_ct)

  return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def jvp(
  f: Callable | None = None,
  primals: Sequence[Any] | None = None,
  tangents: Sequence[Any] | None = None,
  *,
  has_aux: bool = False,
):
  """``jax.jvp`` lifted over Modules (as flax.nnx.jvp).

  ``tangents`` has the structure of ``primals``; the tangent of a Module is a
  Module of the same structure holding tangent values (e.g.
  ``jax.tree.map(jnp.ones_like, module)``). State updates made by ``f`` are
  written back into the primal Modules.

  Args:
    f: the function. Without ``primals``, returns ``f`` wrapped as
      ``g(primals, tangents)`` (also the decorator form ``@nnx.jvp``).
    primals: a tuple of arguments (arrays, pytrees, Modules).
    tangents: a tuple with the structure, shapes and dtypes of ``primals``.
    has_aux: ``f`` returns ``(out, aux)``.

  Returns:
    ``(out, tangent_out)``, or ``(out, tangent_out, aux)`` with ``has_aux``.

  Raises:
    BoundMethodError: ``f`` is a Module's bound method.
    TangentStructureError: (a TypeError) a tangent Module's graph differs
      from its primal's.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> x = jnp.ones((1, 2))
    >>> dm = jax.tree.map(jnp.zeros_like, m)
    >>> out, dout = nnx.jvp(lambda m, x: m(x).sum(), (m, x), (dm, jnp.ones((1, 2))))
    >>> bool(jnp.allclose(dout, m.kernel.value.sum()))
    True
  """
  if f is None:
    return functools.partial(jvp, has_aux=has_aux)
  _lift.reject_bound_method(f, "nnx.jvp")
  if primals is None:
    return functools.partial(jvp, f, has_aux=has_aux)
  split, w, leaves, rest = _lift.prepare(tuple(primals))
  _, tw, t_leaves, t_rest = _lift.prepare(tuple(tangents or ()))
  graphdef = w.graphdef if w is not None else None
  t_graphdef = tw.graphdef if tw is not None else None
  if graphdef != t_graphdef:
    raise TangentStructureError(
      "nnx.jvp: the Modules in `tangents` do not have the graph structure of those in"
      " `primals`. Fix: build each tangent from its primal, e.g."
      " jax.tree.map(jnp.zeros_like, module)."
    )
  inner = _inner(f, graphdef, split, has_aux)
  out, t_out, (aux, updates) = jax.jvp(
    inner, (list(leaves), rest), (list(t_leaves), t_rest), has_aux=True
  )
  out, aux = _lift.apply_updates(w, updates, (out, aux))
  return (out, t_out, aux) if has_aux else (out, t_out)


__all__ = ["vjp", "jvp", "TangentStructureError"]

"""``nnx.custom_vjp``: ``jax.custom_vjp`` lifted over Modules (as flax.nnx.custom_vjp).

The function, its ``fwd`` and its ``bwd`` all run on the lifting mechanism of
:mod:`._lift`: JAX sees ``(leaves, arrays) -> (output, updates)``, where the
updates are the Module leaves the function changed (written back after the
call). ``bwd``'s result is mapped back onto those leaves: a Module tangent by
its leaves, a State tangent by its paths, ``None`` as zero.

Two conventions, as flax: with graph updates (the default) ``bwd(*nondiff,
res, (inputs_g, out_g))`` gets, per differentiable argument, a State of the
cotangents of its state (or None) and returns States for Module arguments;
without (``graph_updates=False`` or ``graph=False``) ``bwd(*nondiff, res,
out_g[, updates_g])`` returns tangents of the arguments' own types (a Module
for a Module).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ...graph.api import _functional as _graph
from ...graph.state._diff_state import DiffState
from ...graph.state._filters import to_predicate
from ...graph.state._state import State
from ...graph.tracing._traces import current_trace
from ...graph.variables._variables import Variable
from ...graph.walk._graph_mode import resolve
from ...graph.walk._node_types import node_impl
from ...graph.walk._paths import object_at
from .._errors import LiftedStructureError
from ..lifting import _lift
from ..lifting._dispatch import join_rest, positional, split_rest
from ._autodiff import grad_state


class CustomVjpError(LiftedStructureError):
  """``nnx.custom_vjp`` was used in a way it cannot lift (no ``defvjp``, a
  DiffState without graph updates)."""


class CustomVjp:
  """The callable returned by :func:`custom_vjp`; call :meth:`defvjp` before
  differentiating it."""

  def __init__(self, fun: Callable, nondiff_argnums: tuple, graph_updates: bool):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.graph_updates = graph_updates
    self.nondiff = tuple(sorted(a for a in nondiff_argnums if isinstance(a, int)))
    self.filters = {
      a.argnum: to_predicate(a.filter) for a in nondiff_argnums if isinstance(a, DiffState)
    }
    if self.filters and not graph_updates:
      raise CustomVjpError(
        "nnx.custom_vjp: `nondiff_argnums` cannot contain `DiffState` objects when"
        " graph=False or graph_updates=False. Fix: drop graph=False/graph_updates=False,"
        " or split the state (nnx.split) and pass the differentiable part as its own argument."
      )
    self.fwd: Callable | None = None
    self.bwd: Callable | None = None

  def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False) -> None:
    """Sets ``fwd(*args) -> (out, res)`` and ``bwd`` (see :func:`custom_vjp`)."""
    if symbolic_zeros:
      raise NotImplementedError("nnx.custom_vjp: symbolic_zeros is not supported.")
    self.fwd, self.bwd = fwd, bwd
    params = inspect.signature(bwd).parameters
    self.wants_updates_g = "updates_g" in params or any(
      p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )

  def __get__(self, obj, objtype=None):
    return self if obj is None else functools.partial(self, obj)

  def __call__(self, *args, **kwargs):
    if self.fwd is None or self.bwd is None:
      raise CustomVjpError(
        f"nnx.custom_vjp: {self.__name__} has no fwd/bwd. Fix: call .defvjp(fwd, bwd) first."
      )
    args = positional(self.fun, args, kwargs, "nnx.custom_vjp")
    split, w, leaves, rest = _lift.prepare(args)
    if not self.graph_updates:
      _lift.check_no_input_alias(w, split, "custom_vjp")
    dyn, spec = split_rest(rest)
    call = _Call(self, split, w, spec, len(args))
    fn = jax.custom_vjp(call.primal)
    fn.defvjp(call.forward, call.backward)
    out, updates = fn(list(leaves), dyn)
    return _lift.apply_updates(w, updates, out)


class _Call:
  """One call of a :class:`CustomVjp`: the pure functions JAX differentiates."""

  def __init__(self, cv: CustomVjp, split: _lift.ArgSplit, w, spec, n_args: int):
    self.cv, self.split, self.w, self.spec, self.n_args = cv, split, w, spec, n_args
    self.graphdef = w.graphdef if w is not None else None
    self.arg_of = _lift.leaf_arg_index(w, split) if w is not None else []
    self.index = {(p[0], p[1:]): i for i, p in enumerate(w.paths)} if w else {}
    self.node_args = set(split.arg_of_node)
    self.diff = [i for i in range(n_args) if i not in cv.nondiff]

  def _run(self, fn: Callable, leaves, dyn):
    # Without graph updates (flax's functional convention) only new Variable
    # values come back; Modules returned are plain pytree outputs.
    return _lift.call_inner(
      fn,
      self.graphdef,
      self.split,
      leaves,
      join_rest(self.spec, dyn),
      values_only=not self.cv.graph_updates,
    )

  def primal(self, leaves, dyn):
    return self._run(self.cv.fun, leaves, dyn)

  def forward(self, leaves, dyn):
    box: list = []

    def fwd(*args):
      out, res = self.cv.fwd(*args)  # type: ignore[misc]
      box.append(res)
      return out

    out_upd = self._run(fwd, leaves, dyn)
    return out_upd, (box[0], leaves, dyn)

  def _args(self, leaves, dyn) -> tuple:
    nodes, _ = _lift.merge_inner(self.graphdef, list(leaves))
    return _lift.join_args(self.split, join_rest(self.spec, dyn), nodes)

  def _diff_leaf(self, i: int) -> bool:
    a = self.arg_of[i]
    pred = self.cv.filters.get(a)
    if a in self.cv.nondiff:
      return False
    return pred is None or pred(self.w.paths[i][1:], self.w.slots[i])

  def _nodes_of(self, a: int) -> list[int]:
    return [k for k, b in enumerate(self.split.arg_of_node) if b == a]

  def _node_tangents(self, a: int, t, rest_a) -> tuple[dict, object]:
    """``({node: its tangent}, tangent of the rest)`` for argument ``a``'s tangent
    ``t``; with nodes nested in a pytree (e.g. a State of Variables) ``t`` has
    the argument's structure and the rest's tangent keeps the placeholders."""
    if not self.split.generic:
      return {self.split.positions.index(a): t}, None
    holes, treedef_ = jax.tree_util.tree_flatten(rest_a, is_leaf=_lift._is_hole)
    treedef: Any = treedef_
    parts = treedef.flatten_up_to(t)
    node_t = {h.k: x for h, x in zip(holes, parts) if _lift._is_hole(h)}
    rest_ct = treedef.unflatten([h if _lift._is_hole(h) else x for h, x in zip(holes, parts)])
    return node_t, rest_ct

  def _fill_arg(self, a: int, rest_a, per_node: dict):
    """Argument ``a`` rebuilt with ``per_node`` at its nodes (other leaves: zeros)."""
    if not self.split.generic:
      return per_node[self.split.positions.index(a)]
    zeroed = jax.tree.map(_zeros, rest_a)
    return jax.tree.map(lambda h: per_node[h.k], zeroed, is_leaf=_lift._is_hole)

  def _inputs_g(self, leaves, dyn, upd_g: _lift.Updates) -> tuple:
    """Per differentiable argument: a State of the cotangents of its whole state
    (as flax: a DiffState argument's tangent is then taken from its selected part)."""
    if upd_g.structure is None:
      got = dict(zip(upd_g.index, upd_g.values))
    else:  # leaves walked as (inputs, outputs): an input's leaf is at (0, *its path)
      at = {tuple(p): i for i, p in enumerate(self.w.paths)} if self.w is not None else {}
      paths = upd_g.structure[0].paths
      pairs = ((at.get(p[1:]) if p[0] == 0 else None, v) for p, v in zip(paths, upd_g.values))
      got = {i: v for i, v in pairs if i is not None}
    trace = current_trace()
    rest = join_rest(self.spec, dyn)
    result: list = []
    for a in self.diff:
      if a not in self.node_args:
        result.append(None)
        continue
      per_node = {}
      for k in self._nodes_of(a):
        idxs = [i for i, p in enumerate(self.w.paths) if p[0] == k]  # type: ignore[union-attr]
        vals = [got.get(i, _zeros(leaves[i])) for i in idxs]
        per_node[k] = grad_state(self.w, idxs, vals, trace)
      result.append(self._fill_arg(a, rest[a], per_node))
    return tuple(result)

  def _updates_g(self, upd_g: _lift.Updates, dyn) -> tuple:
    """Per argument (functional convention): a copy of a Module argument whose
    updated Variables hold their cotangents and whose other Variables are None;
    None for other arguments."""
    if self.w is None:
      return (None,) * self.n_args
    got = dict(zip(upd_g.index, upd_g.values))
    n = len(self.w.paths)
    nodes, _ = _lift.merge_inner(self.graphdef, [got.get(i) for i in range(n)])
    for i, p in enumerate(self.w.paths):
      if i not in got and len(p) > 1:
        parent = object_at(nodes[p[0]], p[1:-1])
        impl = node_impl(type(parent))
        if impl is not None:
          impl.set_key(parent, p[-1], None)
    if self.split.generic:
      joined = _lift.join_args(self.split, join_rest(self.spec, dyn), nodes)
      return tuple(joined[a] if a in self.node_args else None for a in range(self.n_args))
    by_arg = dict(zip(self.split.positions, nodes))
    return tuple(by_arg.get(a) for a in range(self.n_args))

  def backward(self, resid, g):
    res, leaves, dyn = resid
    out_g, upd_g = g
    args = self._args(leaves, dyn)
    nondiff = [args[i] for i in self.cv.nondiff]
    if self.cv.graph_updates:
      tangents = self.cv.bwd(*nondiff, res, (self._inputs_g(leaves, dyn, upd_g), out_g))  # type: ignore[misc]
    elif self.cv.wants_updates_g:
      tangents = self.cv.bwd(*nondiff, res, out_g, updates_g=self._updates_g(upd_g, dyn))  # type: ignore[misc]
    else:
      tangents = self.cv.bwd(*nondiff, res, out_g)  # type: ignore[misc]
    return self._cotangents(tuple(tangents), leaves, dyn)

  def _cotangents(self, tangents: tuple, leaves, dyn) -> tuple:
    if len(tangents) != len(self.diff):
      raise CustomVjpError(
        f"nnx.custom_vjp: bwd returned {len(tangents)} tangents for {len(self.diff)}"
        " differentiable arguments. Fix: return one per argument not in nondiff_argnums."
      )
    leaf_ct: list = [None] * len(leaves)
    # Arguments without a tangent (non-differentiable, or None) get zeros.
    rest = join_rest(self.spec, dyn)
    nodes_at = set(self.split.positions)
    rest_t: list = [
      None if a in nodes_at else jax.tree.map(_zeros, rest[a]) for a in range(self.n_args)
    ]
    for a, t in zip(self.diff, tangents):
      if t is None:
        continue
      if a not in self.node_args:
        rest_t[a] = t
        continue
      node_t, rest_ct = self._node_tangents(a, t, rest[a])
      if rest_ct is not None:
        rest_t[a] = rest_ct
      for k, tk in node_t.items():
        for path, v in _tangent_items(tk):
          i = self.index.get((k, path))
          if i is not None and self._diff_leaf(i):
            leaf_ct[i] = v.value if isinstance(v, Variable) else v
    per_leaf = self.spec.treedef.flatten_up_to(tuple(rest_t))
    dyn_ct = [c for c, m in zip(per_leaf, self.spec.dynamic) if m]
    return leaf_ct, dyn_ct


def _zeros(x):
  return jnp.zeros_like(x)


def _tangent_items(t) -> list:
  """``(path, value)`` pairs of a Module, Variable or State tangent."""
  if isinstance(t, State):
    return list(t.to_flat_dict().items())
  if isinstance(t, Variable):
    return [((), t)]
  w = _graph.walk_uncached((t,))
  return [(p[1:], v) for p, v in zip(w.paths, w.leaves())]


def custom_vjp(
  fun: Callable | None = None,
  *,
  nondiff_argnums: tuple = (),
  graph: bool | None = None,
  graph_updates: bool | None = None,
):
  """``jax.custom_vjp`` lifted over Modules (as flax.nnx.custom_vjp).

  Define ``fwd(*args) -> (out, residuals)`` and ``bwd`` with
  ``f.defvjp(fwd, bwd)``; residuals may hold Modules. State updates made by
  the function (or ``fwd``, when differentiating) are written back. With
  graph updates (the default), ``bwd(*nondiff, res, (inputs_g, out_g))``
  returns one tangent per differentiable argument, a State for a Module
  argument; ``inputs_g`` holds, per differentiable argument, a State of the
  cotangents of its whole state (or None); a DiffState argument's tangent is
  then read from its selected part. With ``graph_updates=False`` (or
  ``graph=False``; flax's functional convention), ``bwd(*nondiff, res, out_g)``
  returns tangents of the arguments' own types (a Module for a Module); if
  ``bwd`` has an ``updates_g`` parameter it also gets, per argument, a copy of
  a Module argument whose Variables updated by the function hold their
  cotangents and whose other Variables are None. In that convention only new
  Variable values are written back (structural changes are dropped) and
  Modules returned are plain pytree outputs. A ``None`` tangent is zero.

  Args:
    fun: the function.
    nondiff_argnums: ints (arguments passed first to ``bwd``, not
      differentiated) or ``nnx.DiffState(argnum, filter)`` (differentiate
      only that part of a Module's state; graph updates only).
    graph, graph_updates: select the convention above (defaults from
      ``nnx.set_graph_mode``/``nnx.set_graph_updates``).

  Returns:
    A :class:`CustomVjp` (also as a decorator).

  Raises:
    BoundMethodError: ``fun`` is a Module's bound method.
    CustomVjpError: a DiffState without graph updates; calling it before
      ``defvjp``; ``bwd`` returning the wrong number of tangents.
    SharedReferenceError: without graph updates, the arguments share a
      Variable (as flax.nnx's "Duplicate Param").

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Foo(nnx.Module):
    ...   def __init__(self):
    ...     self.x = nnx.Param(jnp.array(1.0))
    >>> @nnx.custom_vjp
    ... def f(m):
    ...   return jnp.sin(m.x.value)
    >>> def f_fwd(m):
    ...   return f(m), jnp.cos(m.x.value)
    >>> def f_bwd(cos_x, g):
    ...   (m_g,), out_g = g
    ...   m_g["x"].value = 2 * cos_x * out_g  # twice the true gradient
    ...   return (m_g,)
    >>> f.defvjp(f_fwd, f_bwd)
    >>> round(float(nnx.grad(f)(Foo())["x"].value), 4)
    1.0806
  """
  graph, graph_updates = resolve(graph, graph_updates)

  def wrap(fn: Callable) -> CustomVjp:
    _lift.reject_bound_method(fn, "nnx.custom_vjp")
    return CustomVjp(fn, tuple(nondiff_argnums), bool(graph and graph_updates))

  return wrap if fun is None else wrap(fun)


__all__ = ["custom_vjp", "CustomVjp", "CustomVjpError"]

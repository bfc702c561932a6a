"""``nnx.grad`` and ``nnx.value_and_grad`` lifted over Modules (as flax.nnx)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...graph._errors import fmt_path
from ...graph.state._filters import Filter, to_predicate
from ...graph.state._state import State
from ...graph.tracing._traces import current_trace
from ...graph.variables._variables import Param, Variable, new_variable
from ...graph.walk._duplicates import shared_variable_paths
from ...graph.walk._graph_mode import resolve
from ..axes._specs import aliasing_error
from ..lifting import _lift
from ..lifting._foreign_args import explain_argument_error


def grad_state(w, idxs: list[int], grads: list, trace) -> State | Variable:
  items = []
  for i, g in zip(idxs, grads):
    s = w.slots[i]
    v = new_variable(type(s), g, dict(s._metadata), trace) if isinstance(s, Variable) else g
    items.append((w.paths[i][1:], v))
  if len(items) == 1 and items[0][0] == ():
    return items[0][1]
  return State.from_flat_path(items)


def _is_inexact(x) -> bool:
  return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


def _no_grad(x):
  """The zero cotangent JAX gives a non-differentiable input (``float0``)."""
  return np.zeros(np.shape(x), dtype=jax.dtypes.float0)


def _value_and_grad(
  f: Callable,
  argnums,
  has_aux: bool,
  wrt: Filter | dict,
  holomorphic: bool,
  allow_int: bool,
  name: str = "nnx.value_and_grad",
  functional: bool = False,
):
  """The shared body of grad/value_and_grad. ``wrt`` is one filter or a dict
  ``{argnum: filter}`` (from DiffStates). ``functional`` (``graph=False`` or
  ``graph_updates=False``): every inexact leaf of the differentiated Module
  arguments is differentiated and their gradients come back as copies of those
  arguments (as ``jax.grad`` over their pytrees)."""
  single = isinstance(argnums, int)
  argnums_t = (argnums,) if single else tuple(argnums)
  preds = {a: to_predicate(wrt.get(a, Param) if isinstance(wrt, dict) else wrt) for a in argnums_t}
  _lift.reject_bound_method(f, name)

  def selected(p, o, a, node) -> bool:
    if a not in preds:
      return False
    if functional:
      return allow_int or _is_inexact(o.value if isinstance(o, Variable) else o)
    # A Variable passed as the argument itself is differentiated whole (as flax).
    return (isinstance(node, Variable) and len(p) == 1) or preds[a](p[1:], o)

  @functools.wraps(f)
  def wrapper(*args):
    split, w, leaves, rest = _lift.prepare(args)
    node_args = set(split.arg_of_node)
    diff_idx: list[int] = []
    if w is not None:
      objs = w.leaf_objects()
      arg_of = _lift.leaf_arg_index(w, split)
      diff_idx = [
        i
        for i, (p, o, a) in enumerate(zip(w.paths, objs, arg_of))
        if selected(p, o, a, w.refs[p[0]])
      ]
      if functional:
        _check_aliasing(w, split, selected, name)
    diff_set = set(diff_idx)
    other_idx = [i for i in range(len(leaves)) if i not in diff_set]
    array_argnums = [a for a in argnums_t if a not in node_args]
    rest_l = list(rest)
    arr_args = [rest_l[a] for a in array_argnums]
    graphdef = w.graphdef if w is not None else None

    def inner(diff_leaves, arr_vals, other_leaves):
      all_leaves = [None] * len(leaves)
      for i, v in zip(diff_idx, diff_leaves):
        all_leaves[i] = v
      for i, v in zip(other_idx, other_leaves):
        all_leaves[i] = v
      r = list(rest_l)
      for a, v in zip(array_argnums, arr_vals):
        r[a] = v
      out, updates = _lift.call_inner(f, graphdef, split, all_leaves, tuple(r))
      if has_aux:
        loss, aux = out
      else:
        loss, aux = out, None
      return loss, (aux, updates)

    try:
      (value, (aux, updates)), (g_diff, g_arr) = jax.value_and_grad(
        inner, argnums=(0, 1), has_aux=True, holomorphic=holomorphic, allow_int=allow_int
      )([leaves[i] for i in diff_idx], arr_args, [leaves[i] for i in other_idx])
    except TypeError as e:
      explain_argument_error(args, name, e)
      raise
    aux = _lift.apply_updates(w, updates, aux)
    by_leaf = dict(zip(diff_idx, g_diff))
    if functional and w is not None:
      node_grads = _grad_copies(w, leaves, by_leaf)
    elif w is not None:
      node_grads = _grad_states(w, by_leaf)
    arr_iter = iter(g_arr)
    grads_args = _lift.join_args(split, rest, node_grads) if w is not None else ()
    results = [grads_args[a] if a in node_args else next(arr_iter) for a in argnums_t]
    grads = results[0] if single else tuple(results)
    return ((value, aux) if has_aux else value), grads

  return wrapper


def _check_aliasing(w, split, selected: Callable, name: str) -> None:
  """Raises if one Variable is differentiated along one path and not another
  (e.g. passed both as a differentiated and a non-differentiated argument)."""
  for i, paths in shared_variable_paths(w.graphdef.defn).items():
    var = w.nodes[i]
    got = [selected(p, var, split.arg_of_node[p[0]], w.refs[p[0]]) for p in paths]
    if any(g != got[0] for g in got[1:]):
      lines = [
        f"argument {split.arg_of_node[p[0]]}, state {fmt_path(p[1:])}:"
        f" {'differentiated' if g else 'not differentiated'}"
        for p, g in zip(paths, got)
      ]
      raise aliasing_error(name, "argnums/wrt", var, lines)


def _grad_states(w, by_leaf: dict) -> list:
  """Per node: a State of the gradients of its differentiated leaves (the
  Variable itself for a Variable node; an empty State where a shared leaf was
  already counted under an earlier node)."""
  trace = current_trace()
  per_node: list[list[int]] = [[] for _ in w.refs]
  for i in by_leaf:
    per_node[w.paths[i][0]].append(i)
  return [grad_state(w, idxs, [by_leaf[i] for i in idxs], trace) for idxs in per_node]


def _grad_copies(w, leaves, by_leaf: dict) -> tuple:
  """New nodes shaped like the arguments, holding gradients (``float0`` zeros
  for the leaves not differentiated)."""
  values = [by_leaf[i] if i in by_leaf else _no_grad(x) for i, x in enumerate(leaves)]
  nodes, _ = _lift.merge_inner(w.graphdef, values)
  return nodes


def _check_reduce_axes(reduce_axes: Sequence[Any], name: str) -> None:
  """flax.nnx keeps ``reduce_axes=`` in its signature and raises when it is used."""
  if reduce_axes:
    raise NotImplementedError(
      f"{name}(reduce_axes={reduce_axes!r}): reduce_axes is no longer supported (JAX removed "
      "it, and flax.nnx raises too). Fix: drop reduce_axes and sum the gradients over those "
      "axes yourself, e.g. with jax.lax.psum(grads, axis_name) inside the mapped function."
    )


def value_and_grad(
  f: Callable | None = None,
  *,
  argnums: int | Sequence[int] = 0,
  has_aux: bool = False,
  wrt: Filter = Param,
  holomorphic: bool = False,
  allow_int: bool = False,
  reduce_axes: Sequence[Any] = (),
  graph: bool | None = None,
  graph_updates: bool | None = None,
):
  """``jax.value_and_grad`` lifted over Modules (as flax.nnx.value_and_grad).

  With graph updates (the default), the gradient of each Module argument in
  ``argnums`` is a State holding the leaves selected by ``wrt`` (default:
  Params), with the same paths and Variable types; an argument that is a
  container of Modules or Variables gets the container with a State per Module
  and a Variable per Variable. For array arguments it is a plain array.
  Updates to other state made inside ``f`` (counters, BatchStats, Rngs counts)
  are written back.

  With ``graph=False`` or ``graph_updates=False`` (flax's functional
  convention) ``f`` is differentiated as ``jax.grad`` would over the
  arguments' pytrees: every inexact leaf of a Module argument (Params,
  BatchStats, ...; ``wrt`` is not used) is differentiated and the gradient is a
  new object of the argument's own type (a ``Linear`` for a ``Linear``) whose
  Variables hold the gradients (``float0`` zeros for integer leaves).

  Args:
    f: ``f(*args) -> scalar`` (or ``(scalar, aux)`` with ``has_aux``).
    argnums: which positional arguments to differentiate; ints or
      ``nnx.DiffState(argnum, filter)`` (per-argument ``wrt``).
    has_aux: ``f`` returns ``(loss, aux)``.
    wrt: filter selecting the differentiated leaves of Module arguments.
    holomorphic, allow_int: passed to ``jax.value_and_grad``.
    reduce_axes: accepted for flax.nnx's signature; must be empty (JAX removed
      the option; as in flax, a non-empty value raises).
    graph, graph_updates: select the convention above (defaults from
      ``nnx.set_graph_mode``/``nnx.set_graph_updates``).

  Returns:
    A function returning ``(value, grads)`` or ``((value, aux), grads)``.

  Raises:
    TypeError: from JAX, when ``f`` does not return a real scalar.
    WrongLibraryError: an ``eqx.Module`` argument (taken as a pytree of data, as
      ``jax.grad`` takes it) holds a leaf JAX cannot differentiate (a function):
      convert it with ``nnx.from_eqx``, or use ``eqx.filter_grad``.
    NotImplementedError: ``reduce_axes`` is not empty (as flax.nnx).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> loss, grads = nnx.value_and_grad(lambda m: m(jnp.ones((1, 2))).sum())(model)
    >>> grads.kernel.value.tolist()
    [[1.0], [1.0]]
    >>> _, g = nnx.value_and_grad(lambda m: m(jnp.ones((1, 2))).sum(), graph=False)(model)
    >>> type(g).__name__, g.bias.value.tolist()
    ('Linear', [1.0])
  """

  _check_reduce_axes(reduce_axes, "nnx.value_and_grad")
  functional = not all(resolve(graph, graph_updates))

  def wrap(fn):
    return _value_and_grad(fn, argnums, has_aux, wrt, holomorphic, allow_int, functional=functional)

  return wrap if f is None else wrap(f)


def grad(
  f: Callable | None = None,
  *,
  argnums: int | Sequence[int] = 0,
  has_aux: bool = False,
  wrt: Filter = Param,
  holomorphic: bool = False,
  allow_int: bool = False,
  reduce_axes: Sequence[Any] = (),
  graph: bool | None = None,
  graph_updates: bool | None = None,
):
  """``jax.grad`` lifted over Modules (as flax.nnx.grad); see :func:`value_and_grad`.

  Returns:
    A function returning ``grads`` (or ``(grads, aux)`` with ``has_aux``).

  Raises:
    TypeError: from JAX, when ``f`` does not return a real scalar.
    WrongLibraryError: an ``eqx.Module`` argument (taken as a pytree of data, as
      ``jax.grad`` takes it) holds a leaf JAX cannot differentiate (a function):
      convert it with ``nnx.from_eqx``, or use ``eqx.filter_grad``.
    NotImplementedError: ``reduce_axes`` is not empty (as flax.nnx).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> grads = nnx.grad(lambda m, x: m(x).sum())(model, jnp.ones((3, 2)))
    >>> grads.bias.value.tolist()
    [3.0]
  """

  _check_reduce_axes(reduce_axes, "nnx.grad")
  functional = not all(resolve(graph, graph_updates))

  def wrap(fn):
    vg = _value_and_grad(fn, argnums, has_aux, wrt, holomorphic, allow_int, "nnx.grad", functional)

    @functools.wraps(fn)
    def g(*args):
      out, grads = vg(*args)
      return (grads, out[1]) if has_aux else grads

    return g

  return wrap if f is None else wrap(f)

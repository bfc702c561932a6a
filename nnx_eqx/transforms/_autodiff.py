"""``nnx.grad`` and ``nnx.value_and_grad`` lifted over Modules (as flax.nnx)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax

from ..graph._filters import Filter, to_predicate
from ..graph._state import State
from ..graph._tracing import current_trace
from ..graph._variables import Param, Variable, new_variable
from . import _lift


def grad_state(w, idxs: list[int], grads: list, trace) -> State | Variable:
  items = []
  for i, g in zip(idxs, grads):
    s = w.slots[i]
    v = new_variable(type(s), g, dict(s._metadata), trace) if isinstance(s, Variable) else g
    items.append((w.paths[i][1:], v))
  if len(items) == 1 and items[0][0] == ():
    return items[0][1]
  return State.from_flat_path(items)


def _value_and_grad(
  f: Callable,
  argnums,
  has_aux: bool,
  wrt: Filter,
  holomorphic: bool,
  allow_int: bool,
  name: str = "nnx.value_and_grad",
):
  single = isinstance(argnums, int)
  argnums_t = (argnums,) if single else tuple(argnums)
  wrt_pred = to_predicate(wrt)
  _lift.reject_bound_method(f, name)

  @functools.wraps(f)
  def wrapper(*args):
    split, w, leaves, rest = _lift.prepare(args)
    node_args = set(split.arg_of_node)
    diff_idx: list[int] = []
    arg_of: list[int] = []
    if w is not None:
      objs = w.leaf_objects()
      arg_of = _lift.leaf_arg_index(w, split)
      diff_idx = [
        i
        for i, (p, o, a) in enumerate(zip(w.paths, objs, arg_of))
        if a in argnums_t and wrt_pred(p[1:], o)
      ]
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

    (value, (aux, updates)), (g_diff, g_arr) = jax.value_and_grad(
      inner, argnums=(0, 1), has_aux=True, holomorphic=holomorphic, allow_int=allow_int
    )([leaves[i] for i in diff_idx], arr_args, [leaves[i] for i in other_idx])
    aux = _lift.apply_updates(w, updates, aux)
    trace = current_trace()
    results = []
    arr_iter = iter(g_arr)
    pos = {i: k for k, i in enumerate(diff_idx)}
    for a in argnums_t:
      if a in node_args:
        idxs = [i for i in diff_idx if arg_of[i] == a]
        results.append(grad_state(w, idxs, [g_diff[pos[i]] for i in idxs], trace))
      else:
        results.append(next(arr_iter))
    grads = results[0] if single else tuple(results)
    return ((value, aux) if has_aux else value), grads

  return wrapper


def value_and_grad(
  f: Callable | None = None,
  *,
  argnums: int | Sequence[int] = 0,
  has_aux: bool = False,
  wrt: Filter = Param,
  holomorphic: bool = False,
  allow_int: bool = False,
):
  """``jax.value_and_grad`` lifted over Modules (as flax.nnx.value_and_grad).

  For each Module argument in ``argnums`` the gradient is a State holding the
  leaves selected by ``wrt`` (default: Params), with the same paths and
  Variable types; for array arguments it is a plain array. Updates to other
  state made inside ``f`` (counters, BatchStats, Rngs counts) are written back.

  Args:
    f: ``f(*args) -> scalar`` (or ``(scalar, aux)`` with ``has_aux``).
    argnums: which positional arguments to differentiate.
    has_aux: ``f`` returns ``(loss, aux)``.
    wrt: filter selecting the differentiated leaves of Module arguments.
    holomorphic, allow_int: passed to ``jax.value_and_grad``.

  Returns:
    A function returning ``(value, grads)`` or ``((value, aux), grads)``.

  Raises:
    TypeError: from JAX, when ``f`` does not return a real scalar.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> loss, grads = nnx.value_and_grad(lambda m: m(jnp.ones((1, 2))).sum())(model)
    >>> grads.kernel.value.tolist()
    [[1.0], [1.0]]
  """

  def wrap(fn):
    return _value_and_grad(fn, argnums, has_aux, wrt, holomorphic, allow_int)

  return wrap if f is None else wrap(f)


def grad(
  f: Callable | None = None,
  *,
  argnums: int | Sequence[int] = 0,
  has_aux: bool = False,
  wrt: Filter = Param,
  holomorphic: bool = False,
  allow_int: bool = False,
):
  """``jax.grad`` lifted over Modules (as flax.nnx.grad); see :func:`value_and_grad`.

  Returns:
    A function returning ``grads`` (or ``(grads, aux)`` with ``has_aux``).

  Raises:
    TypeError: from JAX, when ``f`` does not return a real scalar.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> grads = nnx.grad(lambda m, x: m(x).sum())(model, jnp.ones((3, 2)))
    >>> grads.bias.value.tolist()
    [3.0]
  """

  def wrap(fn):
    vg = _value_and_grad(fn, argnums, has_aux, wrt, holomorphic, allow_int, "nnx.grad")

    @functools.wraps(fn)
    def g(*args):
      out, grads = vg(*args)
      return (grads, out[1]) if has_aux else grads

    return g

  return wrap if f is None else wrap(f)

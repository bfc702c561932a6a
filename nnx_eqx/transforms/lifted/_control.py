"""``nnx.cond``, ``nnx.switch``, ``nnx.fori_loop``, ``nnx.while_loop``:
``jax.lax`` control flow lifted over Modules (as flax.nnx).

Module state a branch or loop body changes is returned from every branch /
carried through the loop; state no branch changes stays a closed-over
constant (see ``_carry``). Bodies may not add or remove Module attributes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ...graph.walk._graph_mode import get_graph_mode
from .._errors import LiftedStructureError
from ..axes._carry import (
  NodeRef,
  Promote,
  check_same,
  check_tree,
  fill_refs,
  first_places,
  has_refs,
  mark_nodes,
)
from ..lifting import _lift
from ..lifting._dispatch import Dispatcher, join_rest


def _structure_error(name: str) -> LiftedStructureError:
  return LiftedStructureError(
    f"{name}: a branch or body changed the structure of a Module (added or removed an"
    " attribute, replaced a Variable, or returned a new Module). Fix: create that state"
    " before the call, with the shape it will have."
  )


def _changed(name: str, upd: _lift.Updates, promoted: tuple) -> dict:
  if upd.structure is not None:
    raise _structure_error(name)
  changed = dict(zip(upd.index, upd.values))
  new = frozenset(changed) - frozenset(promoted)
  if new:
    raise Promote(new)
  return changed


# --------------------------------------------------------------------------
# cond / switch
# --------------------------------------------------------------------------
def _branch_pure(key, leaves, dyn):
  (name, branches, graphdef, split), spec = key
  index, _ = join_rest(spec, dyn)
  promoted: tuple = ()
  while True:
    fns = [_branch_fn(b, (name, graphdef, split, spec, promoted)) for b in branches]
    try:
      # All of ``dyn`` (the index too, when dynamic) goes in as operands, so the
      # branch functions close over no values and can be reused across calls.
      if name == "nnx.cond":
        out, vals = jax.lax.cond(index, fns[0], fns[1], leaves, list(dyn))
      else:
        out, vals = jax.lax.switch(index, fns, leaves, list(dyn))
      return out, _lift.Updates(None, promoted, vals)
    except Promote as e:
      promoted = tuple(sorted(set(promoted) | e.indices))


class CondBranches:
  """The branch functions ``jax.lax.cond``/``switch`` trace for one user branch
  ``fn``, one per lifting context ``(name, graphdef, split, spec, promoted)``.

  ``jax.lax.cond`` caches its traces by the identity of the functions it is
  given; handing it the same function for the same ``fn`` and context (a
  branch used twice in one call, or the same branch in later calls) lets it
  trace once (flax.nnx 0.12.12 caches its branch wrappers for the same
  reason). ``fn`` is held weakly, so a local branch function can still be freed.
  """

  def __init__(self, fn: Callable, graph: bool):
    try:
      self.fn_ref: Callable[[], Callable | None] = weakref.ref(fn)
    except TypeError:  # not cached (see cond_branches): hold it
      self.fn_ref = lambda: fn
    self.graph = graph
    self.by_context: dict = {}

  def branch(self, context: tuple) -> Callable:
    if (out := self.by_context.get(context)) is None:
      out = self.by_context[context] = _make_branch(self.fn_ref, context)
    return out


def _make_branch(fn_ref, context):
  name, graphdef, split, spec, promoted = context

  def branch(leaves, dyn):
    _, rest = join_rest(spec, dyn)
    fn = fn_ref()
    assert fn is not None  # the caller of cond/switch holds it
    out, upd = _lift.call_inner(fn, graphdef, split, leaves, rest)
    changed = _changed(name, upd, promoted)
    return out, [changed.get(i, leaves[i]) for i in promoted]

  return branch


_COND_BRANCHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cond_branches(fn: Callable, graph: bool) -> CondBranches:
  """The :class:`CondBranches` of ``fn`` (the same object while ``fn`` lives);
  a new one each time for a callable that cannot be weakly referenced or
  hashed (an instance of a class with ``__slots__`` but no ``__weakref__``)."""
  try:
    per_mode = _COND_BRANCHES.setdefault(fn, {})
  except TypeError:
    return CondBranches(fn, graph)
  if (out := per_mode.get(graph)) is None:
    out = per_mode[graph] = CondBranches(fn, graph)
  return out


def _branch_fn(fn: Callable, context: tuple) -> Callable:
  return cond_branches(fn, get_graph_mode()).branch(context)


_BRANCH = Dispatcher(_branch_pure)


def _run_branches(name: str, index: Any, branches: tuple, operands: tuple):
  split, w, leaves, rest = _lift.prepare(operands)
  static = (name, branches, w.graphdef if w is not None else None, split)
  out, updates = _BRANCH(static, leaves, (index, rest))
  return _lift.apply_updates(w, updates, out)


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
  """``jax.lax.cond`` lifted over Modules (as flax.nnx.cond).

  ``true_fun(*operands)`` or ``false_fun(*operands)`` runs; updates to Module
  operands made by the branch that runs are written back. Both branches
  must return the same structure.

  Raises:
    LiftedStructureError: a branch adds/removes Module attributes or returns a Module.
    TypeError: from JAX, when the branches return different structures.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Counter(nnx.Module):
    ...   def __init__(self):
    ...     self.n = nnx.Variable(jnp.array(0))
    >>> c = Counter()
    >>> def inc(c, k): c.n += k
    >>> def keep(c, k): pass
    >>> nnx.cond(jnp.array(True), inc, keep, c, 5); nnx.cond(jnp.array(False), inc, keep, c, 5)
    >>> int(c.n.value)
    5
  """
  return _run_branches("nnx.cond", pred, (true_fun, false_fun), operands)


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
  """``jax.lax.switch`` lifted over Modules (as flax.nnx.switch).

  Raises:
    LiftedStructureError: a branch adds/removes Module attributes or returns a Module.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> branches = [lambda m, x: m(x), lambda m, x: -m(x), lambda m, x: x]
    >>> nnx.switch(jnp.array(2), branches, m, jnp.ones((1, 2))).tolist()
    [[1.0, 1.0]]
  """
  return _run_branches("nnx.switch", index, tuple(branches), operands)


# --------------------------------------------------------------------------
# fori_loop / while_loop
# --------------------------------------------------------------------------
def _loop_pure(key, leaves, dyn):
  (name, fns, graphdef, split), spec = key
  bounds, rest = join_rest(spec, dyn)
  n_nodes = len(split.arg_of_node)
  refs = [NodeRef(k) for k in first_places(graphdef, n_nodes)]
  marked = _lift.join_args(split, rest, refs)[0]
  us0, val_tree = jax.tree_util.tree_flatten(marked)
  us0 = [jnp.asarray(x) for x in us0]
  rest_tree = jax.tree_util.tree_structure(rest)
  names = [
    f"init_val{jax.tree_util.keystr(p)}" for p, _ in jax.tree_util.tree_leaves_with_path(marked)
  ]
  promoted: tuple = ()

  def call(fn, st, us):
    nl = list(leaves)
    for k, i in enumerate(promoted):
      nl[i] = st[k]
    rest_step = jax.tree_util.tree_unflatten(rest_tree, us)
    return _lift.call_inner(
      fn, graphdef, split, nl, rest_step, after=lambda nodes, o: mark_nodes(o, nodes, name)
    )

  def body(fn, st, us):
    out, upd = call(fn, st, us)
    changed = _changed(name, upd, promoted)
    st_out = [changed.get(i, st[k]) for k, i in enumerate(promoted)]
    check_same(st_out, st, [f"the carried state leaf {i}" for i in promoted], name)
    us_out, tree = jax.tree_util.tree_flatten(out)
    check_tree(tree, val_tree, "loop value", name)
    check_same(us_out, us, names, name)
    return st_out, us_out

  while True:
    init = ([leaves[i] for i in promoted], us0)
    try:
      if name == "nnx.fori_loop":
        lower, upper, unroll = bounds
        kw = {} if unroll is None else {"unroll": unroll}
        st, us = jax.lax.fori_loop(
          lower, upper, lambda i, c: body(lambda v: fns[0](i, v), *c), init, **kw
        )
      else:
        cond_fun, body_fun = fns

        def check(c):
          out, upd = call(cond_fun, *c)
          if upd.index or upd.structure is not None:
            raise LiftedStructureError(
              f"{name}: cond_fun changed Module state. Fix: only read state in cond_fun;"
              " update it in body_fun."
            )
          return out

        st, us = jax.lax.while_loop(check, lambda c: body(body_fun, *c), init)
      out = jax.tree_util.tree_unflatten(val_tree, us)
      return out, _lift.Updates(None, promoted, list(st))
    except Promote as e:
      promoted = tuple(sorted(set(promoted) | e.indices))


_LOOP = Dispatcher(_loop_pure)


def _run_loop(name: str, bounds: Any, fns: tuple, init_val: Any):
  args = (init_val,)
  split, w, leaves, rest = _lift.prepare(args)
  static = (name, fns, w.graphdef if w is not None else None, split)
  out, updates = _LOOP(static, leaves, (bounds, rest))
  out = _lift.apply_updates(w, updates, out)
  if has_refs(out):
    out = fill_refs(out, _lift.split_args(args)[1])
  return out


def fori_loop(
  lower: Any, upper: Any, body_fun: Callable, init_val: Any, *, unroll: int | bool | None = None
) -> Any:
  """``jax.lax.fori_loop`` lifted over Modules (as flax.nnx.fori_loop).

  ``init_val`` may hold Modules; ``body_fun(i, val)`` must return ``val``
  with the same Modules (updated in place) and arrays of the same shapes.
  State the body changes is carried; the rest stays constant.

  Raises:
    CarryMismatchError: the value changes structure, shape or dtype (named).
    LiftedStructureError: the body adds/removes Module attributes.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Counter(nnx.Module):
    ...   def __init__(self):
    ...     self.n = nnx.Variable(jnp.array(0))
    >>> def body(i, val):
    ...   c, total = val
    ...   c.n += 1
    ...   return c, total + i
    >>> c, total = nnx.fori_loop(0, 4, body, (Counter(), jnp.array(0)))
    >>> int(c.n.value), int(total)
    (4, 6)
  """
  return _run_loop("nnx.fori_loop", (lower, upper, unroll), (body_fun,), init_val)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
  """``jax.lax.while_loop`` lifted over Modules (as flax.nnx.while_loop).

  ``cond_fun(val)`` may read Module state but not change it.

  Raises:
    CarryMismatchError: the value changes structure, shape or dtype (named).
    LiftedStructureError: ``cond_fun`` changes state, or the body adds/removes
      Module attributes.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Counter(nnx.Module):
    ...   def __init__(self):
    ...     self.n = nnx.Variable(jnp.array(0))
    >>> def body(c):
    ...   c.n += 3
    ...   return c
    >>> c = nnx.while_loop(lambda c: c.n < 10, body, Counter())
    >>> int(c.n.value)
    12
  """
  return _run_loop("nnx.while_loop", None, (cond_fun, body_fun), init_val)

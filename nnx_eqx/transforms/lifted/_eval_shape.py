"""``nnx.eval_shape``: ``jax.eval_shape`` lifted over Modules (as flax.nnx)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from ...graph.api import _functional as _graph
from ...graph.variables._hijax import holds_hijax
from ...graph.variables._refs import Ref
from ...module import with_vars
from ..lifting import _lift
from ..lifting._dispatch import join_rest, split_rest


def eval_shape(f: Callable, *args: Any, graph_updates: bool = True, **kwargs: Any) -> Any:
  """Runs ``f`` abstractly: no computation, no allocation.

  Modules returned by ``f`` come back with every array replaced by a
  ``jax.ShapeDtypeStruct`` (shape, dtype and sharding), and hijax and ref-mode
  Variables made ordinary (an abstract value lives in no cell or ``jax.Ref``;
  flax.nnx also gives ref-mode ones, still reporting ``ref=True``), e.g. an abstract
  model to restore a checkpoint into, or to derive shardings from before
  any parameter exists. Module arguments are not modified.

  Args:
    f: the function; Module arguments may be concrete or abstract.
    *args, **kwargs: its arguments.
    graph_updates: False (flax's ``graph_updates=False``, also implied by
      ``graph=False``): the arguments may not share a Variable and ``f`` may
      not return one passed in, as in flax.nnx.

  Returns:
    ``f``'s output with ``jax.ShapeDtypeStruct`` leaves (inside Modules too).

  Raises:
    SharedReferenceError: without graph updates, a Variable passed twice or
      returned (a ``ValueError``, as flax.nnx's "Duplicate Param").
    Whatever ``f`` raises while tracing.

  Example:
    >>> import nnx_eqx as nnx
    >>> abstract = nnx.eval_shape(lambda: nnx.Linear(1024, 1024, rngs=nnx.Rngs(0)))
    >>> abstract.kernel.value
    ShapeDtypeStruct(shape=(1024, 1024), dtype=float32)
  """
  _lift.reject_bound_method(f, "nnx.eval_shape")
  split, w, leaves, rest = _lift.prepare((*args, kwargs))
  dyn, spec = split_rest(rest)
  graphdef = w.graphdef if w is not None else None
  if not graph_updates:
    _lift.check_no_input_alias(w, split, "eval_shape")

  def call(*a):
    out = f(*a[:-1], **a[-1])
    # an abstract value cannot live in a hijax cell or a jax.Ref: those Variables come out
    # ordinary
    if holds_hijax(out) or any(isinstance(x, Ref) for x in jax.tree.leaves(out)):
      return with_vars(out, hijax=False, ref=False, allow_duplicates=True)
    return out

  def pure(leaves, dyn):
    return _lift.call_inner(
      call,
      graphdef,
      split,
      leaves,
      join_rest(spec, dyn),
      values_only=not graph_updates,
      name="eval_shape",
    )

  out, updates = jax.eval_shape(pure, leaves, dyn)
  if updates.structure is None:
    return out
  g2, _ = updates.structure
  _, out_nodes = _graph.unflatten(g2, updates.values)
  return jax.tree_util.tree_map(
    lambda h: out_nodes[h.k] if isinstance(h, _lift.Hole) else h,
    out,
    is_leaf=lambda x: isinstance(x, _lift.Hole),
  )

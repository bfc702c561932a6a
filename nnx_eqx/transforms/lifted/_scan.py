"""``nnx.scan``: ``jax.lax.scan`` lifted over Modules (as flax.nnx.scan).

The scan is built the way one would write it by hand: stacked state and
scanned arrays are ``xs``; the carry argument and carried state are the
carry; broadcast state is closed over as a constant. Only stacked state the
body changes comes out as stacked outputs, and only broadcast state it
changes is carried (found by tracing; see ``_carry``), so a scan over layers
lowers to the same program as a hand-written ``jax.lax.scan`` over the split
state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import spmd
from ...graph.api import _functional as _graph
from ...graph.variables._variables import Variable
from ...module._rngs import RngState
from .._errors import AxisSpecError, LiftedStructureError, ScanLengthError
from ..axes._carry import NodeRef, Promote, check_same, check_tree, fill_refs, has_refs, mark_nodes
from ..axes._leaf_axes import GraphAxes, check_axes, describe_rest, describe_state, norm_axis
from ..axes._node_outputs import NewNodes
from ..axes._specs import (
  Carry,
  StateAxes,
  arg_specs,
  broadcast_prefix,
  check_aliasing,
  is_axis_leaf,
  leaf_axes,
)
from ..lifting import _lift
from ..lifting._dispatch import Dispatcher, Lifted, join_rest, positional, rest_leaves
from ..lifting._foreign_args import explain_argument_error
from ..lifting._seed_hooks import SEED_HOOKS

NAME = "nnx.scan"
_DEFAULT_AXES = (Carry, 0)


def _carry_position(axes: Any, name: str) -> Any:
  """``'all'``, the index of the top-level ``Carry``, or None."""
  if axes is Carry:
    return "all"
  if not isinstance(axes, tuple):
    _no_nested_carry(axes, name, ())
    return None
  found = [i for i, a in enumerate(axes) if a is Carry]
  for i, a in enumerate(axes):
    if a is not Carry:
      _no_nested_carry(a, name, (i,))
  if len(found) > 1:
    raise AxisSpecError(
      f"{NAME}: Found multiple Carry definitions in {name} (entries {found}). Fix: mark one"
      " entry as nnx.Carry and pack the carried values into it (e.g. a tuple)."
    )
  return found[0] if found else None


def _given(name: str, axes: Any) -> str:
  """``name=axes`` as the user wrote it, or as the default when not passed."""
  if axes is _DEFAULT_AXES:
    return f"{name} not passed, so its default {axes!r}"
  return f"{name}={axes!r}"


def check_scan_axes(in_axes: Any, out_axes: Any) -> tuple:
  """``(in carry position, out carry position)``; checked when ``nnx.scan`` is applied.

  Raises:
    AxisSpecError: several carries, a carry on one side only, or a broadcast
      (None) output axis.
  """
  in_carry = _carry_position(in_axes, "in_axes")
  out_carry = _carry_position(out_axes, "out_axes")
  if (in_carry is None) != (out_carry is None):
    with_carry, without = ("in_axes", "out_axes") if out_carry is None else ("out_axes", "in_axes")
    default = [n for n, a in (("in_axes", in_axes), ("out_axes", out_axes)) if a is _DEFAULT_AXES]
    fix = (
      f"pass {default[0]} too: {default[0]}=0 (no carry), or"
      " in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0)"
      if default
      else "e.g. in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0)"
    )
    raise AxisSpecError(
      f"{NAME}: If one of in_axes or out_axes has Carry, the other must also have Carry:"
      f" {with_carry} has nnx.Carry and {without} has none (got {_given('in_axes', in_axes)};"
      f" {_given('out_axes', out_axes)}). Fix: {fix}."
    )
  for leaf in jax.tree_util.tree_leaves(out_axes, is_leaf=is_axis_leaf):
    if leaf is None or (isinstance(leaf, StateAxes) and None in leaf.axes):
      raise AxisSpecError(
        # flax's wording ("Got StateAxes"), which its tests match, then the marker as written
        f"{NAME}: Cannot broadcast output state. Got"
        f" {'None' if leaf is None else f'StateAxes ({leaf!r})'} in out_axes={out_axes!r}:"
        " scan stacks every output over the scanned axis. Fix: give the output an int axis,"
        " or return state that stays the same through nnx.Carry."
      )
  return in_carry, out_carry


def _no_nested_carry(axes, name, at) -> None:
  for path, leaf in jax.tree_util.tree_leaves_with_path(axes, is_leaf=is_axis_leaf):
    if leaf is Carry:
      raise AxisSpecError(
        f"{NAME}: nnx.Carry must be a top-level entry of {name}, found at {at + tuple(path)}."
        " Fix: make the whole argument the carry, e.g. in_axes=(nnx.Carry, 0)."
      )


class _Plan:
  """Where every leaf goes in the scan (computed at trace time)."""

  def __init__(self, w: ScanWrapped, graphdef, split, spec, rest, leaves, dyn):
    self.graphdef, self.split, self.spec = graphdef, split, spec
    self.in_carry, self.out_carry = check_scan_axes(w.in_axes, w.out_axes)
    prefix = self._carry_prefix(w.in_axes, len(rest))
    node_specs, rest_specs = arg_specs(split, rest, prefix, "in_axes")
    self.node_specs = node_specs
    objs = []
    if graphdef is not None:
      walked = _graph.walk_uncached(_graph.unflatten(graphdef, leaves))
      check_aliasing(split, node_specs, walked, "in_axes", w.name)
      objs = walked.leaf_objects()
    paths = graphdef.paths if graphdef is not None else ()
    self.state_axes = leaf_axes(split, node_specs, paths, objs, "in_axes")
    # A broadcast Rngs stream gives every step the same key and is not advanced
    # (as flax.nnx); other broadcast state changed by the body is carried.
    self.fixed_rng = frozenset(
      i for i, o in enumerate(objs) if isinstance(o, RngState) and self.state_axes[i] is None
    )
    self.state_names = [describe_state(split, p) for p in paths]
    self.rest_all = rest_leaves(spec, dyn)
    self.rest_names = describe_rest(rest)
    self.rest_axes = rest_specs
    self._check_static(spec)
    self.length = self._length(w, leaves)

  def _carry_prefix(self, in_axes, n_args):
    if self.in_carry == "all":
      return Carry
    return in_axes

  def _check_static(self, spec) -> None:
    for a, m, n in zip(self.rest_axes, spec.dynamic, self.rest_names):
      if isinstance(a, int) and not m:
        raise AxisSpecError(
          f"{NAME}: in_axes scans axis {a} of {n}, which is not an array. Fix: pass an array."
        )

  def _length(self, w: ScanWrapped, leaves) -> int:
    vals = [*leaves, *self.rest_all]
    axes = [*self.state_axes, *self.rest_axes]
    names = [*self.state_names, *self.rest_names]
    n = check_axes(vals, axes, names, NAME, "in_axes", w.length, ScanLengthError, "length")
    if n is None:
      raise ScanLengthError(
        f"{NAME}: nothing is scanned over (no int in in_axes) and no length was given."
        " Fix: pass length=n."
      )
    return n


class ScanWrapped(Lifted):
  """The callable returned by :func:`scan`."""

  name = NAME

  def __init__(self, fn, length, reverse, unroll, in_axes, out_axes, tm):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.length = length
    self.reverse = reverse
    self.unroll = unroll
    self.in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
    self.out_axes = tuple(out_axes) if isinstance(out_axes, list) else out_axes
    check_scan_axes(self.in_axes, self.out_axes)  # when applied, as flax does
    self.tm = dict(tm or {})
    self._dispatch = Dispatcher(self._pure)

  def __call__(self, *args, **kwargs):
    args = positional(self.fn, args, kwargs, self.name)
    split, w, leaves, rest = _lift.prepare(args)
    try:
      out, updates = self._dispatch(self._static(split, w), leaves, rest)
    except TypeError as e:
      explain_argument_error(args, "nnx.scan", e)
      raise
    out = _lift.apply_updates(w, updates, out)
    if has_refs(out):
      out = fill_refs(out, _lift.split_args(args)[1])
    return out

  def _pure(self, key, leaves, dyn):
    (graphdef, split), spec = key
    rest = join_rest(spec, dyn)
    plan = _Plan(self, graphdef, split, spec, rest, leaves, dyn)
    promoted: frozenset = frozenset()
    while True:
      try:
        return self._run(plan, leaves, promoted)
      except Promote as e:
        promoted = promoted | e.indices

  # -- one attempt ----------------------------------------------------------
  def _run(self, plan: _Plan, leaves, promoted: frozenset):
    sa, ra = plan.state_axes, plan.rest_axes
    carry_idx = [i for i, a in enumerate(sa) if a is Carry or i in promoted]
    stk_idx = [i for i, a in enumerate(sa) if isinstance(a, int) and a is not Carry]
    uc_idx = [j for j, a in enumerate(ra) if a is Carry]
    xs_idx = [j for j, a in enumerate(ra) if isinstance(a, int) and a is not Carry]
    rest_all = list(plan.rest_all)
    for j in uc_idx:
      rest_all[j] = jnp.asarray(rest_all[j])
    st_c0 = [leaves[i] for i in carry_idx]
    us_c0 = [rest_all[j] for j in uc_idx]
    st_x0 = [_to_front(leaves[i], sa[i]) for i in stk_idx]
    us_x0 = [_to_front(rest_all[j], ra[j]) for j in xs_idx]
    box: dict = {}
    body = functools.partial(
      self._body, plan, leaves, rest_all, carry_idx, stk_idx, uc_idx, xs_idx, promoted, box
    )
    (st_c, us_c), (ys_st, ys_us) = jax.lax.scan(
      body,
      (st_c0, us_c0),
      (st_x0, us_x0),
      length=plan.length,
      reverse=self.reverse,
      unroll=self.unroll,
    )
    pos_c = {i: k for k, i in enumerate(carry_idx)}
    pos_y = {i: k for k, i in enumerate(box["ys_idx"])}
    index = sorted(set(box["carry_changed"]) | set(box["ys_idx"]))
    values = [st_c[pos_c[i]] if i in pos_c else _from_front(ys_st[pos_y[i]], sa[i]) for i in index]
    carry_out = jax.tree_util.tree_unflatten(box["carry_tree"], us_c)
    ys = jax.tree_util.tree_unflatten(
      box["ys_tree"], [_from_front(y, a) for y, a in zip(ys_us, box["ys_axes"])]
    )
    if box["new_nodes"] is not None:  # Modules created by the body, stacked
      ys = box["new_nodes"].rebuild(ys)
    return self._join_out(plan, carry_out, ys), _lift.Updates(None, tuple(index), values)

  def _body(self, plan, leaves, rest_all, carry_idx, stk_idx, uc_idx, xs_idx, promoted, box, c, x):
    st_c, us_c = c
    st_x, us_x = x
    node_leaves = list(leaves)
    for k, i in enumerate(carry_idx):
      node_leaves[i] = st_c[k]
    for k, i in enumerate(stk_idx):
      node_leaves[i] = st_x[k]
    rl = list(rest_all)
    for k, j in enumerate(uc_idx):
      rl[j] = us_c[k]
    for k, j in enumerate(xs_idx):
      rl[j] = us_x[k]
    rest_step = jax.tree_util.tree_unflatten(plan.spec.treedef, rl)
    axes = GraphAxes(
      plan.split,
      plan.graphdef,
      plan.node_specs,
      [a if isinstance(a, int) and a is not Carry else None for a in plan.state_axes],
      [np.ndim(v) for v in leaves],
      None,
      self.tm,
      NAME,
    )
    carry_in = self._carry_in(plan, rest_step)
    hooks = _BodyHooks(self, plan, axes, carry_in)
    out, upd = _lift.call_inner(
      self.fn,
      plan.graphdef,
      plan.split,
      node_leaves,
      rest_step,
      before=hooks.before,
      after=hooks.after,
    )
    if upd.structure is not None:
      raise LiftedStructureError(
        f"{NAME}: the body changed the structure of a Module (added or removed an attribute,"
        " or replaced a Variable). Fix: create all state before the scan (e.g. an"
        " Intermediate/Cache of the final shape), or use nnx.vmap to create stacked layers."
      )
    changed = dict(zip(upd.index, upd.values))
    for i in plan.fixed_rng.intersection(changed):
      del changed[i]
    new = frozenset(i for i in changed if plan.state_axes[i] is None and i not in promoted)
    if new:
      raise Promote(new)
    st_out = [changed.get(i, st_c[k]) for k, i in enumerate(carry_idx)]
    check_same(st_out, st_c, [f"the carried {plan.state_names[i]}" for i in carry_idx], NAME)
    carry_marked, ys = out
    us_out, carry_tree = jax.tree_util.tree_flatten(carry_marked)
    check_tree(carry_tree, hooks.carry_in_tree, "carry", NAME)
    check_same(us_out, us_c, hooks.carry_names, NAME)
    ys_leaves, ys_tree = jax.tree_util.tree_flatten(ys)
    ys_axes = broadcast_prefix(hooks.ys_prefix, ys, "out_axes") if ys_leaves else []
    for a in ys_axes:
      if not isinstance(a, int) or a is Carry:
        raise AxisSpecError(
          f"{NAME}: out_axes gives {a!r} for a stacked output; scan outputs are stacked."
          " Fix: use an int axis (e.g. 0) for every output that is not the carry."
        )
    ys_idx = [i for i in stk_idx if i in changed]
    box.update(
      ys_idx=ys_idx,
      carry_changed=[i for i in carry_idx if i in changed],
      carry_tree=carry_tree,
      ys_tree=ys_tree,
      ys_axes=ys_axes,
      new_nodes=hooks.new_nodes,
    )
    return (st_out, us_out), ([changed[i] for i in ys_idx], ys_leaves)

  def _carry_in(self, plan, rest_step):
    n = len(plan.split.arg_of_node)
    marked = _lift.join_args(plan.split, rest_step, [NodeRef(k) for k in range(n)])
    if plan.in_carry is None:
      return None
    if plan.in_carry == "all":  # the one argument is the carry (as flax.nnx)
      if len(marked) != 1:
        raise AxisSpecError(
          f"{NAME}: When in_axes=Carry, the function must take exactly one argument (the"
          f" carry), got {len(marked)}. Fix: pack the arguments into one tuple, or use"
          " in_axes=(nnx.Carry, 0, ...) to scan over the others."
        )
      return marked[0]
    return marked[plan.in_carry]

  def _join_out(self, plan, carry_out, ys):
    if plan.out_carry is None:
      return ys
    if plan.out_carry == "all":
      return carry_out
    out = list(ys)
    out[plan.out_carry] = carry_out
    return tuple(out)


class _BodyHooks:
  """``call_inner`` hooks of a scan step: metadata, carry nodes, output split."""

  def __init__(self, w: ScanWrapped, plan: _Plan, axes: GraphAxes, carry_in):
    self.w, self.plan, self.axes = w, plan, axes
    self.carry_in_tree = jax.tree_util.tree_structure(carry_in)
    self.carry_names = [
      f"carry{jax.tree_util.keystr(p)}" for p, _ in jax.tree_util.tree_leaves_with_path(carry_in)
    ]
    self.ys_prefix: Any = None

  def before(self, nodes) -> None:
    self.nodes = nodes
    self.axes.before(nodes)

  def after(self, nodes, out):
    tm = self.w.tm
    if tm and nodes:
      slots = _graph.walk_uncached(nodes).slots
      for i, s in enumerate(slots):
        a = self.axes.state_axes[i]
        if isinstance(s, Variable) and isinstance(a, int):
          spmd.add_axis(s, norm_axis(a, self.axes.outer_ndims[i]), tm)
    plan = self.plan
    oa = self.w.out_axes
    if plan.out_carry is None:
      carry, ys, self.ys_prefix = None, out, oa
    elif plan.out_carry == "all":
      carry, ys, self.ys_prefix = out, None, None
    else:
      if not isinstance(out, tuple) or len(out) != len(oa):
        raise AxisSpecError(
          f"{NAME}: out_axes={oa!r} describes a tuple of {len(oa)} outputs, but the body"
          f" returned {type(out).__name__}. Fix: return a tuple, e.g. (carry, y)."
        )
      carry = out[plan.out_carry]
      ys = tuple(None if i == plan.out_carry else o for i, o in enumerate(out))
      self.ys_prefix = tuple(None if i == plan.out_carry else a for i, a in enumerate(oa))
    carry = mark_nodes(carry, tuple(nodes), "the carry returned by the scan body")
    self.new_nodes = None
    if any(map(_lift._is_node_leaf, jax.tree_util.tree_leaves(ys, is_leaf=_lift._is_node_leaf))):
      self.new_nodes = NewNodes(nodes, ys, self.ys_prefix, NAME)
      ys, self.ys_prefix = self.new_nodes.ys, self.new_nodes.ys_prefix
    return carry, ys


def _to_front(x, axis: int):
  return x if axis == 0 else jnp.moveaxis(x, axis, 0)


def _from_front(x, axis: int):
  if axis == 0:
    return x
  return jnp.moveaxis(x, 0, axis if axis >= 0 else axis % np.ndim(x))


def scan(
  f: Callable | None = None,
  *,
  length: int | None = None,
  reverse: bool = False,
  unroll: int | bool = 1,
  in_axes: Any = _DEFAULT_AXES,
  out_axes: Any = _DEFAULT_AXES,
  transform_metadata: Mapping[str, Any] | None = None,
  **seed_options: Any,
):
  """``jax.lax.scan`` lifted over Modules (as flax.nnx.scan).

  ``in_axes`` marks one argument as the carry (``nnx.Carry``), scans others
  over an axis (``int``) or broadcasts them (``None``); a Module argument
  may use ``nnx.StateAxes`` to scan its Params over axis 0 (a stack of
  layers), carry some state (``nnx.Carry``) and broadcast the rest.
  ``out_axes`` says how the output is split: ``nnx.Carry`` (the function
  returns the carry), ``(nnx.Carry, 0)`` (it returns ``(carry, y)``, ``y``
  stacked) or an axis (no carry). The carry must keep its structure, shapes
  and dtypes.

  State updates propagate: stacked state the body changes comes back
  stacked; broadcast state it changes (BatchNorm statistics, counters, Rngs
  counts) is carried from step to step and written back at the end. Nothing
  unchanged is carried or returned, so the program equals a hand-written
  ``jax.lax.scan`` over the split state.

  Rngs: an unsplit stream is carried, so each step draws new keys and the
  stream's count advances by (draws per step) × length. A stream split with
  ``nnx.split_rngs(splits=length)`` and scanned with axis 0 gives each step
  its own key (the split call advances it by 1).

  The seeds' keyword forms (``variable_axes``, ``variable_broadcast``,
  ``variable_carry``, ``split_rngs``, ``data_transform``, ``metadata_params``,
  ``is_init``) decorate ``__init__``/``__call__`` instead; see :class:`nnx.Scan`.

  Args:
    f: the body; may decorate methods.
    length: the number of steps (inferred from scanned axes if omitted).
    reverse, unroll: as ``jax.lax.scan``.
    in_axes: a prefix of the positional arguments (ints, None, Carry, StateAxes).
    out_axes: a prefix of the output (Carry, ints).
    transform_metadata: e.g. ``{nnx.PARTITION_NAME: 'layers'}`` for the
      stacked axis in ``sharding`` metadata.

  Returns:
    The scanned function. Outside a trace it compiles once per graph and
    shapes (a second call does not retrace).

  Raises:
    ScanLengthError: scanned axes disagree with each other or ``length``.
    CarryMismatchError: the carry changed structure, shape or dtype (named).
    AxisRankError: a scanned axis is not below its array's rank.
    AxisSpecError: misplaced ``Carry`` or outputs that cannot be stacked.
    LiftedStructureError: the body added or removed Module attributes.
    WrongLibraryError: an ``eqx.Module`` argument (a pytree of data) carried or
      scanned holds a leaf JAX cannot trace (convert it with ``nnx.from_eqx``).

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.split_rngs(splits=4)
    ... @nnx.vmap(in_axes=0, out_axes=0)
    ... def make(rngs):
    ...   return nnx.Linear(3, 3, rngs=rngs)
    >>> layers = make(nnx.Rngs(0))
    >>> @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    ... def forward(x, layer):
    ...   return jax.nn.relu(layer(x))
    >>> forward(jnp.ones((2, 3)), layers).shape
    (2, 3)
  """
  if seed_options or (isinstance(f, type)):
    seed_options.setdefault("metadata_params", transform_metadata)
    return SEED_HOOKS["scan"](
      f,
      length=length,
      reverse=reverse,
      unroll=unroll,
      in_axes=0 if in_axes is _DEFAULT_AXES else in_axes,
      out_axes=0 if out_axes is _DEFAULT_AXES else out_axes,
      **seed_options,
    )

  def wrap(fn: Callable) -> ScanWrapped:
    _lift.reject_bound_method(fn, "nnx.scan")
    return ScanWrapped(fn, length, reverse, unroll, in_axes, out_axes, transform_metadata)

  return wrap if f is None else wrap(f)


__all__ = ["scan", "Carry", "StateAxes", "ScanWrapped"]

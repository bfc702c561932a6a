"""``nnx.vmap``: ``jax.vmap`` lifted over Modules (as flax.nnx.vmap)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import jax

from ...graph.api import _functional as _graph
from .._errors import AxisSpecError, BroadcastUpdateError
from ..axes._leaf_axes import GraphAxes, check_axes, describe_rest, describe_state
from ..axes._specs import arg_specs, check_aliasing, check_no_carry, leaf_axes
from ..lifting import _lift
from ..lifting._dispatch import Dispatcher, Lifted, join_rest

_OUT_AXES_AT = re.compile(r"out_axes\[(\d+)\]")
_BATCHED_ON = re.compile(r"batched on axis (\d+)")


class VmapWrapped(Lifted):
  """The callable returned by :func:`vmap`."""

  name = "nnx.vmap"

  def __init__(
    self, fn, in_axes, out_axes, axis_name, axis_size, spmd_axis_name, tm, graph_updates=True
  ):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.graph_updates = graph_updates
    self.in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
    self.out_axes = tuple(out_axes) if isinstance(out_axes, list) else out_axes
    self.axis_name = axis_name
    self.axis_size = axis_size
    self.spmd_axis_name = spmd_axis_name
    self.tm = dict(tm or {})
    self._dispatch = Dispatcher(self._pure)

  def _pure(self, key, leaves, dyn):
    (graphdef, split), spec = key
    rest = join_rest(spec, dyn)
    node_specs, rest_specs = arg_specs(split, rest, self.in_axes, "in_axes")
    check_no_carry([*node_specs, *rest_specs], "in_axes", self.name)
    check_no_carry([self.out_axes], "out_axes", self.name)
    state_axes: list = []
    if graphdef is not None:
      w = _graph.walk_uncached(_graph.unflatten(graphdef, leaves))
      check_aliasing(split, node_specs, w, "in_axes", self.name)
      objs = w.leaf_objects()
      state_axes = leaf_axes(split, node_specs, graphdef.paths, objs, "in_axes")
      check_no_carry(state_axes, "in_axes", self.name)
    rest_names = describe_rest(rest)
    dyn_axes, dyn_names = [], []
    for a, m, n in zip(rest_specs, spec.dynamic, rest_names):
      if m:
        dyn_axes.append(a)
        dyn_names.append(n)
      elif a is not None:
        raise AxisSpecError(
          f"{self.name}: in_axes maps axis {a} of {n}, which is not an array. Fix: pass an"
          " array, or use None for Python values."
        )
    state_names = [describe_state(split, p) for p in graphdef.paths] if graphdef else []
    check_axes(
      [*leaves, *dyn],
      [*state_axes, *dyn_axes],
      [*state_names, *dyn_names],
      self.name,
      "in_axes",
      self.axis_size,
    )
    # A Variable's value may be a pytree (e.g. a tuple of arrays); only arrays have a rank.
    ndims = [getattr(x, "ndim", 0) for x in leaves]
    axes = GraphAxes(
      split, graphdef, node_specs, state_axes, ndims, self.out_axes, self.tm, self.name
    )
    holder: list = []
    box: dict = {}

    def mapped(node_leaves, dyn_leaves):
      rest_m = join_rest(spec, dyn_leaves)
      out, upd = _lift.call_inner(
        self.fn,
        graphdef,
        split,
        node_leaves,
        rest_m,
        before=axes.before,
        after=axes.after,
        name="vmap",
        no_alias=not self.graph_updates,
      )
      out_leaves, out_tree = jax.tree_util.tree_flatten(out)
      structural = upd.structure is not None
      if structural:
        upd_axes = list(axes.struct_axes)
        check_no_carry(upd_axes, "out_axes", self.name)
      else:
        upd_axes = [state_axes[i] for i in upd.index]
      holder[:] = [*axes.out_leaf_axes, *upd_axes]
      box.update(out_tree=out_tree, n=len(out_leaves), upd=upd, structural=structural)
      return [*out_leaves, *upd.values]

    vmapped = self._map(mapped, (list(state_axes), dyn_axes), holder)
    try:
      res = vmapped(list(leaves), list(dyn))
    except ValueError as e:
      raise self._broadcast_error(e, box, axes) from None
    n, upd = box["n"], box["upd"]
    out = jax.tree_util.tree_unflatten(box["out_tree"], res[:n])
    return out, _lift.Updates(upd.structure, upd.index, res[n:])

  def _map(self, mapped: Callable, in_axes: tuple, holder: list) -> Callable:
    """The JAX mapping of ``mapped``; ``holder`` receives the out axes while tracing."""
    return jax.vmap(
      mapped,
      in_axes=in_axes,
      out_axes=holder,
      axis_name=self.axis_name,
      axis_size=self.axis_size,
      spmd_axis_name=self.spmd_axis_name,
    )

  def _broadcast_error(self, e: ValueError, box: dict, axes: GraphAxes) -> Exception:
    m = _OUT_AXES_AT.search(str(e))
    if m is None or "batched" not in str(e) or "upd" not in box:
      return e
    k = int(m.group(1)) - box["n"]
    detail = f"got axis spec None but output was batched on axis {_batched_axis(e)}"
    if k < 0:
      what = f"output leaf {int(m.group(1))}"
      fix = "give it an int out_axes"
    else:
      structural = box["structural"]
      i = k if structural else box["upd"].index[k]
      what = axes.state_name(structural, i)
      detail = f"at vmap {axes.state_key(structural, i)}: {detail}"
      fix = "give that state an axis with nnx.StateAxes({...: 0}) or update it with a value"
      fix += " that does not depend on the mapped axis"
    return BroadcastUpdateError(
      f"{self.name}: {what} has out axis None (broadcast), but its new value differs per"
      f" mapped index ({detail}). Fix: {fix}."
    )


def _batched_axis(e: ValueError) -> int:
  """The axis JAX reports a broadcast output batched on (0 if it does not say)."""
  m = _BATCHED_ON.search(str(e))
  return int(m.group(1)) if m else 0


def vmap(
  f: Callable | None = None,
  *,
  in_axes: Any = 0,
  out_axes: Any = 0,
  axis_name: Any = None,
  axis_size: int | None = None,
  spmd_axis_name: Any = None,
  transform_metadata: Mapping[str, Any] | None = None,
  graph_updates: bool = True,
):
  """``jax.vmap`` lifted over Modules (as flax.nnx.vmap).

  Module arguments are mapped over their state: an ``int`` in ``in_axes``
  maps every leaf of the Module over that axis, ``None`` broadcasts it, and
  ``nnx.StateAxes({filter: axis, ...})`` gives each part its own axis.
  Updates made inside are written back (state keeps its input axis; a
  broadcast leaf must get a value that is the same for every index), and
  Modules created inside come out with their leaves stacked on the
  ``out_axes`` axis — so ``nnx.vmap`` over a constructor builds a stack of
  layers. Only leaves that changed are returned from the transform.

  Rngs: a broadcast (unsplit) stream gives every index the same key and
  advances by the number of draws of one index; split streams
  (``nnx.split_rngs``) give each index its own key.

  Args:
    f: the function; may decorate methods.
    in_axes: a pytree prefix of the positional arguments (ints, None,
      StateAxes). Keyword arguments are bound to their positions first.
    out_axes: a pytree prefix of the output (ints, None, StateAxes for
      returned Modules).
    axis_name, axis_size, spmd_axis_name: as ``jax.vmap``.
    transform_metadata: e.g. ``{nnx.PARTITION_NAME: 'layers'}``: the stacked
      axis is added to mapped Variables' ``sharding`` outside and removed inside.
    graph_updates: False (flax's ``graph_updates=False``, also implied by
      ``graph=False``): ``f`` may not return a Variable passed in (as
      flax.nnx, a ``SharedReferenceError``).

  Returns:
    The vectorised function. Called outside any trace it compiles once per
    graph structure and shapes (a second call does not retrace).

  Raises:
    AxisRankError: an axis is not below the rank of its array (path named).
    AxisSizeError: mapped axes have different sizes.
    AxisSpecError: ``in_axes``/``out_axes`` do not fit the arguments/outputs.
    BroadcastUpdateError: broadcast state was set to a mapped value.
    KeywordArgumentError: keyword-only arguments.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.split_rngs(splits=3)
    ... @nnx.vmap(in_axes=0, out_axes=0)
    ... def make(rngs):
    ...   return nnx.Linear(2, 4, rngs=rngs)
    >>> stack = make(nnx.Rngs(0))
    >>> stack.kernel.value.shape
    (3, 2, 4)
    >>> nnx.vmap(lambda m, x: m(x), in_axes=(0, None))(stack, jnp.ones((5, 2))).shape
    (3, 5, 4)
  """

  def wrap(fn: Callable) -> VmapWrapped:
    _lift.reject_bound_method(fn, "nnx.vmap")
    return VmapWrapped(
      fn,
      in_axes,
      out_axes,
      axis_name,
      axis_size,
      spmd_axis_name,
      transform_metadata,
      graph_updates,
    )

  return wrap if f is None else wrap(f)

"""Per-leaf axes and stacked-axis metadata for vmap and scan.

Inside a lifted vmap/scan the rebuilt graph holds one slice of each mapped
leaf. These helpers give every leaf of the graph its axis — before the call
from ``in_axes``, after it (when the structure changed or Modules were
returned) by identity with the input Variables, by path, or from the spec of
the argument or output that holds it — and move the stacked axis name in and
out of Variables' ``sharding`` metadata (``transform_metadata``).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ... import spmd
from ...graph._errors import fmt_path
from ...graph.api import _functional as _graph
from ...graph.variables._variables import Variable
from ...graph.walk._duplicates import shared_variable_paths
from .._errors import AxisRankError, AxisSizeError, AxisSpecError
from ..lifting import _lift
from ._specs import Carry, aliasing_error, broadcast_prefix, resolve


def describe_rest(rest: Any) -> list[str]:
  """A readable name for each leaf of the non-node arguments."""
  flat, _ = jax.tree_util.tree_flatten_with_path(rest)
  names = []
  for p, _ in flat:
    if p and isinstance(p[0], jax.tree_util.SequenceKey):
      names.append(f"argument {p[0].idx}{jax.tree_util.keystr(p[1:])}")
    else:
      names.append(f"argument {jax.tree_util.keystr(p)}")
  return names


def describe_state(split: _lift.ArgSplit, path: tuple) -> str:
  return f"argument {split.arg_of_node[path[0]]}, state {fmt_path(path[1:])}"


def check_axes(
  values: list,
  axes: list,
  names: list[str],
  transform: str,
  what: str,
  size: int | None = None,
  size_error: type[AxisSizeError] = AxisSizeError,
  size_name: str = "axis_size",
) -> int | None:
  """Checks each axis is within its array's rank and all sizes agree.

  Returns the common size (or ``size``).

  Raises:
    AxisRankError: naming the value, its shape and the axis.
    AxisSizeError: naming the values and their sizes.
  """
  sizes: dict[int, list[str]] = {}
  for x, a, name in zip(values, axes, names):
    if not isinstance(a, int) or a is True or a is False:
      continue
    # A pytree-valued leaf (e.g. a Variable holding a tuple) maps each of its
    # arrays; an empty one (e.g. an empty capture dict) has nothing to map.
    arrays = jax.tree_util.tree_leaves(x)
    if not arrays and isinstance(x, (dict, tuple, list)):
      continue
    for shape in [np.shape(y) for y in arrays] or [()]:
      if not -len(shape) <= a < len(shape):
        raise AxisRankError(
          f"{transform}: {what} asks for axis {a} of {name}, which has shape {shape} (rank"
          f" {len(shape)}). Fix: use an axis below its rank, None to broadcast it, or"
          " nnx.StateAxes({...}) to map only part of a Module's state; split Rngs first"
          " with nnx.split_rngs(splits=n)."
        )
      sizes.setdefault(shape[a], []).append(name)
  if size is not None:
    sizes.setdefault(size, []).append(f"{size_name}={size}")
  if len(sizes) > 1:
    detail = "; ".join(f"size {n}: {', '.join(v[:4])}" for n, v in sizes.items())
    raise size_error(
      f"{transform}: the axes in {what} (and {size_name}) disagree on the size ({detail})."
      f" Fix: give every array the same size along its axis, set {size_name} to it, or"
      " broadcast some with None."
    )
  return next(iter(sizes)) if sizes else size


def norm_axis(axis: int, ndim: int) -> int:
  return axis % ndim if ndim else 0


class GraphAxes:
  """Axis bookkeeping for one traced call of a lifted vmap/scan body.

  ``before`` (a ``call_inner`` hook) records the input Variables and drops
  the stacked axis from their metadata; ``after`` resolves the output
  specs, computes the axis of every leaf of ``(nodes, out_nodes)`` and puts
  the stacked axis back into the metadata.
  """

  def __init__(
    self,
    split: _lift.ArgSplit,
    graphdef,
    node_specs: list,
    state_axes: list,
    outer_ndims: list,
    out_axes: Any,
    transform_metadata: Any,
    transform: str,
  ):
    self.split = split
    self.paths = graphdef.paths if graphdef is not None else ()
    self.path_index = {p: i for i, p in enumerate(self.paths)}
    self.node_specs = node_specs
    self.state_axes = state_axes
    self.outer_ndims = outer_ndims
    self.out_axes = out_axes
    self.tm = transform_metadata
    self.transform = transform
    self.id_to_leaf: dict[int, int] = {}
    self.out_leaf_axes: list = []
    self.struct_axes: list = []
    self.struct_paths: list = []

  # -- hooks ----------------------------------------------------------------
  def before(self, nodes) -> None:
    if not nodes:
      return
    slots = _graph.walk_uncached(nodes).slots
    for i, s in enumerate(slots):
      if isinstance(s, Variable):
        self.id_to_leaf[id(s)] = i
        a = self.state_axes[i]
        if self.tm and isinstance(a, int):
          spmd.remove_axis(s, norm_axis(a, self.outer_ndims[i]), self.tm)

  def after(self, nodes, out):
    flat = jax.tree_util.tree_leaves(out, is_leaf=_lift._is_node_leaf)
    specs = broadcast_prefix(self.out_axes, out, "out_axes") if flat else []
    out_nodes, out_node_specs = [], []
    self.out_leaf_axes = []
    for x, s in zip(flat, specs):
      # A Variable the inputs do not hold is plain output data (as in
      # _lift.collect_updates): its value is stacked like an array's.
      data = isinstance(x, Variable) and id(x) not in self.id_to_leaf
      if _lift._is_node_leaf(x) and not data:
        out_nodes.append(x)
        out_node_specs.append(s)
      else:
        if not (s is None or s is Carry or isinstance(s, int)):
          raise AxisSpecError(
            f"{self.transform}: out_axes gives {s!r} for an array output; StateAxes only"
            " apply to Modules. Fix: use an int or None for arrays."
          )
        self.out_leaf_axes.extend([s] * len(jax.tree_util.tree_leaves(x)) if data else [s])
    if not nodes and not out_nodes:
      return out
    w = _graph.walk_uncached((nodes, tuple(out_nodes)))
    if out_nodes:
      self._check_output_aliasing(w, out_node_specs)
    objs = w.leaf_objects()
    self.struct_paths = list(w.paths)
    self.struct_axes = [self._axis(p, o, out_node_specs) for p, o in zip(w.paths, objs)]
    if self.tm:
      for o, a in zip(objs, self.struct_axes):
        if isinstance(o, Variable) and isinstance(a, int):
          spmd.add_axis(o, norm_axis(a, np.ndim(o._value) + 1), self.tm)
    return out

  # -- helpers --------------------------------------------------------------
  def _check_output_aliasing(self, w, out_node_specs: list) -> None:
    """Raises if a Variable is returned with an out axis other than its in axis
    (or returned twice with two out axes); ``w`` walks ``(inputs, outputs)``."""
    for i, paths in shared_variable_paths(w.graphdef.defn).items():
      var = w.nodes[i]
      got = [(p, self._spec_along(p, var, out_node_specs)) for p in paths]
      if any(a != got[0][1] for _, a in got[1:]):
        lines = [f"{self._where(p)}: {a!r}" for p, a in got]
        raise aliasing_error(self.transform, "in_axes/out_axes", var, lines)

  def _spec_along(self, p: tuple, var: Any, out_node_specs: list) -> Any:
    if p[0] == 0:
      return resolve(self.node_specs[p[1]], p[2:], var, "in_axes")
    return resolve(out_node_specs[p[1]], p[2:], var, "out_axes")

  def _where(self, p: tuple) -> str:
    if p[0] == 0:
      return f"input argument {self.split.arg_of_node[p[1]]}, state {fmt_path(p[2:])}"
    return f"output node {p[1]}, state {fmt_path(p[2:])}"

  def _axis(self, p: tuple, o: Any, out_node_specs: list) -> Any:
    if isinstance(o, Variable):
      i = self.id_to_leaf.get(id(o))
      if i is not None:
        return self.state_axes[i]
    if p[0] == 0:
      i = self.path_index.get(p[1:])
      if i is not None:
        return self.state_axes[i]
      k = p[1]
      return resolve(
        self.node_specs[k], p[2:], o, f"in_axes of argument {self.split.arg_of_node[k]}"
      )
    return resolve(out_node_specs[p[1]], p[2:], o, "out_axes")

  def state_key(self, structural: bool, i: int) -> str:
    """The path of leaf ``i`` inside its node as quoted keys, e.g. ``'a'/'b'``."""
    p = self.struct_paths[i][2:] if structural else self.paths[i][1:]
    return "/".join(map(repr, p)) or "<root>"

  def state_name(self, structural: bool, i: int) -> str:
    if structural:
      p = self.struct_paths[i]
      where = "input" if p[0] == 0 else "output"
      return f"{where} node {p[1]}, state {fmt_path(p[2:])}"
    return describe_state(self.split, self.paths[i])

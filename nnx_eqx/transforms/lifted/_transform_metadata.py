"""``nnx.transform_metadata``: keep Variables' sharding metadata right across a
user-written stacking transform (as flax.nnx.transform_metadata)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ...graph.api._functional import iter_graph
from ...graph.variables._variables import Variable
from ...spmd import PARTITION_NAME, add_axis, remove_axis

F = TypeVar("F", bound=Callable[..., Any])


def _variables(tree: Any) -> list[Variable]:
  seen: set[int] = set()
  out = []
  for _, x in iter_graph(tree):
    if isinstance(x, Variable) and id(x) not in seen:
      seen.add(id(x))
      out.append(x)
  return out


def _axis_targets(tree: Any, axes: Any) -> list[tuple[int, list[Variable]]]:
  """``(axis, variables)`` for each int axis of the prefix ``axes`` over ``tree``."""
  if isinstance(axes, int) and not isinstance(axes, bool):
    return [(axes, _variables(tree))]
  if isinstance(axes, tuple | list) and isinstance(tree, tuple | list) and len(axes) == len(tree):
    return [t for sub, ax in zip(tree, axes) for t in _axis_targets(sub, ax)]
  return []  # None, nnx.Carry, or a prefix that does not reach Variables


def transform_metadata(
  f: F | None = None,
  *,
  in_axes: Any = 0,
  out_axes: Any = 0,
  partition: str | None,
  graph: bool | None = None,
) -> Any:
  """Removes the stacked axis ``partition`` from the sharding metadata of the
  input Variables while ``f`` runs, and adds it back to the inputs and to the
  Variables ``f`` returns (at ``in_axes``/``out_axes``), as flax.nnx does.

  Use it under a stacking transform (``nnx.vmap``/``nnx.scan`` without
  ``transform_metadata=``) so that, inside, a Variable's ``sharding`` names the
  per-example axes and, outside, the stacked ones.

  Args:
    f: the function (or omit it to get a decorator).
    in_axes: an int for every argument, a tuple with one entry per positional
      argument, or None / ``nnx.Carry`` for arguments that are not stacked.
    out_axes: the same for the output.
    partition: the mesh axis name of the stacked axis.
    graph: accepted for flax compatibility (nnx_eqx is always in graph mode).

  Returns:
    The wrapped function (or a decorator).

  Raises:
    ShardingError: if an input Variable's sharding lacks ``partition`` at its axis.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> p = nnx.Param(jnp.ones((4, 3)), sharding=("layers", "embed"))
    >>> @nnx.transform_metadata(in_axes=0, out_axes=0, partition="layers")
    ... def inside(p):
    ...   return p.sharding
    >>> inside(p), p.sharding
    (('embed',), ('layers', 'embed'))
  """
  if f is None:
    return functools.partial(
      transform_metadata, in_axes=in_axes, out_axes=out_axes, partition=partition, graph=graph
    )
  metadata = {PARTITION_NAME: partition}

  @functools.wraps(f)
  def wrapper(*args: Any, **kwargs: Any) -> Any:
    targets = _axis_targets(args, in_axes)
    done = []
    try:
      for axis, variables in targets:
        for v in variables:
          remove_axis(v, axis, metadata)
          done.append((axis, v))
      out = f(*args, **kwargs)
    finally:
      for axis, v in done:  # the caller's Variables get their metadata back, also on error
        add_axis(v, axis, metadata)
    inputs = {id(v) for _, v in done}
    for axis, variables in _axis_targets(out, out_axes):
      for v in variables:
        if id(v) not in inputs:
          add_axis(v, axis, metadata)
    return out

  return wrapper  # type: ignore[return-value]

"""``nnx.shard_map``: ``jax.shard_map`` lifted over Modules (as flax.nnx.shard_map).

``in_specs`` gives one ``PartitionSpec`` per argument, or for a Module
argument a :class:`StateSharding` of specs per filter. Inside, each Module
holds its per-device shards; the leaves the body changes come out with their
input spec and are written back, already placed on the mesh.

Called eagerly, the outputs carry ``NamedSharding(mesh, spec)`` with exactly
the spec of ``out_specs`` (``P(None)`` stays ``P(None)`` rather than the
equivalent ``P()`` that ``jax.jit`` reports), and changed state keeps the
spec of its ``in_specs``, as an eager ``jax.shard_map`` call gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ...graph.api import _functional as _graph
from ...graph.state._state import State
from .._errors import LiftedStructureError
from ..axes import _shardings
from ..axes._specs import StateAxes, broadcast_prefix
from ..lifting import _lift
from ..lifting._dispatch import Dispatcher, Lifted, join_rest, positional


def _is_spec(x) -> bool:
  return x is None or isinstance(x, (PartitionSpec, StateAxes))


def _state_prefix(specs: State, value: Any) -> Any:
  """``specs`` (a State of specs) in the key order of the State ``value``, so
  that it is a pytree prefix of it; unchanged when ``value`` is no State."""
  if not isinstance(value, State):
    return specs
  flat = specs.to_flat_dict()
  return State.from_flat_path([(p, flat.get(p)) for p in value.to_flat_dict()])


def _out_shardings(mesh: Any, out_specs: Any, options: dict) -> Any:
  """``(shardings of out_specs, None)`` for the jitted call's ``(out, updates)``;
  None (left to JAX) where a sharding would say more than shard_map does: axes
  left automatic (``axis_names``), an abstract mesh, or specs that are not all
  ``PartitionSpec`` (shard_map reports those)."""
  manual = options.get("axis_names")
  if not isinstance(mesh, Mesh) or (manual and set(mesh.axis_names) - set(manual)):
    return None
  is_spec = lambda x: isinstance(x, PartitionSpec)  # noqa: E731
  if not all(map(is_spec, jax.tree_util.tree_leaves(out_specs, is_leaf=is_spec))):
    return None
  named = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), out_specs, is_leaf=is_spec)
  return (named, None)


class ShardMapWrapped(Lifted):
  """The callable returned by :func:`shard_map`."""

  name = "nnx.shard_map"

  def __init__(self, fn, mesh, in_specs, out_specs, options: dict):
    functools.update_wrapper(self, fn)
    self.fn, self.mesh, self.in_specs, self.out_specs = fn, mesh, in_specs, out_specs
    self.options = options
    self._dispatch = Dispatcher(self._pure, _out_shardings(mesh, out_specs, options))

  def _leaf_specs(self, split: _lift.ArgSplit, w, rest: tuple) -> tuple[list, list]:
    """``(spec per node leaf, spec per rest leaf)``; unspecified means replicated."""
    specs = _shardings.per_argument(self.in_specs, len(rest))
    name = "nnx.shard_map: in_specs"
    leaf_specs, rest_specs = _shardings.resolve(specs, split, w, len(rest), name)
    # A State of specs for a State argument (a pytree here) is a prefix of it.
    raw = self.in_specs if isinstance(self.in_specs, (tuple, list)) else ()
    rest_specs = tuple(
      _state_prefix(raw[i], rest[i]) if i < len(raw) and isinstance(raw[i], State) else r
      for i, r in enumerate(rest_specs)
    )
    per_rest = broadcast_prefix(rest_specs, tuple(rest), name, _is_spec)
    replicated = PartitionSpec()
    return (
      [replicated if s is None else s for s in leaf_specs],
      [replicated if s is None else s for s in per_rest],
    )

  def _pure(self, key, leaves, dyn):
    (graphdef, split), spec = key
    rest = join_rest(spec, dyn)
    w = _graph.walk_uncached(_graph.unflatten(graphdef, leaves)) if graphdef else None
    leaf_specs, rest_specs = self._leaf_specs(split, w, rest)
    dyn_specs = [s for s, m in zip(rest_specs, spec.dynamic) if m]
    holder: list = []
    box: dict = {}

    def body(node_leaves, dyn_leaves):
      out, upd = _lift.call_inner(
        self.fn, graphdef, split, node_leaves, join_rest(spec, dyn_leaves)
      )
      if upd.structure is not None:
        raise LiftedStructureError(
          f"{self.name}: the body changed the graph structure of its Module arguments or"
          " returned a Module; shard_map propagates only new values of existing state."
          " Fix: create Modules outside, or return their state (nnx.state) instead."
        )
      box["index"] = upd.index
      holder[:] = [self.out_specs, [leaf_specs[i] for i in upd.index]]
      return [out, list(upd.values)]

    mapped = jax.shard_map(
      body, mesh=self.mesh, in_specs=(leaf_specs, dyn_specs), out_specs=holder, **self.options
    )
    out, values = mapped(list(leaves), list(dyn))
    return out, _lift.Updates(None, box["index"], values)

  def __call__(self, *args, **kwargs):
    args = positional(self.fn, args, kwargs, self.name)
    split, w, leaves, rest = _lift.prepare(args)
    shardings: list = []
    if w is not None:  # the caller's state is placed on the mesh as in_specs say
      leaf_specs, _ = self._leaf_specs(split, w, rest)
      shardings = [NamedSharding(self.mesh, s) for s in leaf_specs]
      leaves = _shardings.place(w, leaves, shardings)
    out, updates = self._dispatch(self._static(split, w), leaves, rest)
    if updates.index:  # written back with the spec as given, not jit's normal form
      updates.values = _shardings.relabel(updates.values, [shardings[i] for i in updates.index])
    return _lift.apply_updates(w, updates, out)


def shard_map(
  f: Callable | None = None,
  *,
  mesh: Any,
  in_specs: Any,
  out_specs: Any,
  axis_names: Any = frozenset(),
  check_vma: bool = True,
):
  """``jax.shard_map`` lifted over Modules (as flax.nnx.shard_map).

  Args:
    f: the function; it sees per-device shards. May decorate methods.
    mesh: the ``jax.sharding.Mesh``.
    in_specs: one entry per positional argument (or one for all): a
      ``PartitionSpec`` (for a Module: applied to all its state) or a
      :class:`nnx.StateSharding` of specs per filter.
    out_specs: a prefix of the output, as ``jax.shard_map``.
    axis_names, check_vma: as ``jax.shard_map``.

  Returns:
    The mapped function. Module state it changes is written back with its
    input spec; outside a trace, a second call does not retrace.

  Raises:
    BoundMethodError: ``f`` is a Module's bound method.
    LiftedStructureError: the body adds attributes or returns Modules.
    AxisSpecError: ``in_specs`` does not fit the arguments.

  Example:
    >>> import jax, jax.numpy as jnp, numpy as np, nnx_eqx as nnx
    >>> P = jax.sharding.PartitionSpec
    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    >>> m = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    >>> @nnx.shard_map(mesh=mesh, in_specs=(P(), P("d")), out_specs=P("d"))
    ... def forward(m, x):
    ...   return m(x)
    >>> forward(m, jnp.ones((8, 4))).shape
    (8, 2)
  """
  options: dict = {"check_vma": check_vma}
  if axis_names:
    options["axis_names"] = set(axis_names)

  def wrap(fn: Callable) -> ShardMapWrapped:
    _lift.reject_bound_method(fn, "nnx.shard_map")
    return ShardMapWrapped(fn, mesh, in_specs, out_specs, options)

  return wrap if f is None else wrap(f)


__all__ = ["shard_map", "ShardMapWrapped"]

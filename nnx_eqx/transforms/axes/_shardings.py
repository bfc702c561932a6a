"""``in_shardings`` of :func:`nnx.jit` resolved to the lifted call's arguments.

A lifted jit runs ``pure(leaves, *rest)``: the Module arguments' leaf values
in one list, the other arguments (with placeholders where Modules were) after
it. A user's ``in_shardings`` names one entry per positional argument (or one
value for all of them); an entry for a Module argument is either one sharding
for all its state or a :class:`StateSharding` giving each part its own.
"""

from __future__ import annotations

from typing import Any

import jax

from ...graph.walk._duplicates import variable_paths
from ...graph.walk._node_types import is_node
from ..lifting import _lift
from ._specs import PathAxes, StateAxes, broadcast_prefix, check_aliasing, is_axis_leaf, node_spec


class StateSharding(StateAxes):
  """Per-filter shardings for the state of a Module argument of :func:`nnx.jit`
  (as flax.nnx.StateSharding).

  Each leaf gets the sharding of the first filter that matches it; ``None``
  leaves the placement to JAX.

  Args:
    filter_sharding: a mapping (or iterable of pairs) from filters to
      ``jax.sharding.Sharding`` (or ``PartitionSpec`` under a mesh, or None).

  Raises:
    UnknownFilterError: if a key is not a valid filter.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> mesh = jax.sharding.Mesh(jax.devices()[:1], ("d",))
    >>> row = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
    >>> spec = nnx.StateSharding({nnx.PathContains("kernel"): row, ...: None})
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> _ = nnx.jit(lambda m: None, in_shardings=(spec,))(m)
    >>> m.kernel.value.sharding == row
    True
  """

  __slots__ = ()

  @property
  def shardings(self) -> tuple:
    return self.axes

  def __repr__(self):
    return "StateSharding" + super().__repr__()[len("StateAxes") :]


def per_argument(in_shardings: Any, n_args: int) -> list:
  """One sharding entry per positional argument (a single value applies to all)."""
  if not isinstance(in_shardings, (tuple, list)):
    return [node_spec(in_shardings)] * n_args
  specs = [node_spec(s) for s in in_shardings]
  return specs + [None] * (n_args - len(specs))


def resolve(
  specs: list, split: _lift.ArgSplit, w, n_rest: int, name: str = "nnx.jit: in_shardings"
) -> tuple[list, tuple]:
  """``(leaf shardings, rest shardings)`` for ``pure(leaves, *rest)``."""
  leaf_sh: list = []
  if w is not None:
    node_specs = [specs[a] for a in split.arg_of_node]
    transform, keyword = name.split(": ", 1)  # e.g. "nnx.jit", "in_shardings"
    check_aliasing(split, node_specs, w, keyword, transform)
    objs = w.leaf_objects()
    for arg, path, obj in zip(_lift.leaf_arg_index(w, split), w.paths, objs):
      spec = specs[arg]
      if isinstance(spec, PathAxes):  # a State of specs, or nnx.prefix: paths in the argument
        spec = spec.axis_for(_lift.arg_path(split, path), obj, f"{name}[{arg}]")
      elif isinstance(spec, StateAxes):  # StateSharding: filters over the node's state
        spec = spec.axis_for(path[1:], obj, f"{name}[{arg}]")
      leaf_sh.append(spec)
  node_args = set(split.positions)
  rest_sh = tuple(
    None if i in node_args or isinstance(specs[i], StateAxes) else specs[i] for i in range(n_rest)
  )
  return leaf_sh, rest_sh


def constrain(values: list, shardings: list) -> list:
  """``values`` with each one given a ``jax.sharding.Sharding`` constrained to it."""
  return [
    jax.lax.with_sharding_constraint(v, sh) if isinstance(sh, jax.sharding.Sharding) else v
    for v, sh in zip(values, shardings)
  ]


def constrain_by_path(values: list, paths: list, in_paths: list, in_shardings: list) -> list:
  """After a structural update (the graph walked as ``(inputs, outputs)``):
  each value whose path is ``(0, *p)`` for an input leaf path ``p`` is
  constrained to that input leaf's sharding; the others are left as they are."""
  at = dict(zip(in_paths, in_shardings))
  shardings = [at.get(p[1:]) if p and p[0] == 0 else None for p in paths]
  return constrain(values, shardings)


def place(w, leaves: list, leaf_sh: list) -> list:
  """Moves concrete leaves to their shardings and writes them back into the
  Variables, so the caller's state lives where ``in_shardings`` says."""
  idx, vals = [], []
  for i, (x, sh) in enumerate(zip(leaves, leaf_sh)):
    if isinstance(sh, jax.sharding.Sharding) and isinstance(x, jax.Array):
      if not isinstance(x, jax.core.Tracer) and x.sharding != sh:
        idx.append(i)
        vals.append(jax.device_put(x, sh))
  if idx:
    w.set_leaves(idx, vals)
    leaves = list(leaves)
    for i, v in zip(idx, vals):
      leaves[i] = v
  return leaves


def relabel(values: list, shardings: list) -> list:
  """``values`` with each concrete array whose sharding differs from its entry
  in ``shardings`` moved there; for an equivalent sharding written another way
  (``jax.jit`` reports a replicated ``P(None)`` as ``P()``) only the label
  changes, the buffers stay."""
  return [
    jax.device_put(v, sh)
    if isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer) and v.sharding != sh
    else v
    for v, sh in zip(values, shardings)
  ]


def _is_sharding_leaf(x: Any) -> bool:
  return is_axis_leaf(x) or isinstance(x, (jax.sharding.Sharding, jax.sharding.PartitionSpec))


def has_node_specs(out_shardings: Any) -> bool:
  """Whether ``out_shardings`` describes Module outputs (StateSharding,
  :func:`nnx.prefix` results), which ``jax.jit`` cannot take."""
  leaves = jax.tree_util.tree_leaves(out_shardings, is_leaf=_is_sharding_leaf)
  return any(isinstance(node_spec(x), StateAxes) for x in leaves)


def constrain_outputs(out: Any, out_shardings: Any) -> Any:
  """Constrains every output array, and every Variable of output Modules, to
  its sharding in ``out_shardings`` (a prefix of ``out``; inside a trace)."""
  specs = broadcast_prefix(out_shardings, out, "out_shardings", is_leaf=_is_sharding_leaf)
  flat, tree = jax.tree_util.tree_flatten(out, is_leaf=is_node)
  new = []
  for x, spec in zip(flat, specs):
    if is_node(x):
      for path, var in variable_paths(x):
        sh = spec.axis_for(path, var, "out_shardings") if isinstance(spec, StateAxes) else spec
        if sh is not None:
          var.set_value(jax.lax.with_sharding_constraint(var.get_value(), sh))
    elif spec is not None:
      x = jax.lax.with_sharding_constraint(x, spec)
    new.append(x)
  return jax.tree_util.tree_unflatten(tree, new)

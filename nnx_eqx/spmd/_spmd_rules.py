"""Logical axis rules and mesh-axis checks for ``nnx_eqx.spmd``.

Rules are ``((logical_name, mesh_axes), ...)`` in order of precedence, as in
flax.linen: a logical dimension name takes the mesh axes of the first rule
for it whose mesh axes no other dimension already uses; a name no rule maps
is replicated (``None``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from ..graph._errors import NnxError

Rules = Sequence[tuple[str, Any]]


class ShardingError(NnxError, ValueError):
  """A sharding specification does not fit its array or mesh."""


class UnknownMeshAxisError(ShardingError):
  """A sharding specification names an axis the mesh does not have."""


# --------------------------------------------------------------------------
# Logical axis rules
# --------------------------------------------------------------------------
class _RulesState(threading.local):
  rules: tuple = ()


_RULES = _RulesState()


def set_logical_axis_rules(rules: Rules) -> None:
  """Sets the logical→mesh axis rules for this thread (see :func:`logical_axis_rules`).

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.set_logical_axis_rules([("mlp", "model")])
    >>> nnx.logical_to_mesh_axes(("embed", "mlp"))
    P(None, 'model')
    >>> nnx.set_logical_axis_rules(())
  """
  _RULES.rules = tuple(tuple(r) for r in rules)


def get_logical_axis_rules() -> tuple:
  """The logical→mesh axis rules currently set (``()`` if none).

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.logical_axis_rules([("embed", None), ("mlp", "model")]):
    ...   nnx.get_logical_axis_rules()
    (('embed', None), ('mlp', 'model'))
  """
  return _RULES.rules


@contextlib.contextmanager
def logical_axis_rules(rules: Rules) -> Iterator[None]:
  """Context manager setting the logical→mesh axis rules (as flax.linen).

  Args:
    rules: ``((logical_name, mesh_axes), ...)`` in order of precedence;
      ``mesh_axes`` is a mesh axis name, a tuple of them, or None.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.logical_axis_rules([("batch", "data"), ("mlp", "model")]):
    ...   nnx.logical_to_mesh_axes(("batch", "mlp", "length"))
    P('data', 'model', None)
  """
  old = _RULES.rules
  set_logical_axis_rules(rules)
  try:
    yield
  finally:
    _RULES.rules = old


def _used(assignment) -> set:
  if assignment is None or assignment is PartitionSpec.UNCONSTRAINED:
    return set()
  if isinstance(assignment, str):
    return {assignment}
  return {a for a in assignment if a is not None}


_UNASSIGNED = object()


def logical_to_mesh_axes(names: Sequence[Any] | None, rules: Rules | None = None) -> Any:
  """Maps logical dimension names to a mesh ``PartitionSpec`` (as flax.linen).

  Args:
    names: one logical name (or None) per dimension; None returns None.
    rules: the rules; default: those set by :func:`logical_axis_rules`.

  Returns:
    A ``PartitionSpec``; names no rule maps are replicated (None).

  Raises:
    ShardingError: if a logical name appears twice.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.logical_to_mesh_axes(("embed", "mlp"), rules=[("mlp", "model")])
    P(None, 'model')
  """
  if names is None:
    return None
  if rules is None:
    rules = get_logical_axis_rules()
  names = tuple(names)
  strs = [n for n in names if isinstance(n, str)]
  if len(set(strs)) != len(strs):
    raise ShardingError(
      f"Logical axis names {names} name a dimension twice. Fix: give each"
      " dimension its own logical name."
    )
  result = [_UNASSIGNED if isinstance(n, str) else n for n in names]
  for logical, mesh_axes in rules:
    if logical in names:
      pos = names.index(logical)
      taken = set().union(*(_used(r) for r in result if r is not _UNASSIGNED))
      if result[pos] is _UNASSIGNED and not (_used(mesh_axes) & taken):
        result[pos] = mesh_axes
  return PartitionSpec(*(None if r is _UNASSIGNED else r for r in result))


def _is_spec(x) -> bool:
  return x is None or isinstance(x, (PartitionSpec, NamedSharding))


def logical_to_mesh(tree: Any, rules: Rules | None = None) -> Any:
  """Maps a pytree of logical ``PartitionSpec`` (e.g. from
  :func:`get_partition_spec` without rules) to mesh ``PartitionSpec``.

  Example:
    >>> import nnx_eqx as nnx
    >>> from jax.sharding import PartitionSpec as P
    >>> nnx.logical_to_mesh({"w": P("embed", "mlp")}, rules=[("mlp", "model")])
    {'w': P(None, 'model')}
  """
  return jax.tree_util.tree_map(
    lambda s: logical_to_mesh_axes(tuple(s), rules) if isinstance(s, PartitionSpec) else s,
    tree,
    is_leaf=lambda x: isinstance(x, PartitionSpec),
  )


def logical_to_mesh_sharding(tree: Any, mesh: jax.sharding.Mesh, rules: Rules | None = None):
  """:func:`logical_to_mesh`, then ``NamedSharding(mesh, spec)`` per leaf.

  Raises:
    UnknownMeshAxisError: if a mapped spec names an axis ``mesh`` lacks.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("model",))
    >>> nnx.logical_to_mesh_sharding({"w": P("mlp")}, mesh, [("mlp", "model")])["w"].spec
    P('model',)
  """
  specs = logical_to_mesh(tree, rules)
  return _map_with_path(lambda path, s: _named(mesh, s, path), specs)


def _fmt(path) -> str:
  return "/".join(map(str, path)) or "<root>"


def _check_axes(spec: PartitionSpec, axis_names: Sequence[str], where: str) -> None:
  for entry in spec:
    for name in _used(entry):
      if name not in axis_names:
        raise UnknownMeshAxisError(
          f"The sharding of {where} is {spec}, which names mesh axis {name!r}, but the"
          f" mesh has axes {tuple(axis_names)}. Fix: use one of the mesh's axis names,"
          " or map logical names to mesh axes with rules (nnx.logical_axis_rules)."
        )


def _named(mesh, spec, path) -> NamedSharding:
  if isinstance(spec, NamedSharding):
    return spec
  if spec is None:
    spec = PartitionSpec()
  _check_axes(spec, mesh.axis_names, _fmt(path))
  return NamedSharding(mesh, spec)


def _map_with_path(f: Callable, tree: Any) -> Any:
  """Maps ``f(path, spec)`` over spec leaves; paths use State keys."""
  flat, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_spec)
  out = [f(tuple(_key(k) for k in p if not _is_value_key(k)), s) for p, s in flat]
  return jax.tree_util.tree_unflatten(treedef, out)


def _is_value_key(k) -> bool:
  return isinstance(k, jax.tree_util.GetAttrKey) and k.name == "value"


def _key(k) -> Any:
  for attr in ("key", "name", "idx"):
    if hasattr(k, attr):
      return getattr(k, attr)
  return str(k)


def metadata_names(md: dict) -> Any:
  """The axis names of a Variable's metadata: ``sharding`` (nnx_eqx) or
  ``out_sharding`` (flax 0.12); a ``PartitionSpec`` or ``NamedSharding`` may stand
  for them."""
  names = md.get("sharding")
  return names if names else md.get("out_sharding")


def metadata_spec(md: dict, rules: Any = None) -> PartitionSpec:
  """The mesh ``PartitionSpec`` of a Variable's metadata: logical names go
  through its own ``sharding_rules`` first, then ``rules`` (else the context's)."""
  names = metadata_names(md)
  if not names:
    return PartitionSpec()
  if isinstance(names, NamedSharding):
    names = names.spec
  own = tuple(md.get("sharding_rules") or ())
  other = tuple(rules if rules is not None else get_logical_axis_rules())
  if own or other:
    return logical_to_mesh_axes(tuple(names), own + other)
  return PartitionSpec(*names)


def metadata_mesh(md: dict) -> Any:
  """The mesh a Variable's sharding names refer to: a ``NamedSharding``'s, its ``mesh``
  metadata, else the context mesh (``jax.set_mesh``); None without any."""
  names = metadata_names(md)
  mesh = getattr(names, "mesh", None) or md.get("mesh")
  if mesh is None:
    mesh = jax.sharding.get_abstract_mesh()
  return None if mesh.empty else mesh

"""Sharding: Variables' ``sharding`` metadata mapped onto ``jax.sharding``.

A Variable may carry ``sharding``: one entry per array dimension, each a mesh
axis name, a logical axis name, a tuple of names, or ``None`` (replicated).
``with_partitioning`` / ``with_logical_partitioning`` attach it to what an
initializer returns. ``get_partition_spec`` turns a State into a State of
``PartitionSpec``; ``get_named_sharding`` binds those to a mesh, for
``jax.device_put`` or ``with_sharding_constraint`` inside ``nnx.jit``.

Logical names are mapped to mesh axes by *rules*, ``((logical, mesh_axes),
...)``, given explicitly (``rules=``), stored on a Variable
(``sharding_rules`` metadata) or set for a block with
``logical_axis_rules``. Rules follow flax.linen: in order of precedence,
a logical name takes the first rule's mesh axes not already used by another
dimension; a logical name no rule maps is replicated (``None``). Without any
rules the names are mesh axes themselves.

``nnx.vmap``/``nnx.scan`` with ``transform_metadata={nnx.PARTITION_NAME:
'layers'}`` insert ``'layers'`` into ``sharding`` at the stacked axis outside
the transform and remove it inside (flax.nnx's behaviour; the seeds'
``metadata_params``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from ..graph.api._functional import variables as _variables
from ..graph.walk._node_types import is_graph_node
from ..graph.variables._defaults import use_eager_sharding as use_eager_sharding
from ..graph.variables._defaults import using_eager_sharding as using_eager_sharding
from ._abstract import as_abstract as as_abstract
from ._by_path import UnmatchedPatternError as UnmatchedPatternError
from ._by_path import set_partitioning as set_partitioning
from ._eager import abstract_with_sharding as abstract_with_sharding
from ._eager import get_abstract_model as get_abstract_model
from ._spmd_axes import PARTITION_NAME as PARTITION_NAME
from ._spmd_axes import add_axis as add_axis
from ._spmd_axes import remove_axis as remove_axis
from ._spmd_rules import Rules as Rules
from ._spmd_rules import ShardingError as ShardingError
from ._spmd_rules import UnknownMeshAxisError as UnknownMeshAxisError
from ._spmd_rules import _check_axes, _fmt, _is_spec, _map_with_path, _named
from ._spmd_rules import get_logical_axis_rules as get_logical_axis_rules
from ._spmd_rules import logical_axis_rules as logical_axis_rules
from ._spmd_rules import logical_to_mesh as logical_to_mesh
from ._spmd_rules import logical_to_mesh_axes as logical_to_mesh_axes
from ._spmd_rules import logical_to_mesh_sharding as logical_to_mesh_sharding
from ._spmd_rules import metadata_spec
from ._spmd_rules import set_logical_axis_rules as set_logical_axis_rules
from ..graph.state._state import State
from ..graph.variables._variables import Variable, with_metadata


# --------------------------------------------------------------------------
# Annotating initializers
# --------------------------------------------------------------------------
def with_partitioning(
  initializer: Callable[..., Any],
  sharding: Sequence[Any],
  mesh: jax.sharding.Mesh | None = None,
  **metadata: Any,
) -> Callable[..., Any]:
  """Wraps an initializer so its Variable carries ``out_sharding`` (mesh or logical
  axis names, one per dimension), as flax.nnx 0.12's ``with_partitioning``.

  As in flax, ``v.out_sharding`` holds the names, and ``v.sharding`` is then the
  value's own ``jax.sharding`` (placed on creation under a mesh, see
  ``nnx.use_eager_sharding``). :func:`with_logical_partitioning` keeps the seeds'
  ``sharding`` key instead.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> init = nnx.with_partitioning(jax.nn.initializers.ones, (None, "model"))
    >>> nnx.Param(init(jax.random.key(0), (2, 4))).out_sharding
    (None, 'model')
  """
  return _annotated(initializer, "out_sharding", sharding, mesh, metadata)


def _annotated(initializer, key: str, names, mesh, metadata: dict) -> Callable[..., Any]:
  if mesh is not None:
    metadata["mesh"] = mesh
  return with_metadata(initializer, **{key: tuple(names)}, **metadata)


def with_logical_partitioning(
  initializer: Callable[..., Any],
  names: Sequence[Any],
  mesh: jax.sharding.Mesh | None = None,
  rules: Rules | None = None,
) -> Callable[..., Any]:
  """Like :func:`with_partitioning` with logical names, kept under the seeds'
  ``sharding`` key (``v.sharding`` returns the names); ``rules`` (optional)
  are stored as the Variable's ``sharding_rules`` and take precedence over
  the context rules (the seeds' / flax.linen's name).

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> init = nnx.with_logical_partitioning(
    ...   jax.nn.initializers.ones, ("embed", "mlp"), rules=(("mlp", "model"),))
    >>> p = nnx.Param(init(jax.random.key(0), (2, 4)))
    >>> nnx.get_partition_spec(p).value
    P(None, 'model')
  """
  extra: dict = {}
  if rules is not None:
    extra["sharding_rules"] = tuple(tuple(r) for r in rules)
  return _annotated(initializer, "sharding", names, mesh, extra)


# --------------------------------------------------------------------------
# Specs and shardings of state
# --------------------------------------------------------------------------
def variable_spec(v: Variable, rules: Rules | None = None) -> PartitionSpec:
  """The mesh ``PartitionSpec`` of one Variable (``P()`` without ``sharding``).

  The names are ``sharding`` metadata (or flax 0.12's ``out_sharding``). Rules:
  the Variable's ``sharding_rules`` metadata first, then ``rules`` (else the
  context's), as flax.nnx composes them; without any, the names are mesh axes.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> p = nnx.Param(jnp.ones((2, 4)), sharding=("embed", "mlp"))
    >>> nnx.spmd.variable_spec(p), nnx.spmd.variable_spec(p, [("mlp", "model")])
    (P('embed', 'mlp'), P(None, 'model'))
  """
  return metadata_spec(v._metadata, rules)


def get_var_pspec(v: Variable) -> PartitionSpec | None:
  """The mesh ``PartitionSpec`` of one Variable, or None if its value has no shape
  (flax.nnx's ``get_var_pspec``; :func:`variable_spec` with the context's rules).

  Raises:
    Nothing.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.spmd.get_var_pspec(nnx.Param(jnp.ones((2, 4)), sharding=(None, "model")))
    P(None, 'model')
    >>> nnx.spmd.get_var_pspec(nnx.Param(jnp.ones(3))), nnx.spmd.get_var_pspec(nnx.Variable("a"))
    (P(), None)
  """
  if v._metadata.get("sharding") or v._metadata.get("out_sharding") or hasattr(v._value, "shape"):
    return variable_spec(v)
  return None


def get_partition_spec(tree: Any, rules: Rules | None = None) -> Any:
  """Replaces each Variable's value by its ``PartitionSpec`` (as flax.nnx).

  Args:
    tree: a State, a Variable, or a pytree of them (raw arrays give ``P()``).
    rules: logical→mesh rules; a Variable's own ``sharding_rules`` win, then
      these, then the context's (:func:`logical_axis_rules`).

  Returns:
    The same structure with ``PartitionSpec`` values.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> state = nnx.State({"w": nnx.Param(jnp.ones((2, 4)), sharding=(None, "model"))})
    >>> nnx.get_partition_spec(state).w.value
    P(None, 'model')
  """

  def f(x):
    if isinstance(x, Variable):
      return x.replace(variable_spec(x, rules))
    if hasattr(x, "shape"):
      return PartitionSpec()
    return None

  return jax.tree_util.tree_map(f, tree, is_leaf=lambda x: isinstance(x, Variable))


def get_named_sharding(tree: Any, mesh: jax.sharding.Mesh, rules: Rules | None = None) -> Any:
  """:func:`get_partition_spec`, then ``NamedSharding(mesh, spec)`` per Variable.

  Raises:
    UnknownMeshAxisError: if a spec names an axis ``mesh`` lacks (the
      Variable's path, the spec and the mesh axes are named).

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> mesh = jax.make_mesh((1,), ("model",))
    >>> state = nnx.State({"w": nnx.Param(jnp.ones((2, 4)), sharding=(None, "model"))})
    >>> nnx.get_named_sharding(state, mesh).w.value.spec
    P(None, 'model')
  """
  return _map_with_path(lambda path, s: _named(mesh, s, path), get_partition_spec(tree, rules))


# --------------------------------------------------------------------------
# Constraints inside jit
# --------------------------------------------------------------------------
def _context_mesh():
  mesh = jax.sharding.get_abstract_mesh()
  return None if mesh.empty else mesh


def _constrain(x, spec, mesh, where: str):
  if isinstance(spec, NamedSharding):
    sharding, mesh = spec, spec.mesh
  else:
    mesh = mesh if mesh is not None else _context_mesh()
    if mesh is None:
      raise ShardingError(
        f"with_sharding_constraint: {where} has spec {spec} but there is no mesh."
        " Fix: pass mesh=..., a NamedSharding, or run under `with jax.set_mesh(mesh):`."
      )
    spec = PartitionSpec() if spec is None else spec
    _check_axes(spec, mesh.axis_names, where)
    sharding = NamedSharding(mesh, spec) if isinstance(mesh, jax.sharding.Mesh) else spec
  n = len(sharding.spec if isinstance(sharding, NamedSharding) else sharding)
  if n > getattr(x, "ndim", 0):
    raise ShardingError(
      f"The sharding {spec} of {where} has {n} entries but the value has shape"
      f" {getattr(x, 'shape', ())}. Fix: give at most one entry per dimension."
    )
  if mesh.are_all_axes_explicit:
    return jax.sharding.reshard(x, sharding)
  return jax.lax.with_sharding_constraint(x, sharding)


def with_sharding_constraint(x: Any, shardings: Any = None, mesh: Any = None) -> Any:
  """``jax.lax.with_sharding_constraint`` for arrays, States and Modules.

  Args:
    x: an array pytree, a State (Variables) or a Module. A Module's Variables
      are constrained in place (inside ``nnx.jit`` that is the traced copy).
    shardings: a ``PartitionSpec``/``NamedSharding`` for every leaf, a tree of
      them matching ``x`` (a State from :func:`get_partition_spec` for a State),
      or None: each Variable's own spec.
    mesh: the mesh for ``PartitionSpec``s (default: the ``jax.set_mesh`` one).

  Returns:
    ``x`` with constrained values (the same Module for a Module).

  Raises:
    UnknownMeshAxisError: a spec names an axis the mesh lacks (path named).
    ShardingError: no mesh is known, or a spec has more entries than dimensions.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("data",))
    >>> f = jax.jit(lambda x: nnx.with_sharding_constraint(x, P("data"), mesh=mesh))
    >>> f(jnp.ones(4)).sharding.spec
    P('data',)
  """
  if is_graph_node(x):
    state = _variables(x)
    for path, v in state.to_flat_dict().items():
      spec = _spec_at(shardings, path, v)
      v.value = _constrain(v.value, spec, mesh, _fmt(path))
    return x
  if isinstance(x, State):
    out = {}
    for path, v in x.to_flat_dict().items():
      spec = _spec_at(shardings, path, v)
      value = v._value if isinstance(v, Variable) else v
      new = _constrain(value, spec, mesh, _fmt(path))
      out[path] = v.replace(new) if isinstance(v, Variable) else new
    return State.from_flat_path(out)
  if isinstance(x, Variable):
    return x.replace(_constrain(x.value, _spec_at(shardings, (), x), mesh, "<variable>"))
  if _is_spec(shardings) and shardings is not None:
    return jax.tree_util.tree_map_with_path(
      lambda p, a: _constrain(a, shardings, mesh, jax.tree_util.keystr(p)), x
    )
  return jax.tree_util.tree_map(
    lambda s, a: _constrain(a, s, mesh, "value"), shardings, x, is_leaf=_is_spec
  )


def _spec_at(shardings, path, v):
  if shardings is None:
    return variable_spec(v) if isinstance(v, Variable) else PartitionSpec()
  if isinstance(shardings, (PartitionSpec, NamedSharding)):
    return shardings
  if isinstance(shardings, Variable):
    return shardings._value
  if isinstance(shardings, State):
    s = shardings.to_flat_dict().get(path)
    if s is None:
      raise ShardingError(
        f"with_sharding_constraint: no sharding given for {_fmt(path)}. Fix: pass a State"
        " of specs with the same paths (nnx.get_partition_spec(state))."
      )
    return s._value if isinstance(s, Variable) else s
  raise ShardingError(
    f"with_sharding_constraint: cannot use {type(shardings).__name__} as the shardings of a"
    " State or Module. Fix: pass a PartitionSpec, a NamedSharding or a State of specs."
  )


def with_logical_constraint(
  x: Any, logical_axis_resources: Any, rules: Rules | None = None, mesh: Any = None
) -> Any:
  """Sharding constraint from logical names (as flax.linen / the seeds).

  Without rules (argument or context) or without a mesh (argument or
  ``jax.set_mesh``) this is a no-op, so models annotated this way also run
  on one device.

  Args:
    x: an array pytree.
    logical_axis_resources: a tuple of logical names per dimension (or a tree
      of them matching ``x``).
    rules, mesh: as for :func:`logical_to_mesh_axes` / :func:`with_sharding_constraint`.

  Raises:
    UnknownMeshAxisError: if the rules map to an axis the mesh lacks.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> mesh = jax.make_mesh((1,), ("data",))
    >>> f = jax.jit(lambda x: nnx.with_logical_constraint(
    ...   x, ("batch", None), rules=[("batch", "data")], mesh=mesh))
    >>> f(jnp.ones((2, 3))).sharding.spec
    P('data', None)
  """
  if rules is None:
    rules = get_logical_axis_rules()
  if not rules or logical_axis_resources is None:
    return x
  if mesh is None and _context_mesh() is None:
    return x

  def is_names(t):
    return t is None or (isinstance(t, tuple) and all(e is None or isinstance(e, str) for e in t))

  specs = jax.tree_util.tree_map(
    lambda t: logical_to_mesh_axes(t, rules), logical_axis_resources, is_leaf=is_names
  )
  return with_sharding_constraint(x, specs, mesh)

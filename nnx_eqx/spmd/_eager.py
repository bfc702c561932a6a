"""Eager sharding: Variables with sharding metadata are placed when created (flax 0.12).

``graph/variables/_variables.py`` cannot import this layer; this module installs
:func:`shard_on_create` as the Variable constructor's sharding hook. Whether it
applies is ``nnx.use_eager_sharding`` / a Variable's ``eager_sharding=``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import NamedSharding

from ..graph.api._functional import split
from ..graph.api._map import map_leaves
from ..graph.variables import _variables
from ..graph.variables._variables import Variable
from ._abstract import as_abstract
from ._spmd_rules import ShardingError, metadata_mesh, metadata_names, metadata_spec


def shard_on_create(value: Any, md: dict) -> Any:
  """``value`` placed per the sharding names in ``md`` on its ``mesh`` metadata or
  the context mesh (``jax.set_mesh``); unchanged without names, mesh or array.

  Raises:
    ShardingError: if the mesh mixes Auto and Explicit axes.
  """
  if not isinstance(value, jax.Array):
    return value
  mesh = metadata_mesh(md)
  if mesh is None:
    return value
  names = metadata_names(md)
  layout = None
  if hasattr(names, "layout") and hasattr(names, "sharding"):  # jax Format
    layout, names = names, names.sharding
  spec = metadata_spec({**md, "sharding": names})
  if len(spec) > value.ndim:
    return value  # names for more axes than the value has (e.g. a lifted axis): left as is
  sharding = NamedSharding(mesh, spec)
  if layout is not None:
    return jax.lax.with_sharding_constraint(value, layout)
  if mesh.are_all_axes_explicit:
    return jax.sharding.reshard(value, sharding)
  if not mesh.are_all_axes_auto:
    raise ShardingError(
      f"Cannot place a Variable with sharding {names!r}: mesh axes {mesh.axis_names} mix"
      f" Auto and Explicit types {mesh.axis_types}. Fix: make all axes Auto or all Explicit,"
      " or create the Variable with eager_sharding=False."
    )
  return jax.lax.with_sharding_constraint(value, sharding)


_variables.SHARD_ON_CREATE[0] = shard_on_create


def get_abstract_model(init_fn: Callable[[], Any], mesh: Any, *, graph: bool | None = None):
  """The GraphDef and abstract State of ``init_fn()``'s model, with shardings.

  As flax.nnx 0.12: ``init_fn`` runs abstractly under ``jax.set_mesh(mesh)``; each
  leaf of the State is a ``jax.ShapeDtypeStruct`` whose ``NamedSharding`` on
  ``mesh`` follows its Variable's sharding names (``P()`` without them), e.g. to
  restore a checkpoint straight into sharded arrays.

  Args:
    init_fn: builds the model (no arguments).
    mesh: the ``jax.sharding.Mesh``.
    graph: False for tree mode (no shared references); default graph mode.

  Returns:
    ``(graphdef, abstract_state)``.

  Raises:
    ShardingError: if a sharding name is not a mesh axis.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> mesh = jax.make_mesh((1,), ("model",))
    >>> gdef, abs_state = nnx.get_abstract_model(lambda: nnx.Linear(2, 4, rngs=nnx.Rngs(0),
    ...   kernel_init=nnx.with_partitioning(nnx.initializers.ones, (None, "model"))), mesh)
    >>> abs_state["kernel"].value.sharding.spec
    P(None, 'model')
  """
  box: list = []

  def build():
    gdef, state = split(init_fn(), graph=graph is not False)
    box.append(gdef)
    return state

  with jax.set_mesh(mesh):
    abs_state = jax.eval_shape(build)

  def add(path: tuple, x: Any) -> Any:
    if not isinstance(x, Variable):
      return x
    v = x._value
    sharding = NamedSharding(mesh, metadata_spec(x._metadata))
    return x.replace(jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding))

  return box[0], map_leaves(add, abs_state)


def abstract_with_sharding(tree: Any, graph: bool | None = None) -> Any:
  """Deprecated flax.nnx 0.12 name of :func:`nnx.as_abstract`.

  Raises:
    DeprecationWarning: always (as a warning), then behaves as ``as_abstract``.

  Example:
    >>> import warnings, jax, nnx_eqx as nnx
    >>> mesh = jax.make_mesh((1,), ("model",))
    >>> abstract = nnx.eval_shape(lambda: nnx.Param(jax.numpy.ones((2, 4)),
    ...   sharding=(None, "model"), mesh=mesh, eager_sharding=False))
    >>> with warnings.catch_warnings():
    ...   warnings.simplefilter("ignore")
    ...   nnx.abstract_with_sharding(abstract).value.sharding.spec
    P(None, 'model')
  """
  warnings.warn(
    "abstract_with_sharding is deprecated, use nnx.as_abstract instead.",
    DeprecationWarning,
    stacklevel=2,
  )
  return as_abstract(tree, graph=graph)

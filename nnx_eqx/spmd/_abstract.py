"""``as_abstract``: attach shardings to the abstract Variables of ``nnx.eval_shape``."""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding

from ..graph.api._map import map_leaves
from ..graph.variables._variables import Variable
from ._spmd_rules import metadata_mesh, metadata_names, metadata_spec


def as_abstract(tree: Any, graph: bool | None = None) -> Any:
  """A copy of ``tree`` whose abstract Variables carry a ``NamedSharding``.

  Each Variable holding a ``jax.ShapeDtypeStruct`` without a sharding, whose
  metadata names its axes (``sharding`` or flax's ``out_sharding``), gets a
  ``NamedSharding`` on its ``mesh`` metadata, else on the current abstract
  mesh (``jax.sharding.get_abstract_mesh()``, set by ``jax.set_mesh``).
  Logical names go through the Variable's ``sharding_rules`` or the context
  rules. Other leaves are kept.

  Args:
    tree: a graph node (e.g. the result of ``nnx.eval_shape``).
    graph: False for tree mode (no shared references allowed).

  Returns:
    The annotated copy.

  Raises:
    SharedReferenceError: in tree mode, if an object is found at two paths.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> mesh = jax.make_mesh((1,), ("model",))
    >>> abstract = nnx.eval_shape(lambda: nnx.Param(
    ...   jax.numpy.ones((2, 4)), sharding=(None, "model"), mesh=mesh))
    >>> nnx.as_abstract(abstract).value.sharding.spec
    P(None, 'model')
  """

  def add_sharding(path: tuple, x: Any) -> Any:
    if not isinstance(x, Variable):
      return x
    value = x._value
    if not isinstance(value, jax.ShapeDtypeStruct) or value.sharding is not None:
      return x
    names = metadata_names(x._metadata)
    if not names:
      return x
    mesh = metadata_mesh(x._metadata)
    if mesh is None:
      return x
    sharding = NamedSharding(mesh, metadata_spec(x._metadata))
    return x.replace(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))

  return map_leaves(add_sharding, tree, graph=graph)

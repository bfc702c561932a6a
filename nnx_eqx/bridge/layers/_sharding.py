"""JAX's sharding-type errors raised inside Equinox's equations, as
:class:`nnx.bridge.ExplicitShardingError` naming the layer and the mesh setting.

The check costs nothing on a call that works: it is an ``except`` around the
layer's equations, which run once, while tracing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax

from .._errors import ExplicitShardingError

# jax raises it from its private core and exports it nowhere (jax 0.12)
try:
  from jax._src.core import ShardingTypeError as _ShardingTypeError
except ImportError:  # a jax without explicit sharding
  SHARDING_TYPE_ERRORS: tuple[type[BaseException], ...] = ()
else:
  SHARDING_TYPE_ERRORS = (_ShardingTypeError,)


def _mesh(arrays: tuple) -> Any:
  """The (abstract) mesh the arrays' types name, else the current one, else None."""
  for a in jax.tree.leaves(arrays):
    try:
      mesh = jax.typeof(a).sharding.mesh
    except (AttributeError, TypeError):
      continue
    if not mesh.empty:
      return mesh
  mesh = jax.sharding.get_abstract_mesh()
  return None if mesh.empty else mesh


@contextlib.contextmanager
def sharding_errors(layer: str, *arrays: Any) -> Iterator[None]:
  """Re-raises JAX's ``ShardingTypeError`` from the body as an
  :class:`ExplicitShardingError` for ``layer`` (chained), naming the mesh of
  ``arrays`` (the layer's input and parameters).

  Raises:
    ExplicitShardingError: the body raised JAX's ``ShardingTypeError``.
  """
  try:
    yield
  except SHARDING_TYPE_ERRORS as e:
    raise ExplicitShardingError(layer, _mesh(arrays), e) from e

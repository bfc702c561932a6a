"""``var_defaults``: defaults for the ``hijax``/``ref`` options of new Variables.

As flax.nnx 0.12: with ``ref`` on, new Variables store their value in a
``jax.Ref``; with ``hijax`` on, they are hijax Variables (``nnx_eqx.graph.variables._hijax``),
whose updates inside plain JAX transforms reach the caller.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

_DEFAULTS: dict[str, bool] = {"hijax": False, "ref": False}
_EAGER: dict[str, bool] = {"eager_sharding": True}
"""Whether new Variables with sharding metadata are placed on creation (flax 0.12's
``flax_always_shard_variable``, on by default)."""


class VarDefaults(Mapping):
  """A read-only view of the current defaults (``hijax``, ``ref``)."""

  def __init__(self, values: dict[str, bool]):
    self._values = dict(values)

  def __getitem__(self, key: str) -> bool:
    return self._values[key]

  def __getattr__(self, key: str) -> bool:
    try:
      return self.__dict__["_values"][key]
    except KeyError:
      raise AttributeError(key) from None

  def __iter__(self):
    return iter(self._values)

  def __len__(self) -> int:
    return len(self._values)


class _VarDefaultsSetting:
  """Applies ``changes`` to ``store`` now; undone at the end of a ``with`` block, or,
  used as a decorator, applied only while the decorated function runs."""

  def __init__(self, changes: dict[str, bool], store: dict[str, bool] = _DEFAULTS):
    self._store = store
    self._previous = dict(store)
    self._changes = changes
    store.update(changes)

  def __enter__(self):
    return self

  def __exit__(self, *exc) -> None:
    self._store.update(self._previous)

  def __call__(self, fn):
    store = self._store
    store.update(self._previous)
    changes = self._changes

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      previous = dict(store)
      store.update(changes)
      try:
        return fn(*args, **kwargs)
      finally:
        store.update(previous)

    return wrapper


def var_defaults(*, hijax: bool | None = None, ref: bool | None = None) -> Any:
  """Reads (no arguments) or sets (now / in a ``with`` block / for a decorated
  function) the ``hijax``/``ref`` defaults of new Variables.

  Raises:
    TypeError: if a value is not a bool.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.var_defaults(hijax=True):
    ...   nnx.var_defaults().hijax
    True
    >>> dict(nnx.var_defaults())
    {'hijax': False, 'ref': False}
  """
  changes = {k: v for k, v in (("hijax", hijax), ("ref", ref)) if v is not None}
  if not changes:
    return VarDefaults(_DEFAULTS)
  for k, v in changes.items():
    if not isinstance(v, bool):
      raise TypeError(f"var_defaults: {k} must be a bool, got {v!r}.")
  return _VarDefaultsSetting(changes)


def use_eager_sharding(value: bool, /) -> Any:
  """Sets whether new Variables with sharding metadata are placed on creation.

  As flax.nnx 0.12: a Variable created with ``sharding``/``out_sharding`` axis
  names while a mesh is set (``jax.set_mesh``, or ``mesh=`` metadata) holds its
  value sharded accordingly (``jax.lax.with_sharding_constraint``, or
  ``jax.sharding.reshard`` on explicit meshes). On by default. The setting
  applies now, until the end of a ``with`` block, or while a decorated function
  runs. A Variable's own ``eager_sharding=`` keyword wins. Unlike flax, a
  Variable with sharding names but no mesh keeps its value as is (no error).

  Args:
    value: True to place new Variables on creation.

  Returns:
    A context manager / decorator restoring the previous setting.

  Raises:
    TypeError: if ``value`` is not a bool.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.use_eager_sharding(False):
    ...   nnx.using_eager_sharding()
    False
    >>> nnx.using_eager_sharding()
    True
  """
  if not isinstance(value, bool):
    raise TypeError(f"use_eager_sharding: value must be a bool, got {value!r}.")
  return _VarDefaultsSetting({"eager_sharding": value}, _EAGER)


def using_eager_sharding() -> bool:
  """Whether new Variables with sharding metadata are placed on creation
  (see :func:`use_eager_sharding`).

  Raises:
    TypeError: never.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.using_eager_sharding()
    True
  """
  return _EAGER["eager_sharding"]

"""flax.nnx 0.12's Variable metadata and raw-value accessors, as a mixin of Variable."""

from __future__ import annotations

from typing import Any

from .. import _version
from .._sentinel import MISSING as _MISSING
from ..tracing._traces import check_trace

_STORAGE_KEYS = ("hijax", "ref", "eager_sharding")


class MetadataMethods:
  """``get_metadata``/``set_metadata``/``get_raw_value``/``set_raw_value``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> p = nnx.Param(jnp.ones(2), tag="a")
    >>> p.set_metadata(sharding=("x",)); p.set_metadata("tag", "b")
    >>> p.get_metadata(), p.get_metadata("missing", None)
    ({'tag': 'b', 'sharding': ('x',), 'hijax': False, 'ref': False, 'eager_sharding': True}, None)
  """

  _metadata: dict
  _value: Any
  _trace: Any

  def get_metadata(self, name: str | None = None, default: Any = _MISSING) -> Any:
    """The metadata dict (a copy), or one entry.

    As in flax.nnx 0.12 the dict also reports the storage options ``hijax``,
    ``ref`` and ``eager_sharding`` (``True`` unless the Variable was created
    with ``eager_sharding=False``).

    Raises:
      KeyError: if ``name`` is missing and no ``default`` is given.
    """
    if name is None:
      return {**self._metadata, **self._storage_metadata()}
    if name in self._metadata:
      return self._metadata[name]
    if name in _STORAGE_KEYS:
      return self._storage_metadata()[name]
    if default is _MISSING:
      raise KeyError(
        f"{type(self).__name__} has no metadata {name!r}; it has {sorted(self._metadata)}."
        " Fix: pass a default, e.g. get_metadata(name, None)."
      )
    return default

  def set_metadata(self, *args: Any, **kwargs: Any) -> None:
    """``set_metadata(dict)`` replaces all metadata, ``set_metadata(name, value)`` sets
    one entry, ``set_metadata(**entries)`` updates several.

    Raises:
      TypeError: if positional and keyword arguments are mixed, or more than two
        positional arguments are given.
      TraceContextError: if the Variable belongs to another JAX trace.
    """
    if args and kwargs:
      raise TypeError("set_metadata: pass a dict, a (name, value) pair, or keywords, not a mix.")
    check_trace(self._trace, f"metadata of {type(self).__name__}")
    if len(args) == 1:
      self.__dict__["_metadata"] = self._without_storage_defaults(dict(args[0]))
    elif len(args) == 2:
      self._metadata.update(self._without_storage_defaults({args[0]: args[1]}))
    elif args:
      raise TypeError(f"set_metadata takes at most 2 positional arguments, got {len(args)}.")
    else:
      self._metadata.update(self._without_storage_defaults(kwargs))
    _version.bump()

  def _storage_metadata(self) -> dict[str, bool]:
    return {
      "hijax": self.hijax,  # type: ignore[attr-defined]
      "ref": self.ref,  # type: ignore[attr-defined]
      "eager_sharding": self._metadata.get("eager_sharding", True),
    }

  def _without_storage_defaults(self, md: dict) -> dict:
    """``md`` less the storage options that only restate this Variable's mode
    (``get_metadata()`` reports them; they are not stored)."""
    current = self._storage_metadata()
    for k in _STORAGE_KEYS:
      if k in md and md[k] == current[k] and (k != "eager_sharding" or md[k]):
        del md[k]
    return md

  def get_raw_value(self) -> Any:
    """The stored value, as is."""
    return self._value

  def set_raw_value(self, value: Any) -> None:
    """Stores ``value`` as is (same trace check as ``.value = ...``).

    Raises:
      TraceContextError: if the Variable belongs to another JAX trace.
    """
    check_trace(self._trace, type(self).__name__)
    self.__dict__["_value"] = value

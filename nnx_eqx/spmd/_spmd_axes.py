"""The stacked axis of vmap/scan in Variables' metadata (``transform_metadata``)."""

from __future__ import annotations

from typing import Any

import jax

from ..graph.variables._variables import Variable
from ._spmd_rules import ShardingError

PARTITION_NAME = "partition_name"
"""Key of ``transform_metadata`` naming the stacked axis (seed-era name)."""


_ABSENT = object()


def _split_meta(transform_metadata) -> tuple[Any, dict]:
  """``(axis name, other entries)``; the name is ``_ABSENT`` without a PARTITION_NAME
  entry, and may be None (an unnamed stacked axis: a ``None`` entry is inserted/removed,
  as flax.nnx does with ``partition=None``)."""
  other = dict(transform_metadata)
  return other.pop(PARTITION_NAME, _ABSENT), other


def _names_key(md: dict) -> str | None:
  """The metadata key holding the axis names: ``sharding``, or flax 0.12's ``out_sharding``."""
  for key in ("sharding", "out_sharding"):
    if md.get(key):
      return key
  return None


def _insert(fields, index, value):
  items = list(fields)
  while len(items) < index:
    items.append(None)
  items.insert(index, value)
  return tuple(items)


def add_axis(tree: Any, index: int, transform_metadata: Any) -> Any:
  """Inserts the stacked axis into the metadata of every Variable in ``tree``:
  ``transform_metadata[PARTITION_NAME]`` into ``sharding`` (or ``out_sharding``) at ``index`` (and
  each other key's value into that tuple metadata), then calls each Variable's
  :meth:`~nnx.Variable.add_axis`. In place; returns ``tree``. A ``None`` name inserts ``None``
  (the stacked axis is replicated), as in flax.nnx.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> p = nnx.Param(jnp.ones((3, 2)), sharding=("embed",))
    >>> nnx.spmd.add_axis(p, 0, {nnx.PARTITION_NAME: "layers"}).sharding
    ('layers', 'embed')
    >>> nnx.spmd.add_axis(p, 0, {nnx.PARTITION_NAME: None}).sharding
    (None, 'layers', 'embed')
  """
  name, other = _split_meta(transform_metadata)

  def one(v: Variable):
    md = dict(v._metadata)
    key = _names_key(md)
    if name is not _ABSENT and key is not None:
      md[key] = _insert(md[key], index, name)
    for k, val in other.items():
      if isinstance(md.get(k), tuple) and md[k]:
        md[k] = _insert(md[k], index, val)
    v._metadata = md
    v.add_axis(index, None if name is _ABSENT else name)
    return v

  return jax.tree_util.tree_map(one, tree, is_leaf=lambda x: isinstance(x, Variable))


def remove_axis(tree: Any, index: int, transform_metadata: Any) -> Any:
  """Inverse of :func:`add_axis` (in place; returns ``tree``).

  Raises:
    ShardingError: if the entry at ``index`` is not the expected axis name.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> p = nnx.Param(jnp.ones((3, 2)), sharding=("layers", "embed"))
    >>> nnx.spmd.remove_axis(p, 0, {nnx.PARTITION_NAME: "layers"}).sharding
    ('embed',)
  """
  name, other = _split_meta(transform_metadata)

  def pop(fields, value, key):
    items = list(fields)
    if index >= len(items) or items[index] != value:
      raise ShardingError(
        f"Expected {value!r} at index {index} of the {key!r} metadata {tuple(fields)} of a"
        f" stacked Variable. Fix: create the stacked Variables with the same"
        " transform_metadata, or remove the axis name from its metadata."
      )
    del items[index]
    return tuple(items)

  def one(v: Variable):
    md = dict(v._metadata)
    key = _names_key(md)
    if name is not _ABSENT and key is not None:
      md[key] = pop(md[key], name, key)
    for k, val in other.items():
      if isinstance(md.get(k), tuple) and md[k]:
        md[k] = pop(md[k], val, k)
    v._metadata = md
    v.remove_axis(index, None if name is _ABSENT else name)
    return v

  return jax.tree_util.tree_map(one, tree, is_leaf=lambda x: isinstance(x, Variable))

"""Reaching into a graph by path: through graph nodes and plain containers."""

from __future__ import annotations

from typing import Any

from .._errors import GraphStructureError
from ._node_types import node_impl
from ._walk import _DELETE, _MODULE_IMPL_HOLDER


def _fmt(path: tuple) -> str:
  return "/".join(map(str, path)) or "<root>"


def child(obj: Any, key: Any) -> Any:
  """The child of a graph node, dict, list or tuple under ``key``.

  Raises:
    KeyError: if ``obj`` has no such child.
  """
  impl = node_impl(type(obj))
  if impl is None:
    return obj[key]
  for k, v in impl.children(obj):
    if k == key:
      return v
  raise KeyError(key)


def object_at(root: Any, path: tuple) -> Any:
  """The object at ``path`` from ``root``.

  Raises:
    KeyError: if a key of ``path`` is missing.
  """
  for k in path:
    root = child(root, k)
  return root


def delete_at(root: Any, path: tuple) -> None:
  """Removes the child at ``path`` (from a graph node, a dict or a list).

  Raises:
    GraphStructureError: if its parent is a tuple (or another immutable
      container), naming the path.
  """
  parent, key = object_at(root, path[:-1]), path[-1]
  impl = node_impl(type(parent))
  if impl is _MODULE_IMPL_HOLDER[0]:
    delattr(parent, key)
  elif impl is not None:
    impl.set_key(parent, key, _DELETE)
  elif isinstance(parent, dict | list):
    del parent[key]
  else:
    raise GraphStructureError(
      f"Cannot remove {_fmt(path)}: its parent is a {type(parent).__name__}, which is"
      " immutable. Fix: hold the value in a list, dict or Module attribute instead."
    )


def set_in_container(root: Any, path: tuple, value: Any) -> bool:
  """Sets ``path`` to ``value`` when its parent is a dict or list; False when
  the parent is not a plain mutable container (or is missing)."""
  try:
    parent = object_at(root, path[:-1])
  except (KeyError, IndexError, TypeError):
    return False
  if node_impl(type(parent)) is not None or not isinstance(parent, dict | list):
    return False
  parent[path[-1]] = value
  return True

"""The state tree both wrappers hold: a flat state, ``[(path, leaf)]``, nested again
into one library's containers (string keys -> a dict container, integer keys -> a
list container), so each library's ``state`` of a wrapper shows the other's paths."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .._errors import FlaxConversionError, fmt_path

_LEAF = object()


def nest(flat: Iterable[tuple[tuple, Any]]) -> dict:
  """``{key: subtree | leaf}`` from flat ``(path, leaf)`` pairs (paths non-empty)."""
  root: dict = {}
  for path, leaf in flat:
    node = root
    for k in path[:-1]:
      node = node.setdefault(k, {})
    node[path[-1]] = (_LEAF, leaf)
  return root


def build(
  tree: dict,
  path: tuple,
  leaf: Callable[[tuple, Any], Any],
  make_dict: Callable[[dict], Any],
  make_list: Callable[[list], Any],
) -> Any:
  """The container for ``tree`` at ``path``: leaves through ``leaf(path, value)``.

  Raises:
    FlaxConversionError: the keys under one node mix strings and integers.
  """
  items = {}
  for k, v in tree.items():
    if isinstance(v, tuple) and len(v) == 2 and v[0] is _LEAF:
      items[k] = leaf((*path, k), v[1])
    else:
      items[k] = build(v, (*path, k), leaf, make_dict, make_list)
  if all(isinstance(k, str) for k in items):
    return make_dict(items)
  if all(type(k) is int and k >= 0 for k in items):
    return make_list([items.get(i) for i in range(max(items) + 1)])
  raise FlaxConversionError(
    f"The state keys under {fmt_path(path)} mix strings and integers"
    f" ({sorted(map(repr, items))[:6]}), which neither library's containers hold."
    " Fix: give the attributes of one container keys of one kind."
  )


def children(
  tree: dict,
  reserved: Callable[[str], bool],
  leaf: Callable[[tuple, Any], Any],
  make_dict: Callable[[dict], Any],
  make_list: Callable[[list], Any],
) -> dict[str, Any]:
  """The top-level attributes of a wrapper: ``{name: container | leaf}``.

  Raises:
    FlaxConversionError: a top-level key is not a string, or names an attribute the
      wrapper class itself defines (``reserved``).
  """
  out = {}
  for k, v in tree.items():
    if not isinstance(k, str):
      raise FlaxConversionError(
        f"The state of the root has the key {k!r} at {fmt_path((k,))}; a converted module"
        " keeps its top-level state as attributes, which need string names. Fix: convert"
        " a Module holding the container (e.g. as `self.layers`), or each element."
      )
    if reserved(k):
      raise FlaxConversionError(
        f"The attribute {fmt_path((k,))} has the name of an attribute of the wrapper class"
        " itself, so the converted module could not hold it. Fix: rename the attribute."
      )
    if isinstance(v, tuple) and len(v) == 2 and v[0] is _LEAF:
      out[k] = leaf((k,), v[1])
    else:
      out[k] = build(v, (k,), leaf, make_dict, make_list)
  return out


def get_path(root: Any, path: tuple) -> Any:
  """The object at ``path`` below ``root`` (attributes for strings on the root,
  item access below it)."""
  node = getattr(root, path[0])
  for k in path[1:]:
    node = node[k]
  return node


def set_path(root: Any, path: tuple, value: Any) -> None:
  """Replaces the object at ``path`` below ``root`` (see :func:`get_path`)."""
  if len(path) == 1:
    setattr(root, path[0], value)
  else:
    get_path(root, path[:-1])[path[-1]] = value


def each(items: list, convert: Callable[[Any], Any], variables: Callable[[Any], list]) -> list:
  """``convert`` applied to each element of a root list, whose elements must share no
  Variable (each is converted on its own).

  Raises:
    FlaxConversionError: two elements share a Variable (both paths are named).
  """
  seen: dict[int, int] = {}
  for i, item in enumerate(items):
    for v in variables(item):
      j = seen.setdefault(id(v), i)
      if j != i:
        raise FlaxConversionError(
          f"The elements {fmt_path((j,))} and {fmt_path((i,))} of the root list share a"
          " Variable; a root list is converted element by element, which would split it"
          " in two. Fix: convert a Module holding the list (e.g. as `self.layers`)."
        )
  return [convert(item) for item in items]

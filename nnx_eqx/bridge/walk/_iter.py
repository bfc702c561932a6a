"""Walks over nested containers and deep graphs without Python recursion.

The conversions meet values nested arbitrarily deep (a list of lists 10,000
levels down, a chain of 10,000 modules), so every walk here keeps its own stack:
Python's default recursion limit (1000) is never approached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.tree_util as jtu


def fold(
  root: Any,
  expand: Callable[[Any], list | None],
  leaf: Callable[[Any, Callable[[], tuple]], Any],
  build: Callable[[Any, list], Any],
  path: tuple = (),
) -> Any:
  """A post-order fold of ``root`` with an explicit stack.

  ``expand(x)`` gives the ``(key, child)`` pairs of a container, or None for a
  leaf; ``leaf(x, at)`` converts a leaf, where ``at()`` gives its path
  (``path`` plus the keys down to it, built only when asked for: O(depth));
  ``build(x, results)`` makes a container's result from its children's, in order.
  Leaves are visited in the order a recursive pre-order walk visits them.

  Example:
    >>> from nnx_eqx.bridge.walk._iter import fold
    >>> expand = lambda x: list(enumerate(x)) if isinstance(x, list) else None
    >>> fold([1, [2, [3]]], expand, lambda x, at: (x, at()), lambda x, r: r)
    [(1, (0,)), [(2, (1, 0)), [(3, (1, 1, 0))]]]
  """
  items = expand(root)
  if items is None:
    return leaf(root, lambda: path)
  keys: list = []
  stack: list[tuple[Any, list, list]] = [(root, items, [])]
  while True:
    x, items, out = stack[-1]
    i = len(out)
    if i < len(items):
      k, c = items[i]
      sub = expand(c)
      if sub is None:
        out.append(leaf(c, lambda: path + tuple(keys) + (k,)))  # noqa: B023 - called now
      else:
        keys.append(k)
        stack.append((c, sub, []))
      continue
    stack.pop()
    result = build(x, out)
    if not stack:
      return result
    keys.pop()
    stack[-1][2].append(result)


def container_items(x: Any, jax_keys: bool = True) -> list | None:
  """The ``(key, child)`` pairs of a tuple, list, namedtuple or dict (keys as
  ``jax.tree_util`` keys, or plain indices and dict keys); None for anything else."""
  t = type(x)
  if t is tuple or t is list or (isinstance(x, tuple) and hasattr(x, "_fields")):
    if not jax_keys:
      return list(enumerate(x))
    return [(jtu.SequenceKey(i), c) for i, c in enumerate(x)]
  if t is dict:
    return list(x.items()) if not jax_keys else [(jtu.DictKey(k), c) for k, c in x.items()]
  return None


def rebuild_container(x: Any, items: list) -> Any:
  """A container of ``x``'s type holding ``items``."""
  t = type(x)
  if t is dict:
    return dict(zip(x, items))
  return items if t is list else (tuple(items) if t is tuple else t(*items))


def any_leaf(root: Any, expand: Callable[[Any], list | None], pred: Callable[[Any], bool]) -> bool:
  """True if ``pred`` holds for a leaf of ``root`` (``expand`` as in :func:`fold`)."""
  todo = [root]
  while todo:
    x = todo.pop()
    items = expand(x)
    if items is None:
      if pred(x):
        return True
    else:
      todo.extend(c for _, c in items)
  return False


def pytree_children(node: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, Any]:
  """``([(key, child), ...], treedef)`` of one level of a JAX pytree node; the
  list is None for a leaf (or for a node ``is_leaf`` accepts)."""
  if is_leaf is not None and is_leaf(node):
    return None, None  # type: ignore[return-value]
  kv, treedef = jtu.tree_flatten_with_path(node, is_leaf=lambda x: x is not node)
  if jtu.treedef_is_leaf(treedef):
    return None, None  # type: ignore[return-value]
  return [(kp[0], c) for kp, c in kv], treedef


def map_pytree(tree: Any, fn: Callable[[Any, tuple], Any], is_leaf: Callable[[Any], bool]) -> Any:
  """``tree`` with each node that ``is_leaf`` accepts replaced by ``fn(node,
  key_path)`` (other leaves kept), rebuilt one level at a time without recursion.

  Example:
    >>> from nnx_eqx.bridge.walk._iter import map_pytree
    >>> map_pytree({"a": [1, "s"]}, lambda x, kp: (x, kp), lambda x: isinstance(x, int))
    {'a': [(1, (DictKey(key='a'), SequenceKey(idx=0))), 's']}
  """
  treedefs: dict[int, Any] = {}

  def expand(x: Any) -> list | None:
    items, treedef = pytree_children(x, is_leaf)
    if items is not None:
      treedefs[id(x)] = treedef
    return items

  def build(x: Any, children: list) -> Any:
    return jtu.tree_unflatten(treedefs.pop(id(x)), children)

  def leaf(x: Any, at: Callable[[], tuple]) -> Any:
    return fn(x, at()) if is_leaf(x) else x

  return fold(tree, expand, leaf, build)


class KeyPath:
  """A path from the root, stored as (parent path, keys) so that extending it costs
  O(1) however deep it is; spelt out as a tuple (O(depth)) only when read.

  The deep conversions hand these to converters as ``ctx.path``: ``+`` a tuple
  extends it, and iterating, ``len``, ``==`` and ``hash`` behave as for the tuple.

  Example:
    >>> from nnx_eqx.bridge.walk._iter import KeyPath
    >>> p = KeyPath(("a",), (0,)) + ("w",)
    >>> tuple(p), p == ("a", 0, "w"), len(p)
    (('a', 0, 'w'), True, 3)
  """

  __slots__ = ("parent", "keys")

  def __init__(self, parent: Any, keys: tuple):
    self.parent = parent
    self.keys = keys

  def spell(self) -> tuple:
    parts = []
    p: Any = self
    while type(p) is KeyPath:
      parts.append(p.keys)
      p = p.parent
    out = tuple(p)
    for keys in reversed(parts):
      out += keys
    return out

  def __add__(self, other: Any) -> KeyPath:
    return KeyPath(self, tuple(other))

  def __radd__(self, other: Any) -> tuple:
    return tuple(other) + self.spell()

  def __iter__(self):
    return iter(self.spell())

  def __len__(self) -> int:
    return len(self.spell())

  def __getitem__(self, i: Any) -> Any:
    return self.spell()[i]

  def __eq__(self, other: object) -> bool:
    if isinstance(other, (tuple, KeyPath)):
      return self.spell() == tuple(other)
    return NotImplemented

  def __hash__(self) -> int:
    return hash(self.spell())

  def __repr__(self) -> str:
    return repr(self.spell())

"""Paths kept as parent links, made into tuples only when read.

A walk meets every node of a graph at some path; storing each path as a tuple
would cost O(depth) per node, so a chain of ``n`` Modules would cost O(n**2).
Instead a node's path is a *link* ``(parent_link, key)`` (the root's is None),
one small tuple per node whatever its depth, and :func:`path_of` spells it out
(O(depth)) only for the paths actually read: State keys, error messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

Link = Any
"""None (the root) or ``(parent_link, key)``."""


def path_of(link: Link) -> tuple:
  """The path a link stands for, as a tuple of keys."""
  keys = []
  while link is not None:
    link, k = link
    keys.append(k)
  keys.reverse()
  return tuple(keys)


class LinkedPaths(Sequence):
  """A read-only sequence of paths stored as links (each spelled out when read)."""

  __slots__ = ("links",)

  def __init__(self, links: Sequence[Link]):
    self.links = links

  def __len__(self) -> int:
    return len(self.links)

  def __getitem__(self, i):  # type: ignore[override]
    if isinstance(i, slice):
      return [path_of(link) for link in self.links[i]]
    return path_of(self.links[i])

  def __iter__(self) -> Iterator[tuple]:
    return map(path_of, self.links)

  def index(self, path: Any, start: int = 0, stop: Any = None) -> int:
    """The first position holding ``path``, comparing keys from the end up so
    that a mismatch is usually found without spelling a path out.

    Raises:
      ValueError: if no entry is ``path``.
    """
    path = tuple(path)
    links = self.links
    stop = len(links) if stop is None else stop
    for i in range(start, stop):
      if is_path(links[i], path):
        return i
    raise ValueError(f"{path!r} is not in the paths")

  def __repr__(self) -> str:
    return f"LinkedPaths({list(self)!r})"


def is_path(link: Link, path: tuple) -> bool:
  """Whether ``link`` stands for ``path`` (compared from the end up: a mismatch
  is usually found at the first key)."""
  j = len(path)
  while link is not None:
    if not j:
      return False
    link, k = link
    j -= 1
    if k != path[j]:
      return False
  return not j


def sorted_paths(links: Sequence[Link], key: Any) -> Iterator[tuple[int, tuple]]:
  """``(position, path)`` of every link, in the order of their paths sorted with
  each key mapped by ``key``; linear in the links met on the way plus the paths
  made (sorting whole paths would compare their common prefixes every time).
  Links must not repeat."""
  at: dict[int, int] = {id(link): i for i, link in enumerate(links)}
  children: dict[int, list] = {}  # the trie of the links and their ancestors
  placed: set[int] = set()
  for link in links:
    while link is not None and id(link) not in placed:
      placed.add(id(link))
      children.setdefault(id(link[0]), []).append(link)
      link = link[0]
  keys: list = []
  stack: list = [iter(sorted(children.get(id(None), ()), key=lambda c: key(c[1])))]
  if id(None) in at:
    yield at[id(None)], ()
  while stack:
    for link in stack[-1]:
      keys.append(link[1])
      i = at.get(id(link))
      if i is not None:
        yield i, tuple(keys)
      stack.append(iter(sorted(children.get(id(link), ()), key=lambda c: key(c[1]))))
      break
    else:
      stack.pop()
      if keys:
        keys.pop()

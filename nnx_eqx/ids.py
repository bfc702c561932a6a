"""``nnx.ids`` (flax.nnx's module path): process-wide unique ids that survive copies.

``uuid()`` hands out ``UUID`` objects from one thread-safe counter. Unlike ``id()``,
an id is never reused after its object dies, and copying a ``UUID`` (``copy.copy``,
``copy.deepcopy``) draws a fresh one, so a copied object never shares its original's
identity. Same behaviour as flax.nnx's ``ids`` module. nnx_eqx's graph walk itself
keys shared references by ``id()`` within one walk and needs no persistent ids.
"""

from __future__ import annotations

import itertools
import threading


class UUID:
  """A hashable id from ``uuid()``; equal only to a ``UUID`` with the same number.

  Args:
    rawid: the counter value.

  Example:
    >>> import copy
    >>> from nnx_eqx import ids
    >>> a = ids.uuid()
    >>> a == ids.UUID(a.id), copy.copy(a) == a
    (True, False)
  """

  __slots__ = ("id",)

  def __init__(self, rawid: int):
    self.id = rawid

  def __eq__(self, other: object) -> bool:
    return isinstance(other, UUID) and other.id == self.id

  def __hash__(self) -> int:
    return hash(self.id)

  def __repr__(self) -> str:
    return f"UUID({self.id})"

  def __copy__(self) -> UUID:
    return uuid()

  def __deepcopy__(self, memo: dict) -> UUID:
    return uuid()


class UUIDManager:
  """A thread-safe counter; calling it returns the next ``UUID``.

  Example:
    >>> from nnx_eqx import ids
    >>> make = ids.UUIDManager()
    >>> make(), make()
    (UUID(1), UUID(2))
  """

  def __init__(self) -> None:
    self._lock = threading.Lock()
    self._count = itertools.count(1)

  def __call__(self) -> UUID:
    """Returns a ``UUID`` no earlier call of this manager returned.

    Raises:
      Nothing.
    """
    with self._lock:
      return UUID(next(self._count))


uuid = UUIDManager()
"""The process-wide ``UUIDManager``: ``nnx.ids.uuid()`` is a fresh ``UUID``."""

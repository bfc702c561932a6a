"""A global structural version counter.

Caches of graph walks (GraphDef + flat list of leaves) stay valid while this
counter is unchanged. Any structural change to an object that already
belongs to a cached graph (assigning a node attribute, changing Variable
metadata) bumps it. Value updates (``variable.value = x``) do not.
"""

from __future__ import annotations

_epoch = [0]


def bump() -> None:
  """Invalidates every cached graph walk."""
  _epoch[0] += 1


def current() -> int:
  """The current structural version."""
  return _epoch[0]

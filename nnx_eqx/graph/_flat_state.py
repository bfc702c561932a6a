"""FlatState: a graph's leaves as ``(path, leaf)`` pairs in walk order.

Defined next to :class:`State` (``State.flat_state`` returns one); this module
keeps the import path the graph engine uses.
"""

from ._state import FlatState as FlatState

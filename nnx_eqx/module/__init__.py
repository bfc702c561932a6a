"""Modules: the ``Module`` base class, ``Rngs`` and the container Modules.

Builds on the graph engine (``nnx_eqx.graph``) only.
"""

from ._containers import Dict as Dict
from ._containers import List as List
from ._containers import Map as Map
from ._containers import Sequence as Sequence
from ._containers import Sequential as Sequential
from ._module import Module as Module
from ._rngs import RngCount as RngCount
from ._rngs import RngKey as RngKey
from ._rngs import Rngs as Rngs
from ._rngs import RngState as RngState
from ._rngs import RngStream as RngStream
from ._views import view as view
from ._views import view_info as view_info
from ._views import with_attributes as with_attributes

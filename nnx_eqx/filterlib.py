"""``nnx.filterlib`` (flax.nnx's module path): ``to_predicate`` and the filter
combinators (also reachable as ``nnx.filters``).

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from .graph.state._filters import All as All
from .graph.state._filters import Any as Any
from .graph.state._filters import Everything as Everything
from .graph.state._filters import Not as Not
from .graph.state._filters import Nothing as Nothing
from .graph.state._filters import OfType as OfType
from .graph.state._filters import PathContains as PathContains
from .graph.state._filters import PathIn as PathIn
from .graph.state._filters import WithTag as WithTag
from .graph.state._filters import buffers as buffers
from .graph.state._filters import filters_to_predicates as filters_to_predicates
from .graph.state._filters import to_predicate as to_predicate

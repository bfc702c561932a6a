"""``nnx.filterlib`` (flax.nnx's module path): ``to_predicate`` and the filter
combinators (also reachable as ``nnx.filters``).

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from .graph._filters import All as All
from .graph._filters import Any as Any
from .graph._filters import Everything as Everything
from .graph._filters import Not as Not
from .graph._filters import Nothing as Nothing
from .graph._filters import OfType as OfType
from .graph._filters import PathContains as PathContains
from .graph._filters import PathIn as PathIn
from .graph._filters import WithTag as WithTag
from .graph._filters import buffers as buffers
from .graph._filters import filters_to_predicates as filters_to_predicates
from .graph._filters import to_predicate as to_predicate

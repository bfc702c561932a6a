"""Public filter namespace (``nnx.filters.to_predicate`` and the combinators)."""

from ._filters import All as All, Any as Any, Everything as Everything, Not as Not
from ._filters import Nothing as Nothing, OfType as OfType, PathContains as PathContains
from ._filters import WithTag as WithTag, buffers as buffers, to_predicate as to_predicate

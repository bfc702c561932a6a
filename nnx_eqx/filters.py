"""Public filter namespace (``nnx.filters.to_predicate`` and the combinators)."""

from ._filters import All as All
from ._filters import Any as Any
from ._filters import Everything as Everything
from ._filters import Not as Not
from ._filters import Nothing as Nothing
from ._filters import OfType as OfType
from ._filters import PathContains as PathContains
from ._filters import WithTag as WithTag
from ._filters import buffers as buffers
from ._filters import to_predicate as to_predicate

"""``nnx.graphlib``: the graph engine's lower-level names, as flax.nnx exposes them.

``flatten``/``unflatten`` with reference maps, ``split``/``merge`` with the
``graph=`` keyword, split/merge/update contexts, and the records that
``GraphDef.nodes`` lists.
"""

from .graph._contexts import MergeContext as MergeContext
from .graph._contexts import SplitContext as SplitContext
from .graph._contexts import merge_context as merge_context
from .graph._contexts import split_context as split_context
from .graph._contexts import update_context as update_context
from .graph._errors import SharedReferenceError as SharedReferenceError
from .graph._errors import UpdateContextError as UpdateContextError
from .graph._flat_state import FlatState as FlatState
from .graph._graphdef import GraphDef as GraphDef
from .graph._graphlib import IndexMap as IndexMap
from .graph._graphlib import RefMap as RefMap
from .graph._graphlib import _flatten_pytree as _flatten_pytree
from .graph._graphlib import _unflatten_pytree as _unflatten_pytree
from .graph._graphlib import flatten as flatten
from .graph._graphlib import merge as merge
from .graph._graphlib import split as split
from .graph._graphlib import unflatten as unflatten
from .graph._nodedefs import NodeDef as NodeDef
from .graph._nodedefs import NodeRef as NodeRef
from .graph._nodedefs import TreeNodeDef as TreeNodeDef
from .graph._nodedefs import VariableDef as VariableDef

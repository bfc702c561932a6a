"""``nnx.graphlib``: the graph engine's lower-level names, as flax.nnx exposes them."""

from .graph._errors import SharedReferenceError as SharedReferenceError
from .graph._graphdef import GraphDef as GraphDef
from .graph._nodedefs import NodeDef as NodeDef
from .graph._nodedefs import NodeRef as NodeRef
from .graph._nodedefs import TreeNodeDef as TreeNodeDef
from .graph._nodedefs import VariableDef as VariableDef

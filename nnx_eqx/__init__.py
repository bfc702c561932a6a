"""nnx_eqx: the NNX module system for JAX, bridged to Equinox.

``import nnx_eqx as nnx`` reads like flax.nnx code. See the README.
"""

from . import filters as filters
from ._containers import Dict as Dict, List as List, Map as Map, Sequence as Sequence
from ._containers import Sequential as Sequential
from ._errors import FilterError as FilterError
from ._errors import GraphStructureError as GraphStructureError
from ._errors import ImmutableError as ImmutableError
from ._errors import NnxError as NnxError
from ._errors import ShapeDtypeError as ShapeDtypeError
from ._errors import StateMismatchError as StateMismatchError
from ._errors import TraceContextError as TraceContextError
from ._errors import UnknownFilterError as UnknownFilterError
from ._filters import All as All, Any as Any, Everything as Everything, Not as Not
from ._filters import Nothing as Nothing, OfType as OfType, PathContains as PathContains
from ._filters import WithTag as WithTag, buffers as buffers
from ._graph import GraphDef as GraphDef, clone as clone, graphdef as graphdef
from ._graph import is_graph_node as is_graph_node, is_node as is_node
from ._graph import iter_graph as iter_graph, iter_modules as iter_modules
from ._graph import merge as merge, pop as pop, split as split, state as state
from ._graph import update as update, variables as variables
from ._module import Module as Module
from ._pure import Pure as Pure
from ._rngs import RngCount as RngCount, RngKey as RngKey, Rngs as Rngs
from ._rngs import RngState as RngState, RngStream as RngStream
from ._state import State as State
from ._variables import BatchStat as BatchStat, Cache as Cache
from ._variables import Intermediate as Intermediate, Param as Param
from ._variables import Variable as Variable, VariableMetadata as VariableMetadata
from ._variables import with_metadata as with_metadata
from .transforms import grad as grad, jit as jit, value_and_grad as value_and_grad

# --- nn and training (layers, activations, Optimizer, TrainState) ---
from .nn import initializers as initializers
from .nn import Linear as Linear
# --- end nn and training ---

# --- transforms (vmap, scan, remat, cond, eval_shape, StateAxes, Carry) ---
# --- end transforms ---

# --- spmd ---
# --- end spmd ---

# --- bridge ---
# --- end bridge ---

# --- ecosystem (checkpoint, tabulate) ---
# --- end ecosystem ---

# --- seed systems (dataclass, Pytree, Node, Static, register_node_type) ---
# --- end seed systems ---

# Seed-era names.
ModuleDef = GraphDef
PureModule = Pure

__version__ = "0.1.0"

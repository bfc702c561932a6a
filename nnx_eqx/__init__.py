"""nnx_eqx: the NNX module system for JAX, bridged to Equinox.

``import nnx_eqx as nnx`` reads like flax.nnx code. See the README.
"""

from . import filters as filters
from ._containers import Dict as Dict
from ._containers import List as List
from ._containers import Map as Map
from ._containers import Sequence as Sequence
from ._containers import Sequential as Sequential
from ._errors import FilterError as FilterError
from ._errors import GraphStructureError as GraphStructureError
from ._errors import ImmutableError as ImmutableError
from ._errors import NnxError as NnxError
from ._errors import ShapeDtypeError as ShapeDtypeError
from ._errors import StateMismatchError as StateMismatchError
from ._errors import TraceContextError as TraceContextError
from ._errors import UnknownFilterError as UnknownFilterError
from ._filters import All as All
from ._filters import Any as Any
from ._filters import Everything as Everything
from ._filters import Not as Not
from ._filters import Nothing as Nothing
from ._filters import OfType as OfType
from ._filters import PathContains as PathContains
from ._filters import WithTag as WithTag
from ._filters import buffers as buffers
from ._graph import GraphDef as GraphDef
from ._graph import clone as clone
from ._graph import graphdef as graphdef
from ._graph import is_graph_node as is_graph_node
from ._graph import is_node as is_node
from ._graph import iter_graph as iter_graph
from ._graph import iter_modules as iter_modules
from ._graph import merge as merge
from ._graph import pop as pop
from ._graph import split as split
from ._graph import state as state
from ._graph import update as update
from ._graph import variables as variables
from ._module import Module as Module
from ._pure import Pure as Pure
from ._rngs import RngCount as RngCount
from ._rngs import RngKey as RngKey
from ._rngs import Rngs as Rngs
from ._rngs import RngState as RngState
from ._rngs import RngStream as RngStream
from ._state import State as State
from ._variables import BatchStat as BatchStat
from ._variables import Cache as Cache
from ._variables import Intermediate as Intermediate
from ._variables import Param as Param
from ._variables import Variable as Variable
from ._variables import VariableMetadata as VariableMetadata
from ._variables import with_metadata as with_metadata
from .nn import Linear as Linear

# --- nn and training (layers, activations, Optimizer, TrainState) ---
from .nn import initializers as initializers
from .transforms import grad as grad
from .transforms import jit as jit
from .transforms import value_and_grad as value_and_grad

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

"""The graph engine: Variables, node types, filters, GraphDef, the walk, State,
and the functional API (split/merge/state/update/pop/clone) built on them.

Nothing here imports the rest of the package. Modules (``nnx_eqx.module``) and
everything above them build on these names.
"""

from . import _hijax as _hijax  # installs hijax Variables (Variable(..., hijax=True))
from . import _repr as _repr  # installs the reprs of Variable, State and GraphDef
from ._errors import FilterError as FilterError
from ._errors import GraphStructureError as GraphStructureError
from ._errors import LostUpdateError as LostUpdateError
from ._errors import ModeFlagError as ModeFlagError
from ._errors import PytreeDepthError as PytreeDepthError
from ._errors import ImmutableError as ImmutableError
from ._errors import NnxError as NnxError
from ._errors import ShapeDtypeError as ShapeDtypeError
from ._errors import SharedReferenceError as SharedReferenceError
from ._errors import StateMismatchError as StateMismatchError
from ._errors import TraceContextError as TraceContextError
from ._errors import UnknownAttributeError as UnknownAttributeError
from ._errors import UnknownFilterError as UnknownFilterError
from ._lost_updates import clear_lost_updates as clear_lost_updates
from ._filters import All as All
from ._filters import Any as Any
from ._filters import Everything as Everything
from ._filters import Filter as Filter
from ._filters import Not as Not
from ._filters import Nothing as Nothing
from ._filters import OfType as OfType
from ._filters import PathContains as PathContains
from ._filters import WithTag as WithTag
from ._filters import buffers as buffers
from ._filters import to_predicate as to_predicate
from ._graph import GraphDef as GraphDef
from ._graph import NodeImpl as NodeImpl
from ._graph import StaticValue as StaticValue
from ._graph import clone as clone
from ._graph import graphdef as graphdef
from ._graph import is_graph_node as is_graph_node
from ._graph import is_node as is_node
from ._node_types import is_node_leaf as is_node_leaf
from ._node_types import is_node_module as is_node_module
from ._node_types import is_node_type as is_node_type
from ._node_types import is_pytree_node as is_pytree_node
from ._tree_form import jax_to_nnx_path as jax_to_nnx_path
from ._graph import iter_graph as iter_graph
from ._graph import set_metadata as set_metadata
from ._graph import iter_modules as iter_modules
from ._graph import merge as merge
from ._graph import node_impl as node_impl
from ._graph import pop as pop
from ._graph import register_graph_node_type as register_graph_node_type
from ._graph import register_leaf_type as register_leaf_type
from ._graph import split as split
from ._graph import state as state
from ._graph import update as update
from ._graph import variables as variables
from ._state import State as State
from ._variables import BatchStat as BatchStat
from ._variables import as_pure as as_pure
from ._variables import Cache as Cache
from ._variables import Intermediate as Intermediate
from ._variables import Perturbation as Perturbation
from ._variables import Param as Param
from ._variables import Variable as Variable
from ._variables import VariableMetadata as VariableMetadata
from ._variables import with_metadata as with_metadata

# flax.nnx.graph / graphlib names that live in this layer (the rest: nnx_eqx.graphlib).
from ._contexts import UpdateContext as UpdateContext
from ._contexts import current_update_context as current_update_context
from ._contexts import MergeContext as MergeContext
from ._contexts import SplitContext as SplitContext
from ._contexts import merge_context as merge_context
from ._contexts import split_context as split_context
from ._contexts import update_context as update_context
from ._graphlib import IndexMap as IndexMap
from ._graphlib import RefMap as RefMap
from ._graphlib import flatten as flatten
from ._graphlib import unflatten as unflatten
from ._state import FlatState as FlatState
from ._cached_partial import cached_partial as cached_partial
from ._duplicates import find_duplicates as find_duplicates
from ._graph_mode import set_graph_mode as set_graph_mode
from ._graph_mode import set_graph_updates as set_graph_updates
from ._graph_state import GraphState as GraphState
from ._graph_state import unpack as unpack
from ._graphdef import PureState as PureState
from ._graphdef import call as call
from ._map import map_leaves as map
from ._nodedefs import NodeDef as NodeDef
from ._nodedefs import NodeRef as NodeRef
from ._nodedefs import TreeNodeDef as TreeNodeDef
from ._nodedefs import VariableDef as VariableDef
from collections.abc import Hashable as _Hashable

Key = _Hashable
"""A path key (attribute name or index): ``flax.nnx.graph.Key``."""

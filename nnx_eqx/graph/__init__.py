"""The graph engine: Variables, node types, filters, GraphDef, the walk, State,
and the functional API (split/merge/state/update/pop/clone) built on them.

Its rooms, lowest first, each importing only those before it: ``tracing/``,
``variables/``, ``state/``, ``walk/``, ``pytree/`` and ``api/``, over ``_errors`` and
``_version``. Nothing here imports the rest of the package. Modules (``nnx_eqx.module``) and
everything above them build on these names.
"""

from .variables import _hijax
from .api import _repr
from ._errors import FilterError as FilterError
from ._errors import GraphStructureError as GraphStructureError
from ._errors import LostUpdateError as LostUpdateError
from ._errors import ModeFlagError as ModeFlagError
from ._errors import WrongLibraryError as WrongLibraryError
from ._errors import PytreeDepthError as PytreeDepthError
from ._errors import ImmutableError as ImmutableError
from ._errors import NnxError as NnxError
from ._errors import ShapeDtypeError as ShapeDtypeError
from ._errors import SharedReferenceError as SharedReferenceError
from ._errors import StateMismatchError as StateMismatchError
from ._errors import TraceContextError as TraceContextError
from ._errors import UnknownAttributeError as UnknownAttributeError
from ._errors import UnknownFilterError as UnknownFilterError
from .tracing._lost_updates import clear_lost_updates as clear_lost_updates
from .tracing._lost_updates import set_lost_update_watch as set_lost_update_watch
from .state._filters import All as All
from .state._filters import Any as Any
from .state._filters import Everything as Everything
from .state._filters import Filter as Filter
from .state._filters import Not as Not
from .state._filters import Nothing as Nothing
from .state._filters import OfType as OfType
from .state._filters import PathContains as PathContains
from .state._filters import WithTag as WithTag
from .state._filters import buffers as buffers
from .state._filters import to_predicate as to_predicate
from .api._functional import GraphDef as GraphDef
from .api._functional import NodeImpl as NodeImpl
from .api._functional import StaticValue as StaticValue
from .api._functional import clone as clone
from .api._functional import graphdef as graphdef
from .api._functional import is_graph_node as is_graph_node
from .api._functional import is_node as is_node
from .walk._node_types import is_node_leaf as is_node_leaf
from .walk._node_types import is_node_module as is_node_module
from .walk._node_types import is_node_type as is_node_type
from .walk._node_types import is_pytree_node as is_pytree_node
from .api._tree_form import jax_to_nnx_path as jax_to_nnx_path
from .api._functional import iter_graph as iter_graph
from .api._functional import set_metadata as set_metadata
from .api._functional import iter_modules as iter_modules
from .api._functional import merge as merge
from .api._functional import node_impl as node_impl
from .api._functional import pop as pop
from .api._functional import register_graph_node_type as register_graph_node_type
from .api._functional import register_leaf_type as register_leaf_type
from .api._functional import split as split
from .api._functional import state as state
from .api._functional import update as update
from .api._functional import variables as variables
from .state._state import State as State
from .variables._variables import BatchStat as BatchStat
from .variables._variables import as_pure as as_pure
from .variables._variables import Cache as Cache
from .variables._variables import Intermediate as Intermediate
from .variables._variables import Perturbation as Perturbation
from .variables._variables import Param as Param
from .variables._variables import Variable as Variable
from .variables._variables import VariableMetadata as VariableMetadata
from .variables._variables import with_metadata as with_metadata

# flax.nnx.graph / graphlib names that live in this layer (the rest: nnx_eqx.graphlib).
from .api._contexts import UpdateContext as UpdateContext
from .api._contexts import current_update_context as current_update_context
from .api._contexts import MergeContext as MergeContext
from .api._contexts import SplitContext as SplitContext
from .api._contexts import merge_context as merge_context
from .api._contexts import split_context as split_context
from .api._contexts import update_context as update_context
from .api._flatten import IndexMap as IndexMap
from .api._flatten import RefMap as RefMap
from .api._flatten import flatten as flatten
from .api._flatten import unflatten as unflatten
from .state._state import FlatState as FlatState
from .api._cached_partial import cached_partial as cached_partial
from .walk._duplicates import find_duplicates as find_duplicates
from .walk._graph_mode import set_graph_mode as set_graph_mode
from .walk._graph_mode import set_graph_updates as set_graph_updates
from .api._graph_state import GraphState as GraphState
from .api._graph_state import unpack as unpack
from .walk._graphdef import PureState as PureState
from .walk._graphdef import call as call
from .api._map import map_leaves as map
from .walk._nodedefs import NodeDef as NodeDef
from .walk._nodedefs import NodeRef as NodeRef
from .walk._nodedefs import TreeNodeDef as TreeNodeDef
from .walk._nodedefs import VariableDef as VariableDef
from collections.abc import Hashable as _Hashable

Key = _Hashable
"""A path key (attribute name or index): ``flax.nnx.graph.Key``."""

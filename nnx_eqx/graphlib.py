"""``nnx.graphlib``: the graph engine's lower-level names, as flax.nnx exposes them.

``flatten``/``unflatten`` with reference maps, ``split``/``merge`` with the
``graph=`` keyword, split/merge/update contexts, and the records that
``GraphDef.nodes`` lists.
"""

from .deprecations import deprecated as _deprecated
from .graph import Key as Key
from .graph import is_graph_node as is_graph_node
from .graph import is_node as is_node
from .graph._errors import SharedReferenceError as SharedReferenceError
from .graph._errors import UpdateContextError as UpdateContextError
from .graph.api._cached_partial import cached_partial as cached_partial
from .graph.api._contexts import MergeContext as MergeContext
from .graph.api._contexts import SplitContext as SplitContext
from .graph.api._contexts import UpdateContext as UpdateContext
from .graph.api._contexts import current_update_context as current_update_context
from .graph.api._contexts import merge_context as merge_context
from .graph.api._contexts import split_context as split_context
from .graph.api._contexts import update_context as update_context
from .graph.api._flatten import IndexMap as IndexMap
from .graph.api._flatten import RefMap as RefMap
from .graph.api._flatten import _flatten_pytree as _flatten_pytree
from .graph.api._flatten import _unflatten_pytree as _unflatten_pytree
from .graph.api._flatten import flatten as flatten
from .graph.api._flatten import merge as merge
from .graph.api._flatten import split as split
from .graph.api._flatten import unflatten as unflatten
from .graph.api._functional import iter_graph as iter_graph
from .graph.api._functional import set_metadata as set_metadata
from .graph.api._graph_state import GraphState as GraphState
from .graph.api._graph_state import unpack as unpack
from .graph.api._map import map_leaves as _map_leaves
from .graph.api._tree_form import jax_to_nnx_path as jax_to_nnx_path
from .graph.state._state import FlatState as FlatState
from .graph.variables._ref_placeholders import NO_UPDATE as NO_UPDATE
from .graph.variables._ref_placeholders import ArrayRefOutput as ArrayRefOutput
from .graph.variables._ref_placeholders import NoUpdate as NoUpdate
from .graph.variables._variables import as_pure as as_pure
from .graph.walk._duplicates import find_duplicates as find_duplicates
from .graph.walk._graph_mode import set_graph_mode as set_graph_mode
from .graph.walk._graph_mode import set_graph_updates as set_graph_updates
from .graph.walk._graphdef import GraphDef as GraphDef
from .graph.walk._graphdef import PureState as PureState
from .graph.walk._graphdef import call as call
from .graph.walk._node_types import is_node_leaf as is_node_leaf
from .graph.walk._node_types import is_node_module as is_node_module
from .graph.walk._node_types import is_node_type as is_node_type
from .graph.walk._node_types import is_pytree_node as is_pytree_node
from .graph.walk._nodedefs import NodeDef as NodeDef
from .graph.walk._nodedefs import NodeRef as NodeRef
from .graph.walk._nodedefs import TreeNodeDef as TreeNodeDef
from .graph.walk._nodedefs import VariableDef as VariableDef
from .module import iter_children as iter_children
from .module import iter_module_children as iter_module_children
from .module import with_vars as with_vars
from .transforms._graph_keywords import clone as clone
from .transforms._graph_keywords import graphdef as graphdef
from .transforms._graph_keywords import pop as pop
from .transforms._graph_keywords import state as state
from .transforms._graph_keywords import update as update
from .transforms._graph_keywords import variables as variables
from .transforms.rngs._tools import recursive_map as recursive_map

map = _map_leaves  # noqa: A001 (flax.nnx.graphlib.map)
pure = _deprecated(as_pure)
"""Deprecated alias of ``nnx.as_pure`` (as in flax.nnx 0.12)."""
vars_as = _deprecated(with_vars)
"""Deprecated alias of ``nnx.with_vars`` (as in flax.nnx 0.12)."""

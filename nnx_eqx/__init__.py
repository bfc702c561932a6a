"""nnx_eqx: the NNX module system for JAX, bridged to Equinox.

``import nnx_eqx as nnx`` reads like flax.nnx code. See the README.
"""

from . import _jax_version as _jax_version  # first: one clear error on a too old jax

from . import filterlib as filterlib
from . import filterlib as filters  # the name nnx_eqx used before flax's ``filterlib``
from . import graphlib as graphlib
from . import statelib as statelib
from . import extract as extract
from .graph.walk._graphdef import PureState as PureState
from .graph.walk._graphdef import call as call
from .graph.api._tree_form import NodeStates as NodeStates
from .graph.api._tree_form import to_tree as to_tree
from .graph.api._tree_form import from_tree as from_tree
from .graphlib import SplitContext as SplitContext
from .graphlib import MergeContext as MergeContext
from .graphlib import merge_context as merge_context
from .graphlib import split_context as split_context
from .graphlib import update_context as update_context
from .graph.api._map import map_leaves as map
from .graph.walk._duplicates import find_duplicates as find_duplicates
from .graph.state._state_tools import replace_by_pure_dict as replace_by_pure_dict
from .graph.state._state_tools import split_state as split_state
from .graph.state._state_tools import filter_state as filter_state
from .graph.state._state_tools import merge_state as merge_state
from .graph.state._state_tools import restore_int_paths as restore_int_paths
from .graph.api._repr import display as display
from .graph.api._cached_partial import cached_partial as cached_partial
from .graph._errors import GraphModeRequiredError as GraphModeRequiredError
from .graph._errors import HijaxGradientError as HijaxGradientError
from .graph._errors import ImmutableVariableError as ImmutableVariableError
from .graph._errors import JaxVersionError as JaxVersionError
from . import variablelib as variablelib
from .variablelib import A as A  # the value TypeVar: ``nnx.Variable[nnx.A]``
from .module import Dict as Dict
from .module import List as List
from .module import Map as Map
from .module import Sequence as Sequence
from .module import Sequential as Sequential
from .graph import FilterError as FilterError
from .graph import GraphStructureError as GraphStructureError
from .graph import LostUpdateError as LostUpdateError
from .graph import clear_lost_updates as clear_lost_updates
from .graph import set_lost_update_watch as set_lost_update_watch
from .graph import ModeFlagError as ModeFlagError
from .graph import WrongLibraryError as WrongLibraryError
from .graph import PytreeDepthError as PytreeDepthError
from .graph import SharedReferenceError as SharedReferenceError
from .graph import set_metadata as set_metadata
from .graph import ImmutableError as ImmutableError
from .graph import NnxError as NnxError
from .graph import ShapeDtypeError as ShapeDtypeError
from .graph import StateMismatchError as StateMismatchError
from .graph import TraceContextError as TraceContextError
from .graph import UnknownAttributeError as UnknownAttributeError
from .graph import UnknownFilterError as UnknownFilterError
from .graph import All as All
from .graph import Any as Any
from .graph import Everything as Everything
from .graph import Not as Not
from .graph import Nothing as Nothing
from .graph import OfType as OfType
from .graph import PathContains as PathContains
from .graph import WithTag as WithTag
from .graph import buffers as buffers
from .graph import GraphDef as GraphDef
from .graph import is_graph_node as is_graph_node
from .graph import is_node as is_node
from .module import Module as Module
from .legacy import Pure as Pure
from .module import RngCount as RngCount
from .module import RngKey as RngKey
from .module import Rngs as Rngs
from .module import RngState as RngState
from .module import RngStream as RngStream
from .module import capture as capture
from .module import view as view
from .module import with_vars as with_vars
from .module import SowError as SowError
from .module import iter_children as iter_children
from .module import Data as Data
from .module import Pytree as Pytree
from .module import PytreeDataError as PytreeDataError
from .module import data as data
from .module import is_data as is_data
from .module import register_data_type as register_data_type
from .module import static as static
from .module import view_info as view_info
from .module import with_attributes as with_attributes
from .graph import State as State
from .graph import BatchStat as BatchStat
from .graph import as_pure as as_pure
from .graph import Cache as Cache
from .graph import Intermediate as Intermediate
from .graph import Perturbation as Perturbation
from .graph import Param as Param
from .graph import Variable as Variable
from .graph import VariableMetadata as VariableMetadata
from .graph import with_metadata as with_metadata
from .nn import Linear as Linear

# --- nn and training (layers, activations, Optimizer, TrainState) ---
from . import nn as nn
from . import training as training
from .training import OptArray as OptArray
from .training import Optimizer as Optimizer
from .training import OptState as OptState
from .training import OptVariable as OptVariable
from .nn import BatchNorm as BatchNorm
from .nn import CacheError as CacheError
from .nn import Conv as Conv
from .nn import ConvTranspose as ConvTranspose
from .nn import Dropout as Dropout
from .nn import Einsum as Einsum
from .nn import Embed as Embed
from .nn import GroupNorm as GroupNorm
from .nn import GRUCell as GRUCell
from .nn import InputDtypeError as InputDtypeError
from .nn import InputShapeError as InputShapeError
from .nn import LayerConfigError as LayerConfigError
from .nn import LayerNorm as LayerNorm
from .nn import LinearGeneral as LinearGeneral
from .nn import LSTMCell as LSTMCell
from .nn import MissingFlagError as MissingFlagError
from .nn import MissingRngsError as MissingRngsError
from .nn import MultiHeadAttention as MultiHeadAttention
from .nn import OptimizedLSTMCell as OptimizedLSTMCell
from .nn import PReLU as PReLU
from .nn import RMSNorm as RMSNorm
from .nn import RoPE as RoPE
from .nn import RngsTypeError as RngsTypeError
from .nn import RNNCellBase as RNNCellBase
from .nn import SimpleCell as SimpleCell
from .nn import RNN as RNN
from .nn import Bidirectional as Bidirectional
from .nn import SpectralNorm as SpectralNorm
from .nn import WeightNorm as WeightNorm
from .nn import avg_pool as avg_pool
from .nn import celu as celu
from .nn import combine_masks as combine_masks
from .nn import dot_product_attention as dot_product_attention
from .nn import dot_product_attention_weights as dot_product_attention_weights
from .nn import dot_product_attention_with_rope as dot_product_attention_with_rope
from .nn import elu as elu
from .nn import gelu as gelu
from .nn import glu as glu
from .nn import hard_sigmoid as hard_sigmoid
from .nn import hard_silu as hard_silu
from .nn import hard_swish as hard_swish
from .nn import hard_tanh as hard_tanh
from .nn import identity as identity
from .nn import initializers as initializers
from .nn import leaky_relu as leaky_relu
from .nn import log_sigmoid as log_sigmoid
from .nn import log_softmax as log_softmax
from .nn import logsumexp as logsumexp
from .nn import make_attention_mask as make_attention_mask
from .nn import make_causal_mask as make_causal_mask
from .nn import max_pool as max_pool
from .nn import min_pool as min_pool
from .nn import one_hot as one_hot
from .nn import pool as pool
from .nn import relu as relu
from .nn import relu6 as relu6
from .nn import selu as selu
from .nn import sigmoid as sigmoid
from .nn import silu as silu
from .nn import soft_sign as soft_sign
from .nn import softmax as softmax
from .nn import softplus as softplus
from .nn import standardize as standardize
from .nn import swish as swish
from .nn import tanh as tanh

# --- end nn and training ---

# --- transforms (vmap, scan, remat, cond, eval_shape, StateAxes, Carry) ---
from .transforms import AxisRankError as AxisRankError
from .transforms import AxisSizeError as AxisSizeError
from .transforms import AxisSpecError as AxisSpecError
from .transforms import BroadcastUpdateError as BroadcastUpdateError
from .transforms import Carry as Carry
from .transforms import CapturedNodeError as CapturedNodeError
from .transforms import CarryIdentityError as CarryIdentityError
from .transforms import CarryMismatchError as CarryMismatchError
from .transforms import InconsistentAliasingError as InconsistentAliasingError
from .transforms import KeywordArgumentError as KeywordArgumentError
from .transforms import LiftedStructureError as LiftedStructureError
from .legacy import Remat as Remat
from .legacy import RematOptions as RematOptions
from .legacy import Scan as Scan
from .transforms import ScanLengthError as ScanLengthError
from .legacy import ScanOptions as ScanOptions
from .transforms import SplitBackups as SplitBackups
from .transforms import StateAxes as StateAxes
from .transforms import restore_rngs as restore_rngs
from .transforms import BoundMethodError as BoundMethodError
from .transforms import TangentStructureError as TangentStructureError
from .transforms._graph_keywords import jvp as jvp
from .transforms._graph_keywords import vjp as vjp
from .transforms._graph_keywords import jit_partial as jit_partial
from .transforms._graph_keywords import pmap as pmap
from .transforms._graph_keywords import shard_map as shard_map
from .transforms._graph_keywords import prefix as prefix
from .transforms import custom_vjp as custom_vjp
from .transforms import CustomVjpError as CustomVjpError
from .transforms._graph_keywords import checkify as checkify
from .transforms import make_jaxpr as make_jaxpr
from .transforms import UnsupportedModeError as UnsupportedModeError
from .transforms import StateSharding as StateSharding
from .transforms import CompiledStructureError as CompiledStructureError
from ._stacking import StackStructureError as StackStructureError
from ._stacking import stack as stack
from ._stacking import unstack as unstack

# --- end transforms ---

# --- spmd ---
from . import spmd as spmd
from .spmd import PARTITION_NAME as PARTITION_NAME
from .spmd import abstract_with_sharding as abstract_with_sharding
from .spmd import as_abstract as as_abstract
from .spmd import get_abstract_model as get_abstract_model
from .spmd import use_eager_sharding as use_eager_sharding
from .spmd import using_eager_sharding as using_eager_sharding
from .spmd import ShardingError as ShardingError
from .spmd import UnmatchedPatternError as UnmatchedPatternError
from .spmd import set_partitioning as set_partitioning
from .spmd import UnknownMeshAxisError as UnknownMeshAxisError
from .spmd import get_logical_axis_rules as get_logical_axis_rules
from .spmd import get_named_sharding as get_named_sharding
from .spmd import get_partition_spec as get_partition_spec
from .spmd import logical_axis_rules as logical_axis_rules
from .spmd import logical_to_mesh as logical_to_mesh
from .spmd import logical_to_mesh_axes as logical_to_mesh_axes
from .spmd import logical_to_mesh_sharding as logical_to_mesh_sharding
from .spmd import set_logical_axis_rules as set_logical_axis_rules
from .spmd import with_logical_constraint as with_logical_constraint
from .spmd import with_logical_partitioning as with_logical_partitioning
from .spmd import with_partitioning as with_partitioning
from .spmd import with_sharding_constraint as with_sharding_constraint

# --- end spmd ---

# --- bridge ---
from . import bridge as bridge
from .bridge import from_eqx as from_eqx
from .bridge import to_eqx as to_eqx
from .bridge import to_eqx_with_state as to_eqx_with_state
from .bridge import from_flax as from_flax
from .bridge import to_flax as to_flax
from .bridge import EqxFileMismatchError as EqxFileMismatchError
from .bridge import tree_deserialise_leaves as tree_deserialise_leaves
from .bridge import tree_serialise_leaves as tree_serialise_leaves

# --- end bridge ---

# --- ecosystem (checkpoint, tabulate) ---
from . import checkpoint as checkpoint
from .training._summary import tabulate as tabulate
from .checkpoint import CheckpointMismatchError as CheckpointMismatchError
from .checkpoint import CheckpointCorruptError as CheckpointCorruptError

# --- end ecosystem ---

# --- seed systems (dataclass, Pytree, Node, Static, register_node_type) ---
from .legacy import DataclassError as DataclassError
from .legacy import dataclass as dataclass
from .legacy import field as field
from .legacy import node_field as node_field
from .legacy import param_field as param_field
from .legacy import static_field as static_field
from .legacy import var_field as var_field
from .legacy import Node as Node
from .legacy import Static as Static
from .legacy import is_node_leaf as is_node_leaf
from .legacy import register_node_type as register_node_type
from .legacy import TreeNode as TreeNode
from .legacy import UnknownFieldError as UnknownFieldError
from .legacy import TrainState as TrainState

# --- end seed systems ---

# --- flax 0.12 parity (graph keywords, Rngs helpers) ---
from . import compat as compat
from . import legacy as legacy
from . import metrics as metrics
from .graph.state._diff_state import DiffState as DiffState
from .training.ema import EMA as EMA
from .training.optimizer import ModelAndOptimizer as ModelAndOptimizer
from .graph._errors import UnknownStreamError as UnknownStreamError
from .transforms._graph_keywords import clone as clone
from .transforms._graph_keywords import cond as cond
from .transforms._graph_keywords import eval_shape as eval_shape
from .transforms._graph_keywords import fori_loop as fori_loop
from .transforms._graph_keywords import grad as grad
from .transforms._graph_keywords import graphdef as graphdef
from .transforms._graph_keywords import iter_graph as iter_graph
from .transforms._graph_keywords import iter_modules as iter_modules
from .transforms._graph_keywords import jit as jit
from .transforms._graph_keywords import merge as merge
from .transforms._graph_keywords import pop as pop
from .transforms._graph_keywords import remat as remat
from .transforms._graph_keywords import scan as scan
from .transforms._graph_keywords import split as split
from .transforms._graph_keywords import state as state
from .transforms._graph_keywords import switch as switch
from .transforms._graph_keywords import update as update
from .transforms._graph_keywords import value_and_grad as value_and_grad
from .transforms._graph_keywords import variables as variables
from .transforms._graph_keywords import vmap as vmap
from .transforms._graph_keywords import while_loop as while_loop
from .graph.walk._graph_mode import get_graph_mode as get_graph_mode
from .graph.api._graph_state import GraphState as GraphState
from .graph.api._graph_state import unpack as unpack
from .training.metrics import Metric as Metric
from .nn import LoRA as LoRA
from .nn import LoRALinear as LoRALinear
from .nn import LoRAParam as LoRAParam
from .training.metrics import MultiMetric as MultiMetric
from .graph.walk._graph_mode import set_graph_mode as set_graph_mode
from .graph.walk._graph_mode import set_graph_updates as set_graph_updates
from .graph.walk._graph_mode import set_sow_capture_noop as set_sow_capture_noop
from .transforms.rngs._tools import fork_rngs as fork_rngs
from .transforms.rngs._tools import recursive_map as recursive_map
from .transforms.rngs._tools import reseed as reseed
from .transforms.rngs._tools import split_rngs as split_rngs
from .transforms.rngs._tools import with_rngs as with_rngs
from .graph.state._state_tools import from_flat_state as from_flat_state
from .graph.variables._defaults import VarDefaults as VarDefaults
from .graph.variables._defaults import var_defaults as var_defaults
from .nn import InstanceNorm as InstanceNorm
from .nn._common import Initializer as Initializer
from .graph.state._state_tools import to_flat_state as to_flat_state
from .graph.state._state_tools import to_pure_dict as to_pure_dict

# --- end flax 0.12 parity ---

# --- flax 0.12 import surface ---
# flax.nnx's public module paths exist here too (tests/test_flax_surface.py checks the
# list in tests/parity/flax_surface_<version>.json). Where nnx_eqx's implementation file holds the
# concept it is that module (nn.linear, nn.attention, nn.normalization, nn.recurrent,
# nn.lora, nn.stochastic, training.optimizer/metrics/ema, traversals, deprecations);
# the remaining paths are re-export namespaces, all at the package top level
# (filterlib, graphlib, statelib, variablelib, rnglib, pytreelib, helpers, summary,
# visualization, compat, extract) or in transforms/ (autodiff, compilation, iteration,
# transforms).
from . import deprecations as deprecations
from . import helpers as helpers
from . import pytreelib as pytreelib
from . import rnglib as rnglib
from . import summary as summary
from . import traversals as traversals
from . import visualization as visualization
from .graph.state._state import FlatState as FlatState
from .graph.state._state_tools import map_state as map_state
from .graphlib import UpdateContext as UpdateContext
from .graphlib import current_update_context as current_update_context
from .graphlib import flatten as flatten
from .graphlib import pure as pure
from .graphlib import unflatten as unflatten
from .graphlib import vars_as as vars_as
from .module import Object as Object
from .module import check_pytree as check_pytree
from .module import has_data as has_data
from .module import iter_module_children as iter_module_children
from .transforms.lifted._transform_metadata import transform_metadata as transform_metadata
from .variablelib import VariableState as VariableState
from .variablelib import register_variable_name as register_variable_name
from .variablelib import variable_name_from_type as variable_name_from_type
from .variablelib import variable_type_from_name as variable_type_from_name

# --- end flax 0.12 import surface ---

# Seed-era names.
ModuleDef = GraphDef
PureModule = Pure

# --- flax names not defined above: lazy submodules and aliases, out-of-scope names ---
from . import _flax_names as _flax_names  # noqa: E402
from ._flax_names import OutOfScopeError as OutOfScopeError  # noqa: E402

_flax_names.install()  # a module __getattr__ here and on the namespaces concerned

__version__ = "0.1.0"

# Public classes report their public import path (``nnx_eqx.LostUpdateError``), and
# pickles of earlier releases find the modules they name (``nnx_eqx._pickle_names``).
from . import _pickle_names  # noqa: E402

_pickle_names.publish_all()
_pickle_names.install_moved_modules()

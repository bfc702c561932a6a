"""The Equinox bridge: ``nnx.from_eqx``, ``nnx.to_eqx``, ``nnx.to_eqx_with_state``;
and the flax.nnx bridge, ``nnx.from_flax`` and ``nnx.to_flax`` (``flax_nnx/``, flax optional).

* ``_registry``: converter pairs (``register``), looked up by exact type.
* ``_context``: the two conversion contexts (recursion, paths, sharing, state).
* ``_converters``: the built-in ``eqx.nn`` pairs; ``_layers``, ``_norms``,
  ``_attention``, ``_recurrent``: NNX modules computing Equinox's equations;
  ``_eqx_layers``: Equinox layers keeping an NNX layer's layout and program.
* ``_generic`` (any ``eqx.Module`` -> NNX) and ``_bridged`` (any NNX module ->
  ``eqx.Module``): conversions for unregistered types.
* ``_random``: where converted Dropouts get keys (``key=``, call-time
  ``rngs=``, or a stream kept from ``nnx.from_eqx(..., rngs=...)``).
* ``_shared``: ``eqx.nn.Shared`` <-> shared Variables; ``_state``:
  ``eqx.nn.State`` <-> non-Param Variables.
* ``_stack``: the stack axes of layers built with ``eqx.filter_vmap``, which
  every built-in converter checks (its layouts act on trailing axes, so stacks
  convert to the same NNX classes with stacked Variables).
* ``_static``: static attributes that cannot be hashed, kept hashable in the
  Equinox treedef but read back as the objects themselves.
* ``_serialise``: Equinox's file format for NNX modules, through their
  Equinox form.

Imports go one way: ``_errors``, ``_registry``, ``_state`` -> the contexts
(``_context``, ``_to_eqx``) -> ``_bridged`` -> ``_shared`` -> ``_convert`` ->
``_generic`` -> the layers and ``_converters`` (``_random``, used by
``_generic`` and the layers, rests on ``_errors`` alone). The contexts reach the generic
conversions through ``_registry.GENERIC``, which ``_generic`` fills.
"""

from . import _converters as _converters  # registers the built-in pairs
from ._attention import MultiheadAttention as MultiheadAttention
from ._bridged import NnxModule as NnxModule
from ._context import FromEqxContext as FromEqxContext
from ._to_eqx import ToEqxContext as ToEqxContext
from ._convert import from_eqx as from_eqx
from ._convert import to_eqx as to_eqx
from ._convert import to_eqx_with_state as to_eqx_with_state
from ._converters import Layout as Layout
from ._errors import BridgeError as BridgeError
from ._errors import ConverterClashError as ConverterClashError
from ._errors import CycleError as CycleError
from ._errors import FlaxConversionError as FlaxConversionError
from ._errors import FlaxNotInstalledError as FlaxNotInstalledError
from ._errors import MissingKeyError as MissingKeyError
from ._errors import MissingStateError as MissingStateError
from ._errors import SharedConversionError as SharedConversionError
from ._errors import StatefulModuleError as StatefulModuleError
from ._errors import UnconvertibleFieldError as UnconvertibleFieldError
from ._eqx_layers import KernelLinear as KernelLinear
from ._generic import EqxModule as EqxModule
from ._layers import MLP as MLP
from ._layers import Conv as Conv
from ._layers import Dropout as Dropout
from ._layers import Embedding as Embedding
from ._layers import Identity as Identity
from ._layers import Lambda as Lambda
from ._layers import Linear as Linear
from ._layers import Pool as Pool
from ._layers import Sequential as Sequential
from ._norms import BatchNorm as BatchNorm
from ._norms import LayerNorm as LayerNorm
from ._norms import RMSNorm as RMSNorm
from ._recurrent import GRUCell as GRUCell
from ._recurrent import LSTMCell as LSTMCell
from ._registry import Converter as Converter
from ._registry import register as register
from ._serialise import EqxFileMismatchError as EqxFileMismatchError
from ._serialise import tree_deserialise_leaves as tree_deserialise_leaves
from ._serialise import tree_serialise_leaves as tree_serialise_leaves
from ._registry import registered as registered
from ._registry import unregister as unregister
from ._shared import Select as Select
from ._shared import Shared as Shared
from ._shared import SharedRoot as SharedRoot
from ._stack import stack_shape as stack_shape
from ._state import EqxState as EqxState
from .flax_nnx import FlaxModule as FlaxModule
from .flax_nnx import from_flax as from_flax
from .flax_nnx import to_flax as to_flax

"""The Equinox bridge: ``nnx.from_eqx``, ``nnx.to_eqx``, ``nnx.to_eqx_with_state``;
and the flax.nnx bridge, ``nnx.from_flax`` and ``nnx.to_flax`` (``flax_nnx/``, flax optional).

Its rooms, lowest first, each importing only those before it: ``walk/`` (the
converter registry, the two conversion contexts with their recursion, paths,
sharing and ``eqx.nn.State`` bookkeeping), ``convert/`` (the public conversions,
any ``eqx.Module`` as an NNX module and back, ``eqx.nn.Shared``, static fields,
classes made at conversion time) and ``layers/`` (the built-in ``eqx.nn`` pairs and
the NNX modules computing Equinox's equations). ``_serialise`` (Equinox's file
format) and ``_demo`` sit on top; ``_errors`` below all. The bridge imports the
graph, module, nn and training layers, never ``legacy``.
"""

from .layers import _converters
from .layers._attention import MultiheadAttention as MultiheadAttention
from .convert._bridged import NnxModule as NnxModule
from .convert._flax_form import EqxFlaxModule as EqxFlaxModule
from .walk._context import FromEqxContext as FromEqxContext
from .walk._to_eqx import ToEqxContext as ToEqxContext
from .convert._convert import from_eqx as from_eqx
from .convert._convert import to_eqx as to_eqx
from .convert._convert import to_eqx_with_state as to_eqx_with_state
from .layers._converters import Layout as Layout
from ._errors import BridgeError as BridgeError
from ._errors import ConverterClashError as ConverterClashError
from ._errors import CycleError as CycleError
from ._errors import ExampleShapeError as ExampleShapeError
from ._errors import ExplicitShardingError as ExplicitShardingError
from ._errors import FlaxConversionError as FlaxConversionError
from ._errors import FlaxNotInstalledError as FlaxNotInstalledError
from ._errors import MissingKeyError as MissingKeyError
from ._errors import MissingStateError as MissingStateError
from ._errors import SharedConversionError as SharedConversionError
from ._errors import StatefulModuleError as StatefulModuleError
from ._errors import UnconvertibleFieldError as UnconvertibleFieldError
from ._errors import UnboundAxisError as UnboundAxisError
from .layers._eqx_layers import KernelLinear as KernelLinear
from .convert._generic import EqxModule as EqxModule
from .layers._layers import MLP as MLP
from .layers._layers import Conv as Conv
from .layers._layers import Dropout as Dropout
from .layers._layers import Embedding as Embedding
from .layers._layers import Identity as Identity
from .layers._layers import Lambda as Lambda
from .layers._layers import Linear as Linear
from .layers._layers import Pool as Pool
from .layers._layers import Sequential as Sequential
from .layers._norms import BatchNorm as BatchNorm
from .layers._norms import LayerNorm as LayerNorm
from .layers._norms import RMSNorm as RMSNorm
from .layers._recurrent import GRUCell as GRUCell
from .layers._recurrent import LSTMCell as LSTMCell
from .walk._registry import Converter as Converter
from .walk._registry import register as register
from ._serialise import EqxFileMismatchError as EqxFileMismatchError
from ._serialise import tree_deserialise_leaves as tree_deserialise_leaves
from ._serialise import tree_serialise_leaves as tree_serialise_leaves
from .walk._registry import registered as registered
from .walk._registry import unregister as unregister
from .convert._shared import Select as Select
from .convert._shared import Shared as Shared
from .convert._shared import SharedRoot as SharedRoot
from .layers._stack_shape import stack_shape as stack_shape
from .walk._eqx_state import EqxState as EqxState
from .flax_nnx import FlaxModule as FlaxModule
from .flax_nnx import from_flax as from_flax
from .flax_nnx import to_flax as to_flax

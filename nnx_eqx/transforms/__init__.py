"""Lifted transforms: JAX transforms that accept Modules and propagate state.

Its rooms, lowest first, each importing only those before it: ``lifting/`` (the one
mechanism every lifted transform rests on), ``axes/`` and ``rngs/`` (axis
specifications; RNG splitting and rewriting) and ``lifted/`` (the transforms, one
file each). flax's ``graph=`` keywords (``_graph_keywords``) and flax's module paths
(``autodiff``, ``compilation``, ``general``, ``iteration``, ``transforms``) sit on top.
"""

from .lifted._autodiff import grad as grad
from .lifted._autodiff import value_and_grad as value_and_grad
from .axes._specs import Carry as Carry
from .axes._specs import StateAxes as StateAxes
from .lifted._control import cond as cond
from .lifted._custom_vjp import CustomVjpError as CustomVjpError
from .lifted._custom_vjp import custom_vjp as custom_vjp
from .lifted._control import fori_loop as fori_loop
from .lifted._control import switch as switch
from .lifted._control import while_loop as while_loop
from .lifting._dispatch import KeywordArgumentError as KeywordArgumentError
from ._errors import AxisRankError as AxisRankError
from ._errors import AxisSizeError as AxisSizeError
from ._errors import AxisSpecError as AxisSpecError
from ._errors import BoundMethodError as BoundMethodError
from ._errors import BroadcastUpdateError as BroadcastUpdateError
from ._errors import CapturedNodeError as CapturedNodeError
from ._errors import CarryIdentityError as CarryIdentityError
from ._errors import CarryMismatchError as CarryMismatchError
from ._errors import InconsistentAliasingError as InconsistentAliasingError
from ._errors import LiftedStructureError as LiftedStructureError
from ._errors import ScanLengthError as ScanLengthError
from ._errors import UnsupportedModeError as UnsupportedModeError
from .lifted._eval_shape import eval_shape as eval_shape
from .lifted._jit import CompiledStructureError as CompiledStructureError
from .lifted._jit import jit as jit
from .lifted._jit import jit_partial as jit_partial
from .lifted._pmap import pmap as pmap
from .lifted._remat import remat as remat
from .lifted._staging import checkify as checkify
from .lifted._staging import make_jaxpr as make_jaxpr
from .rngs._split import SplitBackups as SplitBackups
from .rngs._split import restore_rngs as restore_rngs
from .rngs._split import split_rngs as split_rngs
from .lifted._scan import scan as scan
from .lifted._shard_map import shard_map as shard_map
from .axes._shardings import StateSharding as StateSharding
from .lifted._vjp import TangentStructureError as TangentStructureError
from .lifted._vjp import jvp as jvp
from .lifted._vjp import vjp as vjp
from .lifted._vmap import vmap as vmap

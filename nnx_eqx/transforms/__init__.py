"""Lifted transforms: JAX transforms that accept Modules and propagate state."""

from ._autodiff import grad as grad
from ._autodiff import value_and_grad as value_and_grad
from ._axes import Carry as Carry
from ._axes import StateAxes as StateAxes
from ._control import cond as cond
from ._control import fori_loop as fori_loop
from ._control import switch as switch
from ._control import while_loop as while_loop
from ._dispatch import KeywordArgumentError as KeywordArgumentError
from ._errors import AxisRankError as AxisRankError
from ._errors import AxisSizeError as AxisSizeError
from ._errors import AxisSpecError as AxisSpecError
from ._errors import BroadcastUpdateError as BroadcastUpdateError
from ._errors import CarryMismatchError as CarryMismatchError
from ._errors import LiftedStructureError as LiftedStructureError
from ._errors import ScanLengthError as ScanLengthError
from ._eval_shape import eval_shape as eval_shape
from ._jit import jit as jit
from ._remat import remat as remat
from ._rng_split import SplitBackups as SplitBackups
from ._rng_split import restore_rngs as restore_rngs
from ._rng_split import split_rngs as split_rngs
from ._scan import scan as scan
from ._vmap import vmap as vmap

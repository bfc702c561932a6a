"""Public Variable namespace (flax's ``nnx.variablelib``): Variable types and defaults."""

from .graph._var_defaults import VarDefaults as VarDefaults
from .graph._var_defaults import var_defaults as var_defaults
from .graph._variable_names import VariableTypeCache as VariableTypeCache
from .graph._variable_names import register_variable_name as register_variable_name
from .graph._variable_names import variable_name_from_type as variable_name_from_type
from .graph._variable_names import variable_type_from_name as variable_type_from_name
from .graph._variables import A as A
from .graph._variables import BatchStat as BatchStat
from .graph._variables import Cache as Cache
from .graph._variables import Intermediate as Intermediate
from .graph._variables import Param as Param
from .graph._variables import Perturbation as Perturbation
from .graph._variables import Variable as Variable
from .graph._variables import VariableMetadata as VariableMetadata
from .graph._variables import as_pure as as_pure
from .graph._variables import with_metadata as with_metadata
from .spmd import use_eager_sharding as use_eager_sharding
from .spmd import using_eager_sharding as using_eager_sharding

VariableState = Variable
"""flax 0.12 keeps ``VariableState`` as an alias of ``Variable``."""


class HijaxVariable(Variable):
  """The type flax 0.12 gives hijax Variables. nnx_eqx never creates hijax
  Variables (``hijax=True`` is accepted and ignored), so no Variable is an
  instance of this class; it exists so that ``isinstance`` checks written
  against flax run and answer correctly.

  Raises:
    TypeError: never raised by the class itself.

  Example:
    >>> import nnx_eqx as nnx
    >>> isinstance(nnx.Variable(1.0, hijax=True), nnx.variablelib.HijaxVariable)
    False
  """

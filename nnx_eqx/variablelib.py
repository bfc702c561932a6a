"""Public Variable namespace (flax's ``nnx.variablelib``): Variable types and defaults."""

from .graph._hijax import HijaxVariable as HijaxVariable
from .graph._hijax import to_hijax as to_hijax
from .graph._hijax import to_lojax as to_lojax
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

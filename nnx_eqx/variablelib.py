"""Public Variable namespace (flax's ``nnx.variablelib``): Variable types and defaults."""

from .graph.variables._defaults import VarDefaults as VarDefaults
from .graph.variables._defaults import var_defaults as var_defaults
from .graph.variables._hijax import HijaxVariable as HijaxVariable
from .graph.variables._hijax import to_hijax as to_hijax
from .graph.variables._hijax import to_lojax as to_lojax
from .graph.variables._names import VariableTypeCache as VariableTypeCache
from .graph.variables._names import register_variable_name as register_variable_name
from .graph.variables._names import variable_name_from_type as variable_name_from_type
from .graph.variables._names import variable_type_from_name as variable_type_from_name
from .graph.variables._variables import A as A
from .graph.variables._variables import BatchStat as BatchStat
from .graph.variables._variables import Cache as Cache
from .graph.variables._variables import Intermediate as Intermediate
from .graph.variables._variables import Param as Param
from .graph.variables._variables import Perturbation as Perturbation
from .graph.variables._variables import Variable as Variable
from .graph.variables._variables import VariableMetadata as VariableMetadata
from .graph.variables._variables import as_pure as as_pure
from .graph.variables._variables import with_metadata as with_metadata
from .spmd import use_eager_sharding as use_eager_sharding
from .spmd import using_eager_sharding as using_eager_sharding

VariableState = Variable
"""flax 0.12 keeps ``VariableState`` as an alias of ``Variable``."""

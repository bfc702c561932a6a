"""Modules: the ``Module`` base class, ``Rngs`` and the container Modules.

Builds on the graph engine (``nnx_eqx.graph``) only. Also the public
``nnx.module`` path of flax.nnx (``Module``, ``ModuleMeta``, ``first_from``,
``iter_module_children``, ``iter_modules``, ...).
"""

from ._capture import capture as capture
from ._containers import Dict as Dict
from ._containers import List as List
from ._containers import Map as Map
from ._containers import Sequence as Sequence
from ._containers import Sequential as Sequential
from ._module import Module as Module
from ._module import SowError as SowError
from ._module import iter_children as iter_children
from ._rngs import RngCount as RngCount
from ._rngs import RngKey as RngKey
from ._rngs import Rngs as Rngs
from ._rngs import RngState as RngState
from ._rngs import RngStream as RngStream
from ._views import view as view
from ._views import view_info as view_info
from ._views import with_attributes as with_attributes
from ._pytree import Data as Data
from ._pytree import Pytree as Pytree
from ._pytree import PytreeDataError as PytreeDataError
from ._pytree import data as data
from ._pytree import is_data as is_data
from ._pytree import register_data_type as register_data_type
from ._pytree import static as static
from ._views import with_vars as with_vars
from ._module import first_from as first_from
from ._module import iter_module_children as iter_module_children
from ._pytree import Object as Object
from ._pytree import ObjectMeta as ObjectMeta
from ._pytree import PytreeMeta as PytreeMeta
from ._pytree import PytreeMeta as ModuleMeta
from ._pytree import check_pytree as check_pytree
from ._pytree import has_data as has_data
from ..graph.api._functional import iter_graph as iter_graph
from ..graph.api._functional import iter_modules as iter_modules

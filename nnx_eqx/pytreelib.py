"""``nnx.pytreelib`` (flax.nnx's module path): ``Pytree``, ``Object`` and the
data/static markers.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from .module._pytree import DATA_TAG, STATIC_TAG
from .module._pytree import Object as Object
from .module._pytree import ObjectMeta as ObjectMeta
from .module._pytree import Pytree as Pytree
from .module._pytree import PytreeMeta as PytreeMeta
from .module._pytree import PytreeState as PytreeState
from .module._pytree import check_pytree as check_pytree
from .module._pytree import data as data
from .module._pytree import dataclass as dataclass
from .module._pytree import has_data as has_data
from .module._pytree import is_data as is_data
from .module._pytree import register_data_type as register_data_type
from .module._pytree import static as static

DataAnnotation = DATA_TAG
"""The ``Annotated`` tag of ``nnx.Data[...]``."""
StaticAnnotation = STATIC_TAG
"""The ``Annotated`` tag of ``nnx.Static[...]``."""

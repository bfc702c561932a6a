"""Seed-era API kept for compatibility (nnx 0.0.x names, re-exported by ``nnx_eqx``).

``Pure`` (what ``Module.partition`` returns), ``Pytree``/``TreeNode``,
``Node``/``Static``/``register_node_type``, ``nnx.dataclass`` and its field
helpers, ``TrainState``, and the ``Scan``/``Remat`` class wrappers. This package
builds on the library's layers and nothing in them imports it; where a core
entry point must hand over to a seed-era type (``Module.partition``,
``nnx.scan``/``nnx.remat`` on a Module class), it is registered below.
"""

from ..module._module import SEED_HOOKS as _MODULE_HOOKS
from ..transforms.lifting._seed_hooks import SEED_HOOKS as _TRANSFORM_HOOKS
from ._boxes import DataclassError as DataclassError
from ._dataclasses import dataclass as dataclass
from ._dataclasses import field as field
from ._dataclasses import node_field as node_field
from ._dataclasses import param_field as param_field
from ._dataclasses import static_field as static_field
from ._dataclasses import var_field as var_field
from ._node_containers import Node as Node
from ._node_containers import Static as Static
from ._node_containers import is_node_leaf as is_node_leaf
from ._node_containers import register_node_type as register_node_type
from ._pure import Pure as Pure
from ._pytree import Pytree as Pytree
from ._pytree import TreeNode as TreeNode
from ._pytree import UnknownFieldError as UnknownFieldError
from ._seed_scan import Scan as Scan
from ._seed_scan import ScanOptions as ScanOptions
from ._seed_scan import scan_apply as scan_apply
from ._seed_scan import scan_init as scan_init
from ._seed_scan import seed_scan as seed_scan
from ._train_state import TrainState as TrainState
from ._wrappers import Remat as Remat
from ._wrappers import RematOptions as RematOptions
from ._wrappers import remat_apply as remat_apply

_MODULE_HOOKS["pure"] = Pure
_TRANSFORM_HOOKS.update(scan=seed_scan, remat=Remat)

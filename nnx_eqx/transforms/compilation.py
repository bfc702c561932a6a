"""``nnx.transforms.compilation`` (flax.nnx's module path): ``jit``, ``jit_partial``,
``shard_map`` and ``StateSharding``.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from ._graph_keywords import jit as jit
from ._graph_keywords import jit_partial as jit_partial
from ._graph_keywords import shard_map as shard_map
from .axes._shardings import StateSharding as StateSharding
from .lifted._jit import JitWrapped as JitWrapped

"""``nnx.transforms.transforms`` (flax.nnx's module path): ``cond``, ``switch``,
``eval_shape``, ``checkify``, ``make_jaxpr`` and ``resolve_kwargs``.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from ._graph_keywords import checkify as checkify
from ._graph_keywords import cond as cond
from ._graph_keywords import eval_shape as eval_shape
from ._graph_keywords import switch as switch
from ._staging import make_jaxpr as make_jaxpr
from .general import resolve_kwargs as resolve_kwargs

"""``nnx.transforms.autodiff`` (flax.nnx's module path): differentiation transforms.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from ..graph.state._diff_state import DiffState as DiffState
from ._graph_keywords import grad as grad
from ._graph_keywords import jvp as jvp
from ._graph_keywords import remat as remat
from ._graph_keywords import value_and_grad as value_and_grad
from ._graph_keywords import vjp as vjp
from .lifted._custom_vjp import custom_vjp as custom_vjp

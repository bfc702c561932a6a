"""``nnx.compat``: the graph API and transforms with graph-mode defaults.

flax.nnx 0.12 keeps its graph-mode implementations here (``graph=True``,
``graph_updates=True`` by default). nnx_eqx is always in graph mode, so these
are the same functions as the top-level ones.
"""

from .graph.api._cached_partial import cached_partial as cached_partial
from .graphlib import flatten as flatten
from .module import iter_children as iter_children
from .module import view as view
from .module import view_info as view_info
from .spmd import get_abstract_model as get_abstract_model
from .transforms._graph_keywords import checkify as checkify
from .transforms._graph_keywords import clone as clone
from .transforms._graph_keywords import cond as cond
from .transforms._graph_keywords import eval_shape as eval_shape
from .transforms._graph_keywords import fori_loop as fori_loop
from .transforms._graph_keywords import grad as grad
from .transforms._graph_keywords import graphdef as graphdef
from .transforms._graph_keywords import iter_graph as iter_graph
from .transforms._graph_keywords import iter_modules as iter_modules
from .transforms._graph_keywords import jit as jit
from .transforms._graph_keywords import jvp as jvp
from .transforms._graph_keywords import pmap as pmap
from .transforms._graph_keywords import remat as remat
from .transforms._graph_keywords import scan as scan
from .transforms._graph_keywords import shard_map as shard_map
from .transforms._graph_keywords import split as split
from .transforms._graph_keywords import state as state
from .transforms._graph_keywords import switch as switch
from .transforms._graph_keywords import value_and_grad as value_and_grad
from .transforms._graph_keywords import vjp as vjp
from .transforms._graph_keywords import vmap as vmap
from .transforms._graph_keywords import while_loop as while_loop
from .transforms.lifted._custom_vjp import custom_vjp as custom_vjp
from .transforms.rngs._split import backup_keys as backup_keys
from .transforms.rngs._tools import fork_rngs as fork_rngs
from .transforms.rngs._tools import recursive_map as recursive_map
from .transforms.rngs._tools import reseed as reseed
from .transforms.rngs._tools import split_rngs as split_rngs

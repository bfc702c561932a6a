"""``nnx.compat``: the graph API and transforms with graph-mode defaults.

flax.nnx 0.12 keeps its graph-mode implementations here (``graph=True``,
``graph_updates=True`` by default). nnx_eqx is always in graph mode, so these
are the same functions as the top-level ones.
"""

from ._graph_keywords import clone as clone
from ._graph_keywords import cond as cond
from ._graph_keywords import eval_shape as eval_shape
from ._graph_keywords import fori_loop as fori_loop
from ._graph_keywords import grad as grad
from ._graph_keywords import graphdef as graphdef
from ._graph_keywords import iter_graph as iter_graph
from ._graph_keywords import iter_modules as iter_modules
from ._graph_keywords import jit as jit
from ._graph_keywords import remat as remat
from ._graph_keywords import scan as scan
from ._graph_keywords import split as split
from ._graph_keywords import state as state
from ._graph_keywords import switch as switch
from ._graph_keywords import value_and_grad as value_and_grad
from ._graph_keywords import vmap as vmap
from ._graph_keywords import while_loop as while_loop
from ._rng_tools import fork_rngs as fork_rngs
from ._rng_tools import recursive_map as recursive_map
from ._rng_tools import reseed as reseed
from ._rng_tools import split_rngs as split_rngs

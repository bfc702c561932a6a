"""``nnx.transforms.iteration`` (flax.nnx's module path): the mapping and looping
transforms, their axis markers and ``transform_metadata``.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from ._graph_keywords import fori_loop as fori_loop
from ._graph_keywords import pmap as pmap
from ._graph_keywords import scan as scan
from ._graph_keywords import vmap as vmap
from ._graph_keywords import while_loop as while_loop
from .axes._specs import Carry as Carry
from .axes._specs import StateAxes as StateAxes
from .lifted._transform_metadata import transform_metadata as transform_metadata

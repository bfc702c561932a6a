"""Testing utilities shipped for users: hypothesis strategies and helpers.

Strategies need ``hypothesis`` (the ``test`` extra).
"""

from ._helpers import TraceCounter as TraceCounter
from ._helpers import assert_no_retrace as assert_no_retrace
from ._helpers import hlo_equal as hlo_equal
from ._helpers import stablehlo_text as stablehlo_text
from ._helpers import tree_allclose as tree_allclose
from ._tolerance import REDUCED_PRECISION_TOLERANCES as REDUCED_PRECISION_TOLERANCES
from ._tolerance import TOLERANCES as TOLERANCES
from ._tolerance import assert_trees_close as assert_trees_close
from ._tolerance import assert_trees_equal as assert_trees_equal
from ._tolerance import matmul_precision as matmul_precision
from ._tolerance import tolerance as tolerance

# --- graph strategies (random NNX module graphs) ---
from ._graphs import VARIABLE_TYPES as VARIABLE_TYPES
from ._graphs import all_paths as all_paths
from ._graphs import arrays as arrays
from ._graphs import graphs as graphs
from ._graphs import same_graph as same_graph
from ._graphs import sharing_classes as sharing_classes
# --- end graph strategies ---

# --- equinox strategies (random Equinox models) ---
from ._eqx import EQX_ARCHITECTURES as EQX_ARCHITECTURES
from ._eqx import EqxCase as EqxCase
from ._eqx import eqx_inputs as eqx_inputs
from ._eqx import eqx_models as eqx_models
from ._programs import assert_same_program as assert_same_program
# --- end equinox strategies ---

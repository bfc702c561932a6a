"""Testing utilities shipped for users: comparisons, retrace checks and hypothesis strategies.

The comparison and retrace functions need only nnx_eqx's own dependencies. The
hypothesis strategies (``arrays``, ``graphs``, ``eqx_models``, ``eqx_inputs``)
need hypothesis, from the ``testing`` extra (``pip install 'nnx_eqx[testing]'``);
without it, importing one of them raises an ImportError that says so.
"""

import importlib as _importlib
import importlib.util as _importlib_util
from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._extras import require as _require

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
from ._programs import assert_same_program as assert_same_program

# --- graph comparisons (random NNX module graphs: the strategies below) ---
from ._graphs import VARIABLE_TYPES as VARIABLE_TYPES
from ._graphs import all_paths as all_paths
from ._graphs import same_graph as same_graph
from ._graphs import sharing_classes as sharing_classes
# --- end graph comparisons ---

# --- Equinox model cases (random Equinox models: the strategies below) ---
from ._eqx import EQX_ARCHITECTURES as EQX_ARCHITECTURES
from ._eqx import EqxCase as EqxCase
# --- end Equinox model cases ---

# --- hypothesis strategies: imported on first use, as they need hypothesis ---
_STRATEGIES = {
  "arrays": "._graph_strategies",
  "graphs": "._graph_strategies",
  "eqx_models": "._eqx_strategies",
  "eqx_inputs": "._eqx_strategies",
}

if _TYPE_CHECKING:
  from ._eqx_strategies import eqx_inputs as eqx_inputs
  from ._eqx_strategies import eqx_models as eqx_models
  from ._graph_strategies import arrays as arrays
  from ._graph_strategies import graphs as graphs


def __getattr__(name: str):
  if name not in _STRATEGIES:
    raise AttributeError(f"module 'nnx_eqx.testing' has no attribute {name!r}")
  _require("hypothesis", f"nnx_eqx.testing.{name} (a hypothesis strategy)")
  value = getattr(_importlib.import_module(_STRATEGIES[name], __name__), name)
  globals()[name] = value
  return value


def __dir__() -> list[str]:
  # the strategies only where they can be imported, so that tools which read every
  # name dir() lists (help(), inspect.getmembers) work without hypothesis too
  try:
    importable = _importlib_util.find_spec("hypothesis") is not None
  except ImportError:  # a finder that refuses it
    importable = False
  return sorted({*globals(), *(_STRATEGIES if importable else ())})


# --- end hypothesis strategies ---

"""``nnx.summary`` (flax.nnx's module path): ``tabulate`` and ``in_ipython``.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from .training._summary import tabulate as tabulate
from .visualization import in_ipython as in_ipython

"""``nnx.visualization`` (flax.nnx's module path): ``display``.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from .graph._repr import display as display

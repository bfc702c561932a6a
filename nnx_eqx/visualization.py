"""``nnx.visualization`` (flax.nnx's module path): ``display`` and ``in_ipython``.

Mostly a re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

import sys

from .graph.api._repr import display as display


def in_ipython() -> bool:
  """Whether the code runs inside IPython or Jupyter (as flax.nnx's ``in_ipython``).

  Returns:
    True when IPython is installed and a shell is active.

  Raises:
    Nothing: outside IPython (or without it installed) the answer is False.

  Example:
    >>> from nnx_eqx.visualization import in_ipython
    >>> in_ipython()
    False
  """
  ipython = sys.modules.get("IPython")  # a running IPython has imported itself
  return ipython is not None and ipython.get_ipython() is not None

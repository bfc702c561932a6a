"""``nnx.helpers`` (flax.nnx's module path): the container Modules, ``TrainState`` and
``has_keyword_arg``.

Mostly a re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

import inspect
from collections.abc import Callable
from typing import Any

from .legacy import TrainState as TrainState
from .module._containers import Dict as Dict
from .module._containers import List as List
from .module._containers import Sequential as Sequential


def has_keyword_arg(func: Callable[..., Any], name: str) -> bool:
  """True if ``func`` can be called with the keyword argument ``name`` (as flax.nnx).

  Args:
    func: any callable with an inspectable signature.
    name: the keyword.

  Returns:
    Whether a parameter ``name`` can be passed by keyword.

  Raises:
    ValueError: if ``func``'s signature cannot be inspected.

  Example:
    >>> from nnx_eqx.helpers import has_keyword_arg
    >>> has_keyword_arg(lambda x, *, train=False: x, "train"), has_keyword_arg(abs, "train")
    (True, False)
  """
  kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
  return any(
    p.name == name and p.kind in kinds for p in inspect.signature(func).parameters.values()
  )

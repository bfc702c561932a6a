"""Where :func:`nnx.capture` keeps what ``Module.sow``/``perturb`` record.

While a captured call runs, every Module reachable from its root holds a data
attribute (``CAPTURES``): a tuple with one Variable per captured type, each
holding a dict ``{name: value}``. Being ordinary graph state, the slots travel
through the lifted transforms (jit, grad, vmap, scan) like any Variable.
"""

from __future__ import annotations

from typing import Any

CAPTURES = "__captures__"


def capture_slot(module: Any, variable_type: type) -> Any:
  """The capture Variable of exactly ``variable_type`` on ``module``, or None."""
  for slot in module.__dict__.get(CAPTURES, ()):
    if type(slot) is variable_type:
      return slot
  return None

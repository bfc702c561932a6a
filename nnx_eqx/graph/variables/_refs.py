"""``Ref``: the class to test ``jax.Ref`` values with, traced ones included.

From jax 0.8 on, ``isinstance(x, jax.Ref)`` is also true of a Ref being traced
(a tracer whose abstract value is an ``AbstractRef``); jax 0.7 answers False
there. This module gives the newer answer on every supported jax.
"""

from __future__ import annotations

from typing import Any

import jax

if type(jax.Ref) is not type:  # jax >= 0.8: its metaclass knows traced Refs
  Ref: Any = jax.Ref
else:  # pragma: no cover (jax 0.7; tested by CI on the lowest declared versions)
  from jax._src.state.types import AbstractRef as _AbstractRef

  _Tracer = jax.core.Tracer
  _JaxRef = jax.Ref

  class _RefMeta(type):
    def __instancecheck__(cls, inst: Any) -> bool:
      return isinstance(inst, _JaxRef) or (
        isinstance(inst, _Tracer) and isinstance(inst.aval, _AbstractRef)
      )

  class Ref(metaclass=_RefMeta):  # type: ignore[no-redef]
    """``isinstance(x, Ref)``: ``x`` is a ``jax.Ref``, or a Ref being traced."""

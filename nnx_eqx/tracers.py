"""``nnx.tracers`` (flax.nnx's module path): which JAX trace an object belongs to.

``TraceState()`` records the JAX trace current when it is created; ``is_valid()``
says whether that trace is still the current one. nnx_eqx's Modules and Variables
use the same check to refuse mutation from inside a foreign ``jax.jit`` / ``jax.grad``
(``nnx.errors.TraceContextError``), as flax.nnx does.
"""

from __future__ import annotations

from collections import abc
from typing import Any

import jax

from . import reprlib
from .graph.tracing import _traces as _tracing


def current_jax_trace() -> Any:
  """An opaque token of the current JAX trace, comparable with ``==``.

  Returns:
    The token (same convention as nnx_eqx's own trace checks).

  Raises:
    Nothing.

  Example:
    >>> import jax
    >>> from nnx_eqx.tracers import current_jax_trace
    >>> outside, inside = current_jax_trace(), []
    >>> _ = jax.jit(lambda: inside.append(current_jax_trace() == outside))()
    >>> inside
    [False]
  """
  return _tracing.current_trace()


class TraceState(reprlib.Representable):
  """The JAX trace current when this object was made.

  A pytree without leaves: rebuilt (for example by a transform) it records the trace
  current at that point. Pickling and copying likewise record the loading trace.
  Compared with ``==``; not hashable (JAX's trace tokens are not), as in flax.nnx.

  Raises:
    Nothing.

  Example:
    >>> import jax
    >>> from nnx_eqx.tracers import TraceState
    >>> state = TraceState()
    >>> inside = []
    >>> _ = jax.jit(lambda: inside.append((state.is_valid(), TraceState() == state)))()
    >>> state.is_valid(), inside
    (True, [(False, False)])
  """

  __slots__ = ("_jax_trace",)

  def __init__(self) -> None:
    self._jax_trace = _tracing.current_trace()

  @property
  def jax_trace(self) -> Any:
    """The recorded trace token."""
    return self._jax_trace

  def is_valid(self) -> bool:
    """Whether the recorded trace is the current one."""
    return self._jax_trace == _tracing.current_trace()

  def __nnx_repr__(self) -> abc.Iterator[reprlib.Object | reprlib.Attr]:
    yield reprlib.Object(type(self).__name__)
    yield reprlib.Attr("jax_trace", self._jax_trace)

  def __eq__(self, other: object) -> bool:
    return isinstance(other, TraceState) and self._jax_trace == other._jax_trace

  def __getstate__(self) -> dict:
    return {}

  def __setstate__(self, state: dict) -> None:
    self._jax_trace = _tracing.current_trace()


jax.tree_util.register_pytree_node(TraceState, lambda _: ((), None), lambda _a, _c: TraceState())

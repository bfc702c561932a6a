"""Which JAX trace is current; used to refuse mutation across trace levels."""

from __future__ import annotations

import copyreg

from jax.extend.core import get_opaque_trace_state as _get_state

from ._errors import TraceContextError

try:  # the fast path: the token of the current trace is reused while that trace is current
  from jax._src.core import trace_ctx as _CTX

  _CTX.trace._weakref  # noqa: B018  (the attribute the token is made of)
except (ImportError, AttributeError):  # another jax: every call asks jax (tested in test_tracing)
  _CTX = None  # type: ignore[assignment]

_LAST: list = [None, None]  # (weak reference to the last trace seen, its token)


def current_trace():
  """Returns an opaque token of the current JAX trace, comparable with ``==``.

  Pytree unflattening makes one per Module and Variable, so the token of the
  current trace is kept and reused while that trace stays current.
  """
  if _CTX is None:
    return _get_state(convention="flax")
  ref = _CTX.trace._weakref
  if ref is _LAST[0]:
    return _LAST[1]
  token = _get_state(convention="flax")
  _LAST[0], _LAST[1] = ref, token
  return token


def _reduce_trace(token):
  """A trace token pickles (and deep-copies) as "the trace current when loaded":
  the JAX trace it named cannot outlive its process, and a loaded object belongs
  to the trace that loads it. This is what lets Modules, Variables, States and
  every other object holding a token pickle without a per-class hook."""
  return current_trace, ()


copyreg.pickle(type(current_trace()), _reduce_trace)


def check_trace(owner_trace, what: str, detail: str = "") -> None:
  """Raises ``TraceContextError`` if ``owner_trace`` is not the current trace.

  Args:
    owner_trace: the token recorded when the object was created.
    what: the object for the message, e.g. ``"'Dict'"``.
    detail: what was being changed, e.g. ``"attribute 'a'"`` (optional).

  The wording follows flax.nnx: a Variable "from a different trace level", a
  Module (named with ``detail``) "from different trace level (attribute ...)".
  """
  if owner_trace != _get_state(convention="flax"):
    raise TraceContextError(
      f"Cannot mutate {what} from {'' if detail else 'a '}different trace level"
      f"{f' ({detail})' if detail else ''}:"
      " it was created in a"
      " different JAX trace than the current one (for example outside a `jax.jit`, `jax.grad` or"
      " `jax.lax.scan` that is now tracing). Fix: use the lifted transforms"
      " (`nnx.jit`, `nnx.grad`, `nnx.scan`, ...) which propagate updates, or"
      " `nnx.split` the module before the transform and `nnx.merge` it inside."
    )

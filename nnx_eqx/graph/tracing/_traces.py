"""Which JAX trace is current; used to refuse mutation across trace levels."""

from __future__ import annotations

import copyreg
import functools
from typing import Any

try:  # jax >= 0.10 exports it from jax.extend.core ...
  from jax.extend.core import get_opaque_trace_state as _get_state
except ImportError:  # ... older jax from jax.core
  from jax.core import get_opaque_trace_state as _get_state  # type: ignore[attr-defined,no-redef]

from .._errors import TraceContextError

try:  # the fast path: the token of the current trace is reused while that trace is current
  from jax._src.core import trace_ctx as _CTX

  _CTX.trace._weakref  # noqa: B018  (the attribute the token is made of)
except (ImportError, AttributeError):  # another jax: every call asks jax (tested in test_tracing)
  _CTX = None  # type: ignore[assignment]

try:
  from jax._src.core import EvalTrace as _EvalTrace
except ImportError:  # another jax: compared by token below
  _EvalTrace = None  # type: ignore[assignment,misc]


class _RefFromContext:
  """``.value``: the weak reference JAX keeps to the current trace, read from
  ``trace_ctx`` (jax releases without the ``trace_state`` config)."""

  __slots__ = ()

  @property
  def value(self):
    return _CTX.trace._weakref


class _NoRef:
  """``.value``: a new object every time (another jax: the current trace has no
  cheap identity, so every token is asked of jax)."""

  __slots__ = ()

  @property
  def value(self):
    return object()


try:  # a C++ config holding a weak reference to the current trace: ~20 ns a read
  from jax._src.core import trace_state as TRACE_REF

  if _CTX is None or TRACE_REF.value() is not _CTX.trace:
    raise ImportError
except ImportError:
  TRACE_REF = _RefFromContext() if _CTX is not None else _NoRef()  # type: ignore[assignment]


def reader(ref: Any) -> Any:
  """The no-argument function hot paths call to read ``ref`` (``TRACE_REF`` or a
  stand-in with a ``.value``): an identity of the current trace, compared with
  ``CURRENT[0][0]`` before asking ``entry``. Where the config has one, it is
  this thread's own value (about 10 ns cheaper than ``.value``): JAX sets it
  whenever a trace starts or ends, and until the thread first traces it is
  ``unset`` (another object, naming the top level as well; see test_tracing)."""
  return getattr(ref, "get_local", None) or functools.partial(getattr, ref, "value")


READ_REF = reader(TRACE_REF)

CURRENT: list = [(None, None, False)]
"""``[(ref, token, in a transform)]`` of the trace :func:`entry` saw last."""


def entry(ref) -> tuple:
  """``(ref, token, in a transform)`` of the current trace, ``ref`` being a
  ``READ_REF()`` read now; kept as ``CURRENT[0]`` while that trace is current."""
  e = CURRENT[0]
  if e[0] is ref:
    return e
  e = (ref, _get_state(convention="flax"), in_transform())
  CURRENT[0] = e
  return e


def current_trace():
  """Returns an opaque token of the current JAX trace, comparable with ``==``.

  Pytree unflattening makes one per Module and Variable, so the token of the
  current trace is kept and reused while that trace stays current.
  """
  return entry(READ_REF())[1]


_TOP = _get_state(convention="flax")  # the token of the top level (imports run there)


def in_transform() -> bool:
  """Whether a JAX transformation is tracing (the current trace is not the
  top-level evaluation): objects made now are copies inside that trace."""
  if _CTX is not None and _EvalTrace is not None:
    return type(_CTX.trace) is not _EvalTrace
  return _get_state(convention="flax") != _TOP


def current_trace_object():
  """The current JAX trace object itself, or None where jax does not expose it."""
  return None if _CTX is None else _CTX.trace


def live_traces() -> set[int] | None:
  """The ids of the current trace and of the traces it is nested in (every
  trace that is still being traced), or None where that cannot be told (another
  jax, or a trace that does not name its parent)."""
  if _CTX is None or _EvalTrace is None:
    return None
  live = set()
  t = _CTX.trace
  while not isinstance(t, _EvalTrace):
    live.add(id(t))
    t = getattr(t, "parent_trace", None)
    if t is None:
      return None
  live.add(id(t))
  return live


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
      " `jax.lax.scan` that is now tracing)."
      f"{lifted_hint()} Fix: use the lifted transforms"
      " (`nnx.jit`, `nnx.grad`, `nnx.scan`, ...) which propagate updates, or"
      " `nnx.split` the module before the transform and `nnx.merge` it inside."
    )


try:  # JAX's trace classes, for lifted_hint (private: another jax may lack them)
  from jax._src.interpreters import ad as _ad
  from jax._src.interpreters import batching as _batching
  from jax._src.interpreters import partial_eval as _pe
except ImportError:
  _ad = _batching = _pe = None  # type: ignore[assignment]


def _trace_types() -> dict:
  """``JAX's trace class -> the transformation it traces``, for the classes this
  jax has (told by identity: a trace of another class gets no hint)."""
  found: dict = {}
  for module, name, kind in (
    (_batching, "BatchTrace", "vmap"),  # jax.vmap / eqx.filter_vmap
    (_ad, "JVPTrace", "grad"),  # jax.grad / jax.jvp
    (_ad, "LinearizeTrace", "grad"),
    (_pe, "DynamicJaxprTrace", "jit"),  # jax.jit, lax control flow, jax.checkpoint
  ):
    cls = getattr(module, name, None)
    if isinstance(cls, type):
      found[cls] = kind
  return found


_TRACE_TYPES = _trace_types()


def lifted_hint() -> str:
  """The lifted-transform call that replaces the plain JAX transformation now
  tracing, as a sentence (empty where it cannot be told)."""
  t = current_trace_object()
  kind = _TRACE_TYPES.get(type(t))
  if kind == "vmap":
    axis = getattr(getattr(t, "axis_data", None), "name", None)
    named = f", axis_name={axis!r}" if isinstance(axis, str) else ""
    return (
      " Under jax.vmap, map the call with nnx.vmap, which writes the state back; for one"
      " module shared by the batch (Equinox's `jax.vmap(model, in_axes=(0, None),"
      " out_axes=(0, None))` idiom): `y = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0)"
      f"{named})(model, x)`."
    )
  if kind == "grad":
    return (
      " Under jax.grad, differentiate with nnx.grad, which writes the state back:"
      " `grads = nnx.grad(lambda m, x: loss(m(x)))(model, x)`."
    )
  if kind == "jit":
    return (
      " Under jax.jit, compile with nnx.jit, which writes the state back:"
      " `y = nnx.jit(lambda m, x: m(x))(model, x)`."
    )
  return ""

"""Refusing state updates that a JAX transformation would drop.

JAX's transformations (``jax.jit``, ``jax.grad``, ``jax.vmap``, ``jax.checkpoint``
and Equinox's ``filter_*`` wrappers over them) see a Module through its pytree
view: inside the trace they work on a *copy*, rebuilt by pytree unflattening,
whose Variables hold tracers. A layer that updates its state while running
(``BatchNorm`` statistics, the count of an RNG stream) updates the copy. The
update reaches the caller only if the copy leaves the trace again: returned from
the function, passed on as a ``lax.scan`` carry, or read out with
``nnx.state``/``nnx.split`` and returned. Otherwise it is dropped with the copy.

This module makes the drop loud. A Variable rebuilt while a transformation is
tracing is marked as such a copy; a write to it (``.value = ...``, ``nnx.update``)
is recorded as *pending*, with the trace it was made in; flattening the Variable
again (JAX's flatten, or a graph walk) means the value is carried on and clears
the record. Once that trace has ended (it is neither the current trace nor one
the current trace is nested in), a write still pending was dropped: the next
graph walk or pytree flatten raises :class:`LostUpdateError` naming the
Variable, where it was written and the fixes. (Writes under ``jax.eval_shape`` /
``eqx.filter_eval_shape`` are exempt: shape evaluation discards all values. So are
writes made before an error that an interactive session reported, which sets
``sys.last_value``: they belong to the call that failed.)

Nothing here costs anything while no copy has been written: the hot paths test
one module-level dict for emptiness.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from . import _version
from ._errors import LostUpdateError
from ._tracing import current_trace_object, in_transform, live_traces

COPY_MARK = "_nnx_copy"
"""Key in a Variable's ``__dict__``: it was rebuilt from a tracer by pytree unflattening."""

PENDING: dict[int, tuple[Any, str, Any]] = {}
"""``id(copy) -> (weak reference to its trace, description, sys.last_value then)``
of written copies."""

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
_WRAPPERS = ("jaxtyping", "beartype", "typeguard")  # call wrappers: not where a write is made
_SHAPE_EVALUATORS = frozenset({"eval_shape", "filter_eval_shape"})


def _under_shape_evaluation(frame: Any) -> bool:
  while frame is not None:
    code = frame.f_code
    if code.co_name in _SHAPE_EVALUATORS and "nnx_eqx" not in code.co_filename:
      return True
    frame = frame.f_back
  return False


def _name_in(obj: Any, var: Any, depth: int) -> str | None:
  """``attr`` or ``attr.sub`` where ``obj``'s attributes hold ``var``."""
  d = getattr(obj, "__dict__", None)
  if not isinstance(d, dict):
    return None
  for k, v in d.items():
    if v is var:
      return str(k)
  if depth:
    for k, v in d.items():
      if hasattr(v, "__dict__") and not isinstance(v, type):
        sub = _name_in(v, var, depth - 1)
        if sub is not None:
          return f"{k}.{sub}"
  return None


def _describe(var: Any, frame: Any) -> str:
  """The Variable's class, shape, the attribute of the object that owns it and
  the first place outside this package that led to the write."""
  what = type(var).__name__
  shape = getattr(var.__dict__.get("_value"), "shape", None)
  owner = site = None
  f, seen = frame, 0
  while f is not None and seen < 64:  # the outermost ``self`` that holds it names it best
    obj = f.f_locals.get("self")
    if obj is not None and obj is not var:
      name = _name_in(obj, var, 2)
      if name is not None:
        owner = f"{type(obj).__name__}.{name}"
    file = f.f_code.co_filename
    if site is None and not file.startswith(_HERE) and not any(w in file for w in _WRAPPERS):
      site = f"{file}:{f.f_lineno}"
    f, seen = f.f_back, seen + 1
  text = f"{what}{'' if shape is None else f' of shape {tuple(shape)}'}"
  if owner is not None:
    text += f" at `{owner}`"
  if site is not None:
    text += f" (written from {site})"
  return text


def note_write(var: Any) -> None:
  """Records a write to ``var``, a copy rebuilt inside a JAX trace."""
  key = id(var)
  if key in PENDING:
    return
  frame = sys._getframe(2)
  if _under_shape_evaluation(frame):
    return
  trace = current_trace_object()
  PENDING[key] = (
    None if trace is None else weakref.ref(trace),
    _describe(var, frame),
    getattr(sys, "last_value", None),
  )


def carried(variables: Any) -> None:
  """The values of ``variables`` are read out (flattened or walked): their
  pending writes travel on with them."""
  for v in variables:
    PENDING.pop(id(v), None)


def reset() -> None:
  """Forgets every pending write."""
  PENDING.clear()


def _sweep() -> list[str]:
  """Removes the pending writes whose trace has ended; returns the descriptions
  of those that were dropped."""
  live = live_traces()
  if live is None:  # cannot tell which traces are still running: only the top level can
    if in_transform():
      return []
    live = set()
  last = getattr(sys, "last_value", None)
  lost = []
  for key, (trace_ref, what, last_then) in list(PENDING.items()):
    trace = None if trace_ref is None else trace_ref()
    if trace is None or id(trace) not in live:
      del PENDING[key]
      if last is last_then:  # (else an interactive session showed an error since:
        lost.append(what)  # the write belongs to the call that failed)
  return lost


def check() -> None:
  """Raises :class:`LostUpdateError` for updates dropped since the last check.

  While that error is being handled (JAX's ``tree_map`` catches what a flatten
  raises and flattens again to describe the failure), it is raised again, so it
  is what reaches the caller."""
  lost = _sweep() if PENDING else []
  if not lost:
    exc = sys.exc_info()[1]
    if isinstance(exc, LostUpdateError):
      raise exc
    return
  _version.bump()  # (records stale: a flatten while this is handled comes back here)
  listing = "\n".join(f"  - {d}" for d in lost)
  raise LostUpdateError(
    f"{len(lost)} state update(s) made inside a JAX transformation were dropped:\n"
    f"{listing}\n"
    "The transformation (jax.jit, jax.grad, jax.vmap, jax.checkpoint, or Equinox's"
    " filter_jit, filter_grad, filter_value_and_grad, filter_vmap, filter_checkpoint)"
    " ran the module on a copy rebuilt from its pytree, updated the copy, and discarded"
    " it. Fix, one of:\n"
    "  1. use NNX's transforms (nnx.jit, nnx.value_and_grad, nnx.vmap, nnx.remat), which"
    " write updates back to the module;\n"
    "  2. carry the state out, as Equinox threads eqx.nn.State: return"
    " `nnx.state(model, nnx.Not(nnx.Param))` from the function (as aux with"
    " has_aux=True) and apply it with `nnx.update(model, state)`, or return the module"
    " itself;\n"
    "  3. keep such state in jax.Refs, which JAX's transforms update in place:"
    " `model = nnx.with_vars(model, ref=True, only=nnx.Not(nnx.Param))` (each jitted"
    " call then costs some 40-50 us more);\n"
    "  4. if the update is not wanted (evaluation), switch the layers off first:"
    " `model.eval()` or `eqx.nn.inference_mode(model)`.\n"
    "If the transformation raised an exception before, these are the updates of that"
    " failed call and nothing more is wrong."
  )

"""Reporting state updates that a JAX transformation dropped, where the stale
object is used again.

JAX's transformations (``jax.jit``, ``jax.grad``, ``jax.vmap``, ``jax.checkpoint``
and Equinox's ``filter_*`` wrappers over them) see a Module through its pytree
view: inside the trace they work on a *copy*, rebuilt by pytree unflattening,
whose Variables hold tracers. A layer that updates its state while running
(``BatchNorm`` statistics, the count of an RNG stream) updates the copy. The
update reaches the caller only if the copy leaves the trace again: returned from
the function, passed on as a ``lax.scan`` carry, or read out with
``nnx.state``/``nnx.split`` and returned. Otherwise it is dropped with the copy,
and the *original* -- the caller's Variable the copy was rebuilt from -- still
holds the value from before the call.

This module makes the drop loud, on that original only:

1. *Links.* The first time a Module's node definition is rebuilt in a new trace
   (``_pytree_build.rebase``), the rebuilt Variables (copies) are linked to the
   Variables of the node last flattened with that definition -- the one JAX
   flattened to start the trace (``NodeDef.last``). The link is keyed by the
   copy's tracer, so copies rebuilt again from the same tracers inside the
   trace (Equinox's ``combine``) find it too.
2. *Pending writes.* A write to a copy (``.value = ...``, ``nnx.update``) is
   recorded as pending, with its trace and its link; flattening the copy again
   (JAX's flatten, a graph walk) means the value is carried on and clears it.
3. *Stale values.* Once that trace has ended (it is neither the current trace
   nor one it is nested in), a write still pending was dropped: the value the
   original held when the trace started is marked *stale* (by identity; the
   mark goes when that value is freed). Where the original is itself a copy in
   a trace still running (nested transforms), its own write is recorded as
   pending instead, and the drop travels outwards.
4. *Reports.* Reading or writing a stale value through a Variable, flattening
   that Variable, or walking a graph that holds it raises
   :class:`LostUpdateError`, naming the Variable, where it was written and the
   fixes. An update dropped on an object nobody holds any more (a temporary
   ``rngs.fork()`` passed to ``jax.vmap``) leaves nothing to report; other
   objects are never concerned. :func:`clear_lost_updates` accepts the values
   from before the call.

Writes under ``jax.eval_shape`` / ``eqx.filter_eval_shape`` are exempt (shape
evaluation discards all values), and so are writes made before an error that an
interactive session reported (``sys.last_value``): they belong to the call that
failed. A copy whose original cannot be told (a Variable passed to a transform
on its own, outside any Module) is not linked: its drop is not reported. Two
nodes that share one definition (one rebuilt from the other's pytree, as
``jax.tree.map`` does) passed to the same transformation are told apart only by
the order of flattening: the first copy rebuilt is linked to the node flattened
last.

Nothing here costs more than one test of two module-level dicts for emptiness
while no copy has been written and no value is stale.
"""

from __future__ import annotations

import os
import pathlib
import sys
import weakref
from typing import Any

import jax

from .._errors import LostUpdateError
from ._traces import current_trace_object, in_transform, live_traces

COPY_MARK = "_nnx_copy"
"""Key in a Variable's ``__dict__``: it was rebuilt from a tracer by pytree unflattening."""

PENDING: dict[int, tuple[Any, str, Any, Any]] = {}
"""``id(copy) -> (weak reference to its trace, description, sys.last_value then,
link)`` of written copies; the link is ``(weak reference to the original
Variable, reference to the value it held)`` or None."""

LINKS: dict[int, tuple[Any, Any, Any]] = {}
"""``id(tracer) -> (weak reference to the tracer, weak reference to the original
Variable, reference to its value)``: the copies' values in running traces, with
the Variables they were rebuilt from."""

STALE: dict[int, tuple[Any, str, list]] = {}
"""``id(value) -> (weak reference to the value, description, [reported])``: values
that a dropped update left stale."""

_SWEPT: list = [None]
"""``[id of the trace]`` where the pending writes were last swept, and none was
written since."""

# the package's folder: as many levels up as this module's name is deep
_HERE = str(pathlib.Path(os.path.abspath(__file__)).parents[__name__.count(".") - 1])
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


def _ref(value: Any, on_death: Any = None) -> Any:
  """A weak reference to ``value``, or None where it takes none (a Python scalar)."""
  try:
    return weakref.ref(value, on_death)
  except TypeError:
    return None


VARIABLE: list = [None]
"""``[Variable]``: installed by ``_variables``, which builds on this module."""


def link(copies: Any, originals: Any) -> None:
  """Links the Variables among ``copies`` (the children of a node just rebuilt in
  a new trace) to those at the same places in ``originals`` (the children of the
  node JAX flattened to start the trace: ``NodeDef.last``)."""
  _pair(copies, originals, VARIABLE[0])


def _pair(copies: Any, originals: Any, variable: type) -> None:
  for c, o in zip(copies, originals):
    if isinstance(c, variable):
      cd = c.__dict__
      if COPY_MARK in cd and isinstance(o, variable) and type(o) is type(c):
        tracer, value = cd["_value"], o.__dict__["_value"]
        if tracer is value:  # (rebuilt from the same value: a view, no new trace level)
          continue
        key = id(tracer)
        tracer_ref = _ref(tracer, lambda r, k=key: _forget(LINKS, k, r, 0))
        value_ref = _ref(value)
        if tracer_ref is not None and value_ref is not None:
          LINKS[key] = (tracer_ref, weakref.ref(o), value_ref)
    elif type(c) in (list, tuple) and type(o) is type(c) and len(c) == len(o):
      _pair(c, o, variable)
    elif type(c) is dict and type(o) is dict and c.keys() == o.keys():
      _pair(c.values(), [o[k] for k in c], variable)


def _forget(table: dict, key: int, ref: Any, at: int) -> None:
  """Weak reference callback: the entry ``key`` goes with the object ``ref`` named."""
  e = table.get(key)
  if e is not None and e[at] is ref:
    del table[key]


def _origins(value: Any) -> tuple:
  """Where the value of a copy came from, outwards: per step ``(weak reference to
  the Variable, to its value, to the trace of that value or None)``, ending at a
  value held outside every trace (the original's) or where no link is known."""
  chain: list[tuple] = []
  while True:
    e = LINKS.get(id(value))
    if e is not None and e[0]() is value and e[2]() is not value:
      var_ref, value_ref = e[1], e[2]
      value = value_ref()
    elif not chain and not isinstance(value, _Tracer):
      # a concrete value in a copy (a leaf that a filtered transform closes over,
      # Equinox's combine puts back): held as is by the original
      var_ref, value_ref = _DEAD, _ref(value)
    else:
      break
    if value is None or value_ref is None:
      break
    trace = getattr(value, "_trace", None) if isinstance(value, _Tracer) else None
    chain.append((var_ref, value_ref, None if trace is None else _ref(trace)))
    if trace is None or len(chain) > _MAX_DEPTH:
      break
  return tuple(chain)


def _dead() -> None:
  return None


_DEAD = _dead
_MAX_DEPTH = 64  # transformations nested deeper are not followed
_Tracer = jax.core.Tracer


def note_write(var: Any) -> None:
  """Records a write to ``var``, a copy rebuilt inside a JAX trace (called before
  the new value is stored)."""
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
    _origins(var.__dict__["_value"]),
  )
  _SWEPT[0] = None


def carried(variables: Any) -> None:
  """The values of ``variables`` are read out (flattened or walked): their
  pending writes travel on with them."""
  for v in variables:
    PENDING.pop(id(v), None)


def reset() -> None:
  """Forgets every pending write, link and stale value."""
  PENDING.clear()
  LINKS.clear()
  STALE.clear()
  _SWEPT[0] = None


def _sweep() -> None:
  """Settles the pending writes whose trace has ended: the values their
  originals held are marked stale (where an original is a copy in a trace still
  running, its value is stale and its own write pending in turn)."""
  live = live_traces()
  if live is None:  # cannot tell which traces are still running: only the top level can
    if in_transform():
      return
    live = set()
  last = getattr(sys, "last_value", None)
  for key, (trace_ref, what, last_then, chain) in list(PENDING.items()):
    trace = None if trace_ref is None else trace_ref()
    if trace is not None and id(trace) in live:
      continue
    del PENDING[key]
    if last is last_then:  # (else an interactive session showed an error since:
      _settle_chain(chain, what, last_then, live)  # the write belongs to the call that failed)


def _settle_chain(chain: tuple, what: str, last_then: Any, live: set) -> None:
  for i, (var_ref, value_ref, trace_ref) in enumerate(chain):
    value = value_ref()
    if trace_ref is None:  # the original's value (None: nobody holds it any more)
      if value is not None:
        _mark_stale(value, what)
      return
    trace = trace_ref()
    if value is not None and trace is not None and id(trace) in live:
      # a copy in a trace still running
      _mark_stale(value, what)
      var = var_ref()
      if var is not None:
        PENDING[id(var)] = (trace_ref, what, last_then, chain[i + 1 :])
      return
    # (that trace has ended too: its original, further out)


def _mark_stale(value: Any, what: str) -> None:
  key = id(value)
  e = STALE.get(key)
  if e is not None and e[0]() is value:
    return
  ref = _ref(value, lambda r, k=key: _forget(STALE, k, r, 0))
  if ref is None:  # (a Python scalar: shared by identity with unrelated objects)
    return
  STALE[key] = (ref, what, [False])


def _settle() -> None:
  """Sweeps the pending writes, unless already done in this trace since the last write."""
  t = current_trace_object()
  if t is not None and _SWEPT[0] == id(t):
    return
  _sweep()
  _SWEPT[0] = None if t is None else id(t)


def check_value(value: Any) -> None:
  """Raises :class:`LostUpdateError` if ``value`` (read or replaced through a
  Variable) is stale."""
  if PENDING:
    _settle()
  if STALE:
    e = STALE.get(id(value))
    if e is not None and e[0]() is value:
      _raise(e)


def check_flattened(variables: Any) -> None:
  """``variables`` (children of a node, or the slots of a graph walk) are read
  out: carries their pending writes on, and raises :class:`LostUpdateError` if
  one among them holds a stale value."""
  if PENDING:
    carried(variables)
    _settle()
  if STALE:
    found: list[tuple] = []
    for v in variables:
      d = getattr(v, "__dict__", None)
      if d is not None and "_value" in d:
        e = STALE.get(id(d["_value"]))
        if e is not None and e[0]() is d["_value"] and all(f is not e for f in found):
          found.append(e)
    if found:
      _raise(*found)


def _raise(*entries: tuple) -> None:
  for e in entries:
    e[2][0] = True
  listing = "\n".join(f"  - {e[1]}" for e in entries)
  raise LostUpdateError(
    f"{len(entries)} Variable(s) hold a stale value: state update(s) made inside a JAX"
    f" transformation were dropped:\n{listing}\n"
    "The transformation (jax.jit, jax.grad, jax.vmap, jax.checkpoint, or Equinox's"
    " filter_jit, filter_grad, filter_value_and_grad, filter_vmap, filter_checkpoint)"
    " ran the module on a copy rebuilt from its pytree, updated the copy, and discarded"
    " it; the module still holds the value from before that call. Fix the call, one of:\n"
    "  1. use NNX's transforms (nnx.jit, nnx.value_and_grad, nnx.vmap, nnx.remat), which"
    " write updates back to the module;\n"
    "  2. carry the state out, as Equinox threads eqx.nn.State: return"
    " `nnx.state(model, nnx.Not(nnx.Param))` from the function (as aux with"
    " has_aux=True) and apply it with `nnx.update(model, state)`, or return the module"
    " itself;\n"
    "  3. keep such state in jax.Refs, which JAX's transforms update in place:"
    " `model = nnx.with_vars(model, ref=True, only=nnx.Not(nnx.Param))` (see the"
    " Ref-backed state table in docs/guides/performance.md for its cost per call);\n"
    "  4. if the update is not wanted (evaluation), switch the layers off first:"
    " `model.eval()` or `eqx.nn.inference_mode(model)`.\n"
    "Then call `nnx.clear_lost_updates(model)` to go on from the values before the"
    " dropped call (or build the module again), and run the fixed call. If the"
    " transformation raised an exception after the update, these values are those from"
    " before the failed call and nothing more is wrong: clear them the same way."
  )


def unreported() -> list[str]:
  """Descriptions of the dropped updates whose stale value is still held but was
  never reported (read at the top level, where every trace has ended)."""
  if PENDING:
    _sweep()
  return [e[1] for e in list(STALE.values()) if e[0]() is not None and not e[2][0]]


def clear_lost_updates(*nodes: Any) -> None:
  """Accepts the values that dropped updates left stale in ``nodes`` (every
  node when none is given): they read, write and flatten again as usual.

  A JAX transformation that drops a state update leaves the module with the
  values from before the call; reading them raises
  :class:`~nnx_eqx.LostUpdateError` until this is called.

  Args:
    *nodes: Modules, Variables or any pytrees of them.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> bn = nnx.BatchNorm(2, rngs=nnx.Rngs(0))
    >>> _ = jax.jit(lambda m, x: m(x))(bn, jnp.ones((4, 2)))  # the update is dropped
    >>> bn.mean[...]
    Traceback (most recent call last):
    ...
    nnx_eqx.LostUpdateError: 1 Variable(s) hold a stale value: ...
    >>> nnx.clear_lost_updates(bn)
    >>> bn.mean[...]
    Array([0., 0.], dtype=float32)
  """
  if PENDING:
    _sweep()
  if not nodes:
    STALE.clear()
    return
  variable = VARIABLE[0]
  saved = dict(STALE)
  STALE.clear()
  try:
    found = jax.tree.leaves(nodes, is_leaf=lambda x: isinstance(x, variable))
    held = {id(v.__dict__["_value"]) for v in found if isinstance(v, variable)}
  finally:
    for key, e in saved.items():
      if key not in held:
        STALE.setdefault(key, e)

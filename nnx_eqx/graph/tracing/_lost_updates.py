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

1. *Links.* Each state Variable (any Variable type but ``Param``) flattens
   with aux data of its own (a ``VariableRef``: a weak reference to it that
   compares as its metadata, see ``_copy_links``), so each copy rebuilt in a
   trace knows the very Variable it was rebuilt from, however many nodes share
   one definition, whether one layer is reached through several arguments, and
   whether the Variable is passed on its own or in a plain container. A copy is
   linked to it and further out, while they hold the very same value, to the
   Variables that one was rebuilt from by pytree maps outside the trace
   (Equinox's ``partition`` before ``filter_jit``). A link holds the
   Variables weakly and the value each held then. It is also kept under the
   copy's tracer, so copies rebuilt again from the same tracers inside the trace
   (Equinox's ``combine``) find it too.
2. *Pending writes.* A write to a copy (``.value = ...``, ``nnx.update``) is
   recorded as pending, with its trace, the frame of the JAX function running
   that trace, and its links, in the writing thread's name: each thread settles
   its own writes, as only it can tell which of its traces still run. Flattening
   the copy again (JAX's flatten, a graph walk) means the value is carried on
   and clears it.
3. *Stale Variables.* Once that trace has ended (it is neither the current trace
   nor one it is nested in), a write still pending was dropped -- unless the
   transformation raised (its frame did not return): then it returned nothing,
   the caller's objects hold what they held, and nothing is marked. Otherwise the
   linked originals that still hold the value from before the call are marked
   *stale* -- once the transformation's call has returned to the code that called
   it, and the finished frames of JAX that held its arguments are cleared (with
   the copy of their locals that reading ``f_locals`` leaves before Python 3.13),
   so a temporary argument is gone by then. The mark belongs to the Variable, weakly
   held: another object holding the same array (a clone, an ``nnx.update``
   target, a checkpoint restored from those arrays, an ``nnx.state`` snapshot of
   the values) is not concerned, and writing a new value to the stale Variable
   ends the mark. Where an original is
   itself a copy in a trace still running (nested transforms), it is marked and
   its own write recorded as pending, and the drop travels outwards.
4. *Reports.* Reading a stale Variable, flattening it, or walking a graph that
   holds it raises :class:`LostUpdateError`, naming the Variable (by the
   outermost ``self`` that holds it; before Python 3.13, among frames inside the
   trace only, as reading the locals of a frame that goes on running would keep
   them alive), where it was written and the fixes. An update dropped on an
   object nobody holds any more (a temporary ``rngs.fork()`` passed to
   ``jax.vmap``) leaves nothing to report; other objects are never concerned.
   :func:`clear_lost_updates` accepts the values from before the call.

Writes under ``jax.eval_shape`` / ``eqx.filter_eval_shape`` are exempt (shape
evaluation discards all values). Writing whole values over a stale module
(``nnx.update``, a checkpoint restored into it) is a write, not a use: the walk
of its target refuses nothing (:func:`overwriting`) and the marks of the
Variables written end (:func:`written`). JAX's, Equinox's, the call wrappers' and
this package's code are told from the user's by identity -- resolved package
folders and JAX's code objects, see ``_frames`` -- so none of this depends on
where anything is installed or what its folders are called.

What cannot be told, and why:

* A ``Param`` (or a subclass) is not linked: a layer's forward pass reads its
  Params and an optimizer updates them, and a model of Params only flattens and
  rebuilds at the cost it had before this watch existed (an Equinox-style step
  rebuilds every Variable of the model several times per call). A Param written
  inside a plain transformation and dropped is not reported. An optimizer's own
  state (``nnx.Optimizer``'s step count and moments) is watched, so a dropped
  ``Optimizer.update`` is reported on the optimizer.
* A node rebuilt by a pytree map that keeps the arrays (``jax.tree.map(lambda
  a: a, m)``) cannot be told from the copy Equinox's ``partition`` makes to
  pass ``m`` to ``filter_jit``: a dropped update of the rebuilt node marks ``m``
  as well while ``m`` still holds those very arrays. (A map that makes new
  arrays, ``lambda a: a + 0``, gives a node of its own.)
* A compiled program runs without a trace to watch. Once a drop is found on a
  Variable still held, every structure made so far compares unequal to the new
  ones (``_copy_links.GENERATION``), so each compiled program traces again on
  its next call and a drop it makes for another module (or Variable) of the same
  structure is seen. A drop on a temporary starts no new generation (a loop passing a fresh
  ``nnx.Rngs`` to one jitted function would trace at every call): a later call
  of that compiled program with a module of the same structure drops its update
  silently.

Costs. While no copy has been written and no Variable is stale, the checks here
are tests of two module-level dicts for emptiness; while some Variable is stale
anywhere, a state Variable flattened or read costs one more dict look-up,
Params and Module flattens cost nothing more, and a cached graph walk is
checked once per new stale mark. The links cost one ``VariableRef`` per state
Variable, made the first time it is flattened (four attribute tests when it is
flattened again; a state Variable that a pytree map just rebuilt makes one at
its first flatten, except a placeholder holding ``None`` -- the other half of
Equinox's ``partition`` -- which shares one per Variable it was rebuilt from),
and nothing per Param or Module: a weak reference per
rebuilt state Variable is the price of linking each copy to its own original
(see ``benchmarks/lost_updates.py``, whose ``--before`` table compares with a
tree from before this watch). :func:`set_lost_update_watch` turns the watch off
(``WATCHING``): state Variables then flatten with their metadata as Params do,
copies are neither marked nor linked, and nothing is recorded.
"""

from __future__ import annotations

import contextlib
import dis
import inspect
import os
import sys
import threading
import weakref
from typing import Any

import jax

from .._errors import LostUpdateError
from . import _frames
from ._copy_links import COPY_MARK as COPY_MARK
from ._copy_links import LINKS, forgetter, origin_of
from ._traces import current_trace_object, in_transform, live_traces

_ENV = "NNX_EQX_LOST_UPDATE_WATCH"
_ON, _OFF = frozenset({"1", "true", "on", "yes"}), frozenset({"0", "false", "off", "no"})


def _watch_from_env() -> bool:
  raw = os.environ.get(_ENV, "1")
  word = raw.strip().lower()
  if word in _ON:
    return True
  if word in _OFF:
    return False
  raise ValueError(
    f"The environment variable {_ENV}={raw!r} is not a switch: set it to 1/true/on to"
    " watch for dropped updates (the default) or 0/false/off to turn the watch off."
  )


WATCHING = [_watch_from_env()]
"""``[True]`` while dropped updates are watched (see :func:`set_lost_update_watch`)."""

PENDING: dict[int, tuple] = {}
"""``id(copy) -> (thread, weak reference to the copy's trace, description, the
frame running that trace, chain)`` of written copies, for every thread; each
thread settles its own only. ``chain``: see :func:`_origins`."""

STALE: dict[int, tuple] = {}
"""``id(variable) -> (weak reference to it, the stale value, description,
[reported])``: Variables that a dropped update left stale. A Variable is stale
while it still holds that value: a new value written to it ends the mark."""

STALE_EPOCH = [0]
"""Bumped when a Variable is marked stale: a cached graph walk checked for
stale Variables at this epoch needs no new check."""

_SWEPT: dict[int, int] = {}
"""``thread -> id of the trace`` where that thread's pending writes were last
swept, none written since."""

_RETURNS = frozenset(dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap)
_MAX_FRAMES = 256  # frames searched for the one running a trace
_MAX_DEPTH = 64  # transformations nested deeper are not followed
_Tracer = jax.core.Tracer
_ident = threading.get_ident
_USERS = 0  # (``_frames.kind`` of the user's code)
_NOT_A_SITE = _frames.PACKAGE | _frames.WRAPPER  # (where a write is not made)


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


def _describe(var: Any, frame: Any, running: Any) -> str:
  """The Variable's class, shape, the attribute of the object that owns it and
  the first place outside this package that led to the write (``running``: the
  frame running the trace, see :func:`_running`)."""
  what = type(var).__name__
  shape = getattr(var.__dict__.get("_value"), "shape", None)
  owner = site = None
  f, seen, selves = frame, 0, True
  _frames.refresh()
  while f is not None and seen < 64:  # the outermost ``self`` that holds it names it best
    obj = f.f_locals.get("self") if selves else None
    if obj is not None and obj is not var:
      name = _name_in(obj, var, 2)
      if name is not None:
        owner = f"{type(obj).__name__}.{name}"
    if f is running and _SNAPSHOTS:
      # (before PEP 667, reading ``f_locals`` of a frame that goes on running,
      # outside the trace, would leave a copy of its locals on it, which keeps
      # the temporaries of a loop there alive after it rebinds them)
      selves = False
    if site is None and not _frames.kind(f) & _NOT_A_SITE:
      site = f"{f.f_code.co_filename}:{f.f_lineno}"
    f, seen = f.f_back, seen + 1
  text = f"{what}{'' if shape is None else f' of shape {tuple(shape)}'}"
  if owner is not None:
    text += f" at `{owner}`"
  if site is not None:
    text += f" (written from {site})"
  return text


def _running(trace: Any, frame: Any) -> Any:
  """The frame (at or above ``frame``) of the JAX function that runs ``trace``:
  the innermost whose locals hold it. Whether that frame returned tells a
  transformation that finished from one that raised."""
  f, seen = frame, 0
  while f is not None and seen < _MAX_FRAMES:
    if any(v is trace for v in f.f_locals.values()):
      return f
    f, seen = f.f_back, seen + 1
  return None


def _in_library(frame: Any) -> bool:
  """Whether ``frame`` runs JAX, Equinox, a call wrapper or this package (not the
  user's code that called a transformation), told by ``_frames.kind``."""
  return _frames.kind(frame) != _USERS


def _returned_to_caller(frame: Any) -> bool:
  """Whether the transformation whose trace ran in ``frame`` has returned to the
  code that called it: none of the library frames from ``frame`` outwards is on
  the calling thread's stack (until then they hold its arguments)."""
  stack = set()
  _frames.refresh()
  f: Any = sys._getframe(1)
  while f is not None:
    stack.add(id(f))
    f = f.f_back
  f, seen = frame, 0
  while f is not None and seen < _MAX_FRAMES and (seen == 0 or _in_library(f)):
    if id(f) in stack:
      return False
    f, seen = f.f_back, seen + 1
  return True


def _release(frame: Any) -> None:
  """Clears the locals of ``frame`` and the finished library frames outwards of it,
  which a pending write kept: the arguments they held go with them."""
  f, seen = frame, 0
  _frames.refresh()
  while f is not None and seen < _MAX_FRAMES and (seen == 0 or _in_library(f)):
    try:
      f.clear()
    except RuntimeError:  # (still running)
      return
    if _SNAPSHOTS and f.f_code.co_flags & inspect.CO_OPTIMIZED:
      f.f_locals.clear()  # (and the copy of them that reading ``f_locals`` left)
    f, seen = f.f_back, seen + 1


_SNAPSHOTS = sys.version_info < (3, 13)
"""Whether reading a function frame's ``f_locals`` leaves a dict on the frame
that holds its locals until the frame is freed (before PEP 667): a finished
frame a pending write kept still holds its arguments through it."""


def _returned(frame: Any) -> bool:
  """Whether ``frame`` (of a finished call) ended by returning, not by an exception."""
  if frame is None:
    return True
  try:
    return frame.f_code.co_code[frame.f_lasti] in _RETURNS
  except (IndexError, AttributeError):
    return True


VARIABLE: list = [None]
"""``[Variable]``: installed by ``_variables``, which builds on this module."""


def _origins(var: Any) -> tuple:
  """Where the value of a copy came from, outwards: per step ``(originals, weak
  reference to the trace of their value or None)``, ending at Variables held
  outside every trace or where no link is known."""
  chain: list[tuple] = []
  origin = origin_of(var)
  while origin is not None and len(chain) <= _MAX_DEPTH:
    value = origin[0][1]
    trace = value._trace if isinstance(value, _Tracer) else None
    chain.append((origin, None if trace is None else weakref.ref(trace)))
    if trace is None:
      break
    nearest = origin[0][0]()
    if nearest is None:
      break
    origin = origin_of(nearest)
  return tuple(chain)


def note_write(var: Any) -> None:
  """Records a write to ``var``, a copy rebuilt inside a JAX trace (called before
  the new value is stored)."""
  key = id(var)
  if key in PENDING or not WATCHING[0]:
    return
  frame = sys._getframe(2)
  if _frames.under_shape_evaluation(frame):
    return
  trace = current_trace_object()
  running = None if trace is None else _running(trace, frame)
  PENDING[key] = (
    _ident(),
    None if trace is None else weakref.ref(trace),
    _describe(var, frame, running),
    running,
    _origins(var),
  )
  _SWEPT.pop(_ident(), None)


def carried(variables: Any) -> None:
  """The values of ``variables`` are read out (flattened or walked): their
  pending writes travel on with them."""
  for v in variables:
    PENDING.pop(id(v), None)


def reset() -> None:
  """Forgets every pending write, link and stale mark."""
  PENDING.clear()
  LINKS.clear()
  STALE.clear()
  _SWEPT.clear()


def _sweep() -> None:
  """Settles this thread's pending writes whose trace has ended: the Variables
  they were rebuilt from are marked stale (where one is a copy in a trace still
  running, it is stale and its own write pending in turn). A write whose
  transformation raised is forgotten: the caller's objects are as they were."""
  live = live_traces()
  if live is None:  # cannot tell which traces are still running: only the top level can
    if in_transform():
      return
    live = set()
  me = _ident()
  running: set | None = None
  for key, entry in list(PENDING.items()):
    thread, trace_ref, what, frame, chain = entry
    if thread != me:
      if running is None:
        running = {t.ident for t in threading.enumerate()}
      if thread in running:
        continue  # (another thread's: settled there, which alone sees its traces)
      # (a thread that ended: every trace it ran has ended)
    trace = None if trace_ref is None else trace_ref()
    if trace is not None and id(trace) in live:
      continue
    if frame is not None and thread == me and not _returned_to_caller(frame):
      continue  # (the transformation's call has not returned yet: its arguments are held)
    if PENDING.get(key) is entry:
      del PENDING[key]
    returned = _returned(frame)  # (else the transformation raised: nothing was dropped)
    _release(frame)  # a temporary its frames held is not kept for a mark
    del entry, frame
    if returned:
      _settle_chain(chain, what, live)


def _settle_chain(chain: tuple, what: str, live: set) -> None:
  for i, (origin, trace_ref) in enumerate(chain):
    if trace_ref is None:  # Variables held outside every trace
      _mark_stale(origin, what, outside=True)
      return
    trace = trace_ref()
    if trace is not None and id(trace) in live:  # copies in a trace still running
      _mark_stale(origin, what)
      nearest = origin[0][0]()
      if nearest is not None:
        frame = _running(trace, sys._getframe(1))
        PENDING[id(nearest)] = (_ident(), trace_ref, what, frame, chain[i + 1 :])
      return
    # (that trace has ended too: its originals, further out)


ON_MARK: list = [None]
"""``[() -> None]``: called when a Variable outside every trace is marked stale;
installed by the pytree view, which makes compiled-program caches miss once."""


def _mark_stale(origin: tuple, what: str, outside: bool = False) -> None:
  marked = False
  for var_ref, value in origin:
    var = var_ref()
    if var is None or var.__dict__.get("_value") is not value:
      continue  # (gone, or written since: not stale)
    key = id(var)
    e = STALE.get(key)
    if e is not None and e[0]() is var and e[1] is value:
      continue
    STALE[key] = (weakref.ref(var, forgetter(STALE, key)), value, what, [False])
    STALE_EPOCH[0] += 1
    marked = True
  if marked and outside and ON_MARK[0] is not None:
    ON_MARK[0]()


def _settle() -> None:
  """Sweeps this thread's pending writes, unless already done in this trace
  since the last write."""
  t = current_trace_object()
  me = _ident()
  tid = None if t is None else id(t)
  if tid is not None and _SWEPT.get(me) == tid:
    return
  _sweep()
  if tid is None:
    _SWEPT.pop(me, None)
  else:
    _SWEPT[me] = tid


def _stale_entry(var: Any) -> tuple | None:
  e = STALE.get(id(var))
  if e is not None and e[0]() is var and var.__dict__.get("_value") is e[1]:
    return e
  return None


def check_variable(var: Any) -> None:
  """Raises :class:`LostUpdateError` if ``var`` (read, or read out) is stale."""
  if PENDING:
    _settle()
  if STALE:
    e = _stale_entry(var)
    if e is not None:
      _raise(e)


def check_flattened_variable(var: Any) -> None:
  """``var`` is flattened: carries its pending write on, and raises
  :class:`LostUpdateError` if it is stale."""
  if PENDING:
    PENDING.pop(id(var), None)
    _settle()
  if STALE:
    e = _stale_entry(var)
    if e is not None:
      _raise(e)


def check_flattened(variables: Any) -> None:
  """``variables`` (children of a node, or the slots of a graph walk) are read
  out: carries their pending writes on, and raises :class:`LostUpdateError` if
  one among them is stale."""
  if PENDING:
    carried(variables)
    _settle()
  if STALE:
    found = _stale_among(variables)
    if found:
      _raise(*found)


def _stale_among(variables: Any) -> list[tuple]:
  """The stale entries of ``variables``, each once."""
  found: list[tuple] = []
  for v in variables:
    if id(v) in STALE:
      e = _stale_entry(v)
      if e is not None and all(f is not e for f in found):
        found.append(e)
  return found


_OVERWRITING = threading.local()
"""``.depth``: how many :func:`overwriting` blocks this thread is in."""


@contextlib.contextmanager
def overwriting() -> Any:
  """Within it, this thread reads the graph it is about to write whole values
  over (``nnx.update``'s target, a checkpoint restored into a module) without
  refusing its stale Variables: that write is the recovery from a dropped
  update, not a use of the stale values. Pending writes settle as usual; the
  marks end only for the Variables :func:`written` is given."""
  depth = getattr(_OVERWRITING, "depth", 0)
  _OVERWRITING.depth = depth + 1
  try:
    yield
  finally:
    _OVERWRITING.depth = depth


def refusing() -> bool:
  """Whether a stale Variable read now raises (outside :func:`overwriting`)."""
  return not getattr(_OVERWRITING, "depth", 0)


def written(variables: Any) -> None:
  """Whole values were written over ``variables`` (``nnx.update``, a restore):
  their stale marks end, even where the value written is the one they held."""
  if STALE:
    for v in variables:
      STALE.pop(id(v), None)


def check_sources(variables: Any) -> None:
  """Raises :class:`LostUpdateError` if one of ``variables``, whose values are
  about to be written elsewhere, is stale (the copy would hold stale values)."""
  if PENDING:
    _settle()
  if STALE:
    found = _stale_among(variables)
    if found:
      _raise(*found)


def _raise(*entries: tuple) -> None:
  if not refusing():
    return
  for e in entries:
    e[3][0] = True
  listing = "\n".join(f"  - {e[2]}" for e in entries)
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
    "Then recover the module, one of: write values saved apart from it over it,"
    " `nnx.update(model, saved)` (e.g. `saved = nnx.state(model).to_pure_dict()` taken"
    " before; a State from nnx.state or nnx.split holds the module's own Variables, so"
    " it holds the stale values too) or `nnx.checkpoint.restore(path, model)`, which"
    " ends the marks of the Variables written; build it again with"
    " `nnx.merge(nnx.graphdef(model), saved)`; or call `nnx.clear_lost_updates(model)` to go on"
    " from the values before the dropped call. Then run the fixed call."
  )


def unreported() -> list[str]:
  """Descriptions of the dropped updates whose stale Variable is still held but
  was never reported (read at the top level, where every trace has ended)."""
  if PENDING:
    _sweep()
  out = []
  for e in list(STALE.values()):
    var = e[0]()
    if var is not None and var.__dict__.get("_value") is e[1] and not e[3][0]:
      out.append(e[2])
  return out


def clear_lost_updates(*nodes: Any) -> None:
  """Accepts the values that dropped updates left stale in ``nodes`` (every
  node when none is given): they read, write and flatten again as usual.

  A JAX transformation that drops a state update leaves the module with the
  values from before the call; reading them raises
  :class:`~nnx_eqx.LostUpdateError` until this is called (or a new value is
  written to each stale Variable). flax.nnx has no counterpart: it drops such
  updates silently.

  Args:
    *nodes: Modules, Variables or any pytrees of them (clearing one that holds
      nothing stale does nothing).

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
    held = {id(v) for v in found if isinstance(v, variable)}
  finally:
    for key, e in saved.items():
      if key not in held:
        STALE.setdefault(key, e)


def set_lost_update_watch(enabled: bool) -> bool:
  """Turns the watch for dropped state updates on or off, for the whole process.

  On (the default), a state update a plain JAX transformation drops makes the
  stale Variable raise :class:`~nnx_eqx.LostUpdateError` where it is used again.
  To link each copy rebuilt in a trace to its own original, every state Variable
  (any Variable type but ``Param``) flattens with a weak reference to itself,
  which costs a little on every flatten and one weak reference each time a pytree
  map rebuilds it (none for the placeholders of Equinox's ``partition``, which
  hold ``None``; ``benchmarks/lost_updates.py`` measures both against a tree
  from before the watch). Off, state Variables flatten as Params do, at that
  former cost, and a dropped update goes unreported, as in flax.nnx.

  Turning it off forgets every pending write and stale mark. A program compiled
  while it was off runs unwatched until it traces again. Set it once at start-up
  (as ``jax.config``): it is not meant to be flipped while other threads trace.
  The environment variable ``NNX_EQX_LOST_UPDATE_WATCH`` (``1``/``true``/``on`` or
  ``0``/``false``/``off``), read at import, sets the value it starts with.
  ``nnx.jit`` and the other lifted transforms carry every update either way.

  Args:
    enabled: ``True`` to watch, ``False`` to stop watching.

  Returns:
    Whether the watch was on before the call (to restore it later).

  Raises:
    TypeError: ``enabled`` is not a ``bool``.
    ValueError: at import, where ``NNX_EQX_LOST_UPDATE_WATCH`` holds another value.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> previous = nnx.set_lost_update_watch(False)
    >>> bn = nnx.BatchNorm(2, rngs=nnx.Rngs(0))
    >>> _ = jax.jit(lambda m, x: m(x))(bn, jnp.ones((4, 2)))  # dropped, silently
    >>> bn.mean[...]
    Array([0., 0.], dtype=float32)
    >>> nnx.set_lost_update_watch(previous)
    False
  """
  if not isinstance(enabled, bool):
    raise TypeError(
      f"set_lost_update_watch(enabled=...) takes True or False, not {enabled!r}"
      f" ({type(enabled).__name__}); pass bool(...) to convert it."
    )
  previous = WATCHING[0]
  WATCHING[0] = enabled
  if not enabled:
    reset()
  return previous

"""Which Variable a copy rebuilt inside a JAX trace was rebuilt from.

A Variable that holds *state* (any Variable type but :class:`~nnx_eqx.Param` and
its subclasses) flattens with aux data of its own, a :class:`VariableRef`: a weak
reference to the Variable that compares and hashes as its metadata (the aux data
every other Variable flattens with), so compiled-program caches hit as before.
A Variable rebuilt from it by pytree unflattening therefore knows the very
Variable it was rebuilt from -- however many nodes share one definition, one
layer is reached through several arguments, or the Variable is passed on its
own or in a plain container -- and so does a Variable holding a Python scalar.

* Rebuilt *outside* a trace (``jax.tree.map``, Equinox's ``partition``), it
  keeps that reference (under ``AUX``) until it is next flattened; its own
  VariableRef, made then in its place, points on to it (``origin``, the
  nearest still alive), so the chain of pytree maps before a transformation
  is followed outwards.
* Rebuilt *inside* a JAX transformation's trace, it is a *copy*: :func:`link`
  records in it (``COPY_MARK``) the Variables it was rebuilt from, outwards,
  while they hold the very value the copy's tracer stands for.

Params are not linked: a layer's forward pass reads them, updates come from
an optimizer, and a model of Params only (an Equinox-style training step
rebuilds every Variable of the model several times per call) flattens and
rebuilds at the cost it had before any of this existed. A write to a Param
inside a plain JAX transformation is therefore not watched (see
``_lost_updates``).
"""

from __future__ import annotations

import operator
import weakref
from typing import Any

import jax

from ._traces import current_trace_object

COPY_MARK = "_nnx_copy"
"""Key in a Variable's ``__dict__``: it was rebuilt from a tracer by pytree
unflattening (True), or, once linked, the Variables it was rebuilt from (see
:func:`link`)."""

AUX = "_nnx_aux"
"""Key in a state Variable's ``__dict__``: its own :class:`VariableRef`, once
it has been flattened; before that, in a Variable rebuilt by pytree
unflattening, the :class:`VariableRef` it was rebuilt from (one key for both:
the first flatten of a rebuilt Variable, which every pytree map pays, replaces
a value rather than adding a key)."""

MAX_ORIGINS = 16
"""Pytree maps followed outwards from the Variable a copy was rebuilt from."""

GENERATION = [0]
"""The generation of the aux data made now (bumped by ``pytree._view`` once a
dropped update is found on a Variable still held): aux data of different
generations never compare equal, so every compiled program traces again on its
next call and a drop it makes for another object of the same structure is seen
(a compiled program runs without a trace to watch)."""

LINKS: dict[int, tuple] = {}
"""``id(tracer) -> (weak reference to the tracer, originals)``: the copies'
values in running traces, with the Variables they were rebuilt from, so that
copies rebuilt again from the same tracers (Equinox's ``combine``) find them."""

_Tracer = jax.core.Tracer
_first = operator.itemgetter(0)
_ref_new = weakref.ref.__new__


class VariableRef(weakref.ref):
  """The aux data a state Variable flattens with: a weak reference to it that
  carries its metadata aux (``meta``), the :data:`GENERATION` it was made in
  (``gen``) and the VariableRef of the Variable it was rebuilt from
  (``origin``, the nearest still alive; ``depth`` counts them); ``stop``: the
  aux data of the placeholders rebuilt from it (see :func:`placeholder_ref`),
  once one has been flattened.

  It compares and hashes as ``meta`` (two VariableRefs also compare their
  generations); it pickles (and deep-copies) as ``meta``.
  Made by :func:`variable_ref` without a Python-level ``__init__``.
  """

  __slots__ = ("meta", "gen", "origin", "depth", "stop")
  meta: Any
  gen: int
  origin: Any
  depth: int
  stop: Any

  def __eq__(self, other: Any) -> bool:
    if type(other) is VariableRef:
      return self.gen == other.gen and self.meta == other.meta
    return self.meta == other

  def __ne__(self, other: Any) -> bool:  # (as ``__eq__``, without a second call: JAX's
    if type(other) is VariableRef:  # ``flatten_up_to`` asks at every pytree map)
      return self.gen != other.gen or self.meta != other.meta
    return self.meta != other

  def __hash__(self) -> int:
    return hash(self.meta)

  def __reduce__(self):
    return (_first, ((self.meta,),))  # (``meta`` itself, whatever its type)

  def __repr__(self) -> str:
    return repr(self.meta)


def variable_ref(var: Any, meta: Any, origin: Any) -> VariableRef:
  """``var``'s own :class:`VariableRef`, with the metadata aux ``meta``;
  ``origin``: the VariableRef ``var`` was rebuilt from, or None."""
  ref = _ref_new(VariableRef, var)
  while origin.__class__ is VariableRef and origin() is None:
    origin = origin.origin  # (temporaries gone: not kept)
  if origin.__class__ is not VariableRef or origin.depth >= MAX_ORIGINS:
    origin = None  # (a chain of rebuilds, as a training loop makes, is cut)
    ref.depth = 0
  else:
    ref.depth = origin.depth + 1
  ref.meta = meta
  ref.gen = GENERATION[0]
  ref.origin = origin
  ref.stop = None
  return ref


class _Placeholder:
  """The object the aux data of every placeholder refers to (see
  :func:`placeholder_ref`): it holds no value and is no Variable type, so a
  traced copy whose nearest original it is is not linked to anything (its value
  came from elsewhere), while a value held as is is looked for past it, and
  :func:`_aliases` passes over it."""

  __slots__ = ("__dict__", "__weakref__")


PLACEHOLDER = _Placeholder()
PLACEHOLDER.__dict__["_value"] = None


def placeholder_ref(src: VariableRef, meta: Any) -> VariableRef:
  """The aux data of a *placeholder* -- a state Variable holding ``None``,
  rebuilt from ``src`` by a pytree map (the other half of Equinox's
  ``partition``) -- with its metadata aux ``meta``.

  A placeholder holds no value a copy could be linked to: what a link needs of
  it is only that it stops there (a Variable rebuilt from its structure in a
  trace got its value from the other half, not from ``src``), while the walk
  of a value held as is goes on through it to ``src``. So every placeholder
  rebuilt from the same Variable shares one VariableRef, to
  :data:`PLACEHOLDER`, whose ``origin`` is that Variable's (the nearest still
  alive: ``partition`` rebuilds from a temporary tree of masks), made once and
  kept as its ``stop``: rebuilding the two halves at every step (``partition``
  before ``filter_jit``, ``filter_jit``'s ``combine``) makes no weak reference
  for the placeholders. A placeholder rebuilt from such aux data shares it
  too."""
  if src() is PLACEHOLDER:  # (rebuilt from a placeholder's aux data)
    src = src.origin
  while src is not None and src() is None:  # (temporaries gone)
    src = src.origin
  if src is not None:
    stop = src.stop
    if stop is not None and stop.gen == GENERATION[0] and stop.meta == meta:
      return stop
  stop = variable_ref(PLACEHOLDER, meta, src)
  if src is not None:
    src.stop = stop
  return stop


def link(copy: Any, src: VariableRef) -> None:
  """Links ``copy`` (rebuilt from ``src`` inside a JAX trace) to the Variable
  ``src`` names and, while they hold the very same value, to the Variables
  further out that one was rebuilt from by pytree maps (Equinox's
  ``partition`` before ``filter_jit``)."""
  outer: list = []
  r: Any = src
  while r is not None and len(outer) <= MAX_ORIGINS:
    v = r()
    if v is not None:
      outer.append(v)
    r = r.origin
  if not outer:
    return
  cd = copy.__dict__
  value = cd["_value"]
  cls = type(copy)
  if isinstance(value, _Tracer) and value._trace is current_trace_object():  # traced here
    key = id(value)
    e = LINKS.get(key)
    if e is not None and e[0]() is value:  # rebuilt again from the tracer of a copy
      cd[COPY_MARK] = e[1]  # (Equinox's combine, whichever tree comes first)
      return
    held = outer[0].__dict__.get("_value")
    if held is None or type(outer[0]) is not cls:  # (a placeholder: ``partition``'s other half)
      return
    cd[COPY_MARK] = mark = _aliases(outer, held, cls)
    LINKS[key] = (weakref.ref(value, forgetter(LINKS, key)), mark)
    return
  # a value held as is, not traced here (a leaf a filtered transformation closes
  # over and Equinox's combine puts back, an unmapped one under vmap, an int under
  # grad, a tracer of an outer trace): held by the original, wherever its own copy
  # holds a placeholder
  if value is None:
    return
  here = cd.get("_trace")
  for j, a in enumerate(outer):
    ad = a.__dict__
    if ad.get("_value") is value:
      inherited = ad.get(COPY_MARK)
      if type(inherited) is tuple and ad.get("_trace") == here:
        cd[COPY_MARK] = inherited  # (a copy of a copy in this trace)
      else:
        cd[COPY_MARK] = _aliases(outer[j:], value, cls)
      return


def _aliases(outer: list, value: Any, cls: type) -> tuple:
  """``((weak reference, value), ...)`` of the Variables of ``outer`` from the
  first on, while they are ``cls`` Variables holding ``value`` itself
  (placeholders between them are passed over)."""
  out = []
  for a in outer:
    if a is PLACEHOLDER:  # (passed through: a Variable further out may hold ``value``)
      continue
    if type(a) is not cls or a.__dict__.get("_value") is not value:
      break
    out.append((weakref.ref(a), value))
  return tuple(out)


def forgetter(table: dict, key: int) -> Any:
  """The weak reference callback that removes ``table[key]`` with its object."""

  def forget(ref: Any, table: dict = table, key: int = key) -> None:
    e = table.get(key)  # (no global look-up: it may run while the interpreter exits)
    if e is not None and e[0] is ref:
      del table[key]

  return forget


def origin_of(var: Any) -> tuple | None:
  """The Variables ``var`` (a copy) was rebuilt from: ``((weak reference, value
  it held then), ...)``, nearest first (all holding one value)."""
  d = var.__dict__
  mark = d.get(COPY_MARK)
  if type(mark) is tuple:
    return mark or None
  value = d.get("_value")
  e = LINKS.get(id(value))
  if e is not None and e[0]() is value:
    return e[1] or None
  return None

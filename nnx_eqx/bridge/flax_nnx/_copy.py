"""The one mechanism behind both directions of the flax.nnx bridge.

A graph of one library's objects is copied into the other library's vocabulary
(:func:`wrap`): each Variable becomes a Variable of the paired type, each list,
dict and Sequential container the other library's container, and each other Module
a *wrapper* Module of the other library (``FlaxModule`` holds a flax Module,
``NnxEqxModule`` an nnx_eqx one) whose attributes are the copied attributes of the
Module: submodules as wrappers, Variables, arrays, static attributes as they are.
Objects are copied once each (a memo by identity), so a submodule or Variable
reached by several paths is one object under every name, cycles included.

:func:`unwrap` is the way back: a wrapper graph rebuilt as objects of the wrapped
library (the classes, static attributes and sharing as they were), the Variables
new ones over the current values. Calling a wrapper (:func:`call`) rebuilds the
graph below it, runs the method there, and writes back what it changed (new values,
and new or replaced attributes, e.g. a flag set by ``eval()`` or a value ``sow``
added), so one set of Variables is trained whichever wrapper is called.

A :class:`Side` says how one library's objects are read and made.
"""

from __future__ import annotations

from typing import Any

import jax

from .._errors import FlaxConversionError, fmt_path
from ._import import describe

VAR, LIST, DICT, SEQ, MODULE = range(5)
_CONTAINERS = (LIST, DICT, SEQ)


class Private:
  """The attributes of a wrapped Module kept out of sight (the library's own
  bookkeeping, names the wrapper class uses): a static attribute hashed once."""

  __slots__ = ("items", "_hash")

  def __init__(self, items: tuple):
    self.items = items
    self._hash = hash(items)

  def __hash__(self) -> int:
    return self._hash

  def __eq__(self, other: object) -> bool:
    return self is other or (
      type(other) is Private and self._hash == other._hash and self.items == other.items
    )

  def __getstate__(self) -> Any:
    return self.items

  def __setstate__(self, items: Any) -> None:
    self.items = items
    self._hash = hash(items)

  def __repr__(self) -> str:
    return f"Private({', '.join(str(k) for k, _ in self.items)})"


class Side:
  """One library's vocabulary: how its objects are read and made (see
  ``_nnx_side.NNX`` and ``_flax_side.FLAX``)."""

  name: str
  wrapper: Any  # this library's Module holding one of the other library's Modules

  def kind(self, x: Any) -> int | None:
    """``VAR``, ``LIST``, ``DICT``, ``SEQ``, ``MODULE``, or None for other values."""
    raise NotImplementedError

  def items(self, obj: Any) -> tuple[list[tuple[Any, Any, bool]], list[tuple[str, Any]]]:
    """``([(key, value, is_data)], private)`` of a Module that is not a wrapper."""
    raise NotImplementedError

  def make(self, cls: type, private: tuple) -> Any:
    """An empty Module of ``cls`` to be filled by :meth:`fill`."""
    raise NotImplementedError

  def fill(self, obj: Any, items: list[tuple[str, Any]], private: tuple) -> None:
    raise NotImplementedError

  def variable(self, v: Any) -> Any:
    """This library's Variable with the other library's ``v``'s value and metadata."""
    raise NotImplementedError

  def value(self, v: Any) -> Any:
    raise NotImplementedError

  def set_value(self, v: Any, value: Any) -> None:
    raise NotImplementedError

  def container(self, kind: int) -> Any:
    raise NotImplementedError

  def contents(self, c: Any) -> list[tuple[Any, Any, bool]]:
    """``[(key, value, is_data)]`` of a container (indices for lists and Sequentials)."""
    raise NotImplementedError

  def refill(self, c: Any, items: list[tuple[Any, Any]]) -> None:
    """Makes the container hold ``items`` (empty it first if it holds some)."""
    raise NotImplementedError

  def new_wrapper(self, cls: type) -> Any:
    raise NotImplementedError

  def wrapped(self, w: Any) -> tuple[type, tuple, list[tuple[str, Any]]]:
    """``(class, private, [(name, value)])`` of a wrapper."""
    raise NotImplementedError

  def set_wrapped(self, w: Any, name: str, value: Any, data: bool) -> None:
    raise NotImplementedError

  def del_wrapped(self, w: Any, name: str) -> None:
    raise NotImplementedError

  def set_private(self, w: Any, private: tuple) -> None:
    raise NotImplementedError

  def reserved(self, name: str) -> bool:
    """True if the wrapper class itself has an attribute ``name``."""
    return hasattr(self.wrapper, name)

  def snapshot(self, obj: Any) -> dict:
    """What :func:`sync` compares: the attributes of a Module right after it is made."""
    return dict(vars(obj))


class Record:
  """What a rebuild made: ``vars`` ``[(wrapper side's Variable, rebuilt Variable, value)]``
  and ``nodes`` ``[(wrapper or container, rebuilt object, snapshot)]``."""

  __slots__ = ("vars", "nodes")

  def __init__(self) -> None:
    self.vars: list[tuple[Any, Any, Any]] = []
    self.nodes: list[tuple[Any, Any, Any]] = []


def _tree(x: Any, side: Side, convert: Any) -> Any:
  """``x`` (no node itself) with the nodes inside it converted (lists, tuples, dicts
  and other JAX pytrees holding Variables or Modules)."""
  return jax.tree.map(
    lambda y: convert(y) if side.kind(y) is not None else y,
    x,
    is_leaf=lambda y: side.kind(y) is not None,
  )


def _is_array(x: Any) -> bool:
  return hasattr(x, "shape") and hasattr(x, "dtype")


def _checked(v: Any, src: Side, path: tuple) -> Any:
  """``v``, state of a Module or container that is no node itself: an array, or a
  pytree (whose other leaves are static parts of it, as both libraries hold them).

  Raises:
    FlaxConversionError: ``v`` is a lone value of another kind held as data (a
      Python number marked ``nnx.data``): the other library's state cannot hold it.
  """
  if v is not None and not _is_array(v) and jax.tree_util.treedef_is_leaf(jax.tree.structure(v)):
    raise FlaxConversionError(
      f"The {src.name} state holds a {describe(v)} at {fmt_path(path)}, neither a"
      " Variable nor an array, so it has no counterpart in the other library's state."
      " Fix: keep it in a Variable, or make it a static attribute."
    )
  return v


def wrap(x: Any, src: Side, dst: Side, memo: dict, path: tuple = ()) -> Any:
  """``x``, an object of ``src``'s library, in ``dst``'s (see the module docstring);
  ``path`` (where ``x`` is) is for error messages.

  Raises:
    FlaxConversionError: the state holds a value that is neither a Variable nor an
      array, or is under a name the wrapper cannot have (the path is named).
  """
  hit = memo.get(id(x))
  if hit is not None:
    return hit[0]
  k = src.kind(x)
  if k is None:
    return _tree(_checked(x, src, path), src, lambda y: wrap(y, src, dst, memo, path))
  if k == MODULE and isinstance(x, src.wrapper):  # (a wrapper: the object it holds)
    return unwrap(x, src, dst, memo, None)
  if k == VAR:
    out = dst.variable(x)
    memo[id(x)] = (out, x)
    return out
  if k in _CONTAINERS:
    out = dst.container(k)
    memo[id(x)] = (out, x)
    dst.refill(
      out,
      [
        (key, wrap(v, src, dst, memo, (*path, key)) if data else v)
        for key, v, data in src.contents(x)
      ],
    )
    return out
  w = dst.new_wrapper(type(x))
  memo[id(x)] = (w, x)
  items, private = src.items(x)
  for key, v, data in items:
    if not isinstance(key, str) or dst.reserved(key):
      if data:
        raise FlaxConversionError(
          f"The {describe(x)} holds state under {fmt_path((*path, key))}, a name the"
          f" {dst.wrapper.__name__} holding it cannot have as an attribute (it is not a"
          " string, or is an attribute of that class). Fix: rename the attribute."
        )
      private.append((key, v))
    else:
      dst.set_wrapped(w, key, wrap(v, src, dst, memo, (*path, key)) if data else v, data)
  dst.set_private(w, tuple(private))
  return w


def unwrap(x: Any, side: Side, inner: Side, memo: dict, rec: Record | None) -> Any:
  """The objects of ``inner``'s library that wrappers of ``side``'s library hold.

  ``x`` is an object of ``side``'s library; its wrappers become the Modules they
  hold, its Variables and containers ``inner``'s, and a Module of ``side``'s own a
  wrapper in ``inner``'s library. ``rec`` records what was made, for :func:`sync`.
  """
  hit = memo.get(id(x))
  if hit is not None:
    return hit[0]
  k = side.kind(x)
  if k is None:
    return _tree(x, side, lambda y: unwrap(y, side, inner, memo, rec))
  if k == MODULE and not isinstance(x, side.wrapper):
    return wrap(x, side, inner, memo)
  if k == VAR:
    out = inner.variable(x)
    memo[id(x)] = (out, x)
    if rec is not None:
      rec.vars.append((x, out, inner.value(out)))
    return out
  if k in _CONTAINERS:
    out = inner.container(k)
    memo[id(x)] = (out, x)
    inner.refill(out, [(key, unwrap(v, side, inner, memo, rec)) for key, v, _ in side.contents(x)])
    if rec is not None:
      rec.nodes.append((x, out, inner.contents(out)))
    return out
  cls, private, attrs = side.wrapped(x)
  obj = inner.make(cls, private)
  memo[id(x)] = (obj, x)
  items = [(key, unwrap(v, side, inner, memo, rec)) for key, v in attrs]
  inner.fill(obj, items + list(private), private)
  if rec is not None:
    rec.nodes.append((x, obj, inner.snapshot(obj)))
  return obj


def _same(a: list, b: list) -> bool:
  return len(a) == len(b) and all(x[1] is y[1] and x[0] == y[0] for x, y in zip(a, b))


def sync(rec: Record, side: Side, inner: Side) -> None:
  """Writes back what running ``inner``'s code changed in a rebuilt graph: new values
  into ``side``'s Variables, new or replaced attributes into the wrappers."""
  for mine, made, old in rec.vars:
    new = inner.value(made)
    if new is not old:
      side.set_value(mine, new)
  back: dict | None = None
  for mine, made, before in rec.nodes:
    if isinstance(before, list):  # a container
      now = inner.contents(made)
      if _same(now, before):
        continue
      back = back if back is not None else _back(rec)
      side.refill(mine, [(key, wrap(v, inner, side, back) if data else v) for key, v, data in now])
      continue
    now_vars = vars(made)
    if len(now_vars) == len(before) and all(
      now_vars.get(k, before) is v for k, v in before.items()
    ):
      continue
    back = back if back is not None else _back(rec)
    _sync_module(mine, made, side, inner, back)


def _back(rec: Record) -> dict:
  back = {id(made): (mine, made) for mine, made, _ in rec.nodes}
  back.update((id(made), (mine, made)) for mine, made, _ in rec.vars)
  return back


def _sync_module(w: Any, obj: Any, side: Side, inner: Side, back: dict) -> None:
  _, _, attrs = side.wrapped(w)
  held = dict(attrs)
  items, private = inner.items(obj)
  seen = set()
  for key, v, data in items:
    if not isinstance(key, str) or side.reserved(key):
      private.append((key, v))
      continue
    seen.add(key)
    new = wrap(v, inner, side, back) if data else v
    if held.get(key, back) is not new:
      side.set_wrapped(w, key, new, data)
  for key in held:
    if key not in seen:
      side.del_wrapped(w, key)
  side.set_private(w, tuple(private))


def call(w: Any, side: Side, inner: Side, method: str, args: tuple, kwargs: dict) -> Any:
  """Runs ``method`` of the object the wrapper ``w`` holds, on its current values,
  and keeps what it changed (nothing, if it raises)."""
  rec = Record()
  obj = unwrap(w, side, inner, {}, rec)
  out = getattr(obj, method)(*args, **kwargs)
  sync(rec, side, inner)
  return out

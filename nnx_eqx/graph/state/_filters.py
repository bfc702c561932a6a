"""Filters: declarative selections of graph leaves.

A filter is turned into a predicate ``(path, value) -> bool`` by
:func:`to_predicate`. ``path`` is a tuple of attribute names (``str``) and
sequence indices (``int``); ``value`` is the leaf: a ``Variable`` or a raw
array. Accepted literals, as in flax.nnx:

* a type: ``isinstance(value, T)`` (so ``nnx.Variable`` matches every Variable);
* ``...`` or ``True``: everything; ``None`` or ``False``: nothing;
* a ``str``: Variables whose ``tag`` metadata or ``collection`` equals it;
* a callable ``(path, value) -> bool``;
* a ``tuple``/``list`` of filters: any of them matches;
* the combinators below.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable

import jax
import numpy as np

from .._errors import FilterError, UnknownFilterError, flax_type_note
from ..variables._variables import Variable
from ._foreign_libraries import foreign_filter

Predicate = Callable[[tuple, typing.Any], bool]
Filter = typing.Any


def to_predicate(filter: Filter) -> Predicate:
  """Turns a filter literal into a ``(path, value) -> bool`` predicate.

  Args:
    filter: a filter literal (see the module docstring).

  Returns:
    A predicate over ``(path, value)``.

  A flax.nnx Variable class stands for nnx_eqx's paired class (``flax.nnx.Param``
  -> ``nnx.Param``, a user subclass -> its nnx_eqx counterpart).

  Raises:
    UnknownFilterError: if ``filter`` is none of the accepted forms, or is a class of
      flax other than a Variable class (a flax Module class, say).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> pred = nnx.filters.to_predicate((nnx.Param, nnx.BatchStat))
    >>> pred(("w",), nnx.Param(jnp.ones(1))), pred(("c",), nnx.Cache(jnp.ones(1)))
    (True, False)
  """
  if isinstance(filter, _BaseFilter):
    return filter
  filter = foreign_filter(filter)  # a flax.nnx Variable class: nnx_eqx's paired class
  if isinstance(filter, type):
    note = flax_type_note(filter, "an nnx_eqx Variable type")
    if note is not None:
      raise UnknownFilterError(f"Invalid filter: {note}")
    return OfType(filter)
  if filter is Ellipsis or filter is True:
    return Everything()
  if filter is None or filter is False:
    return Nothing()
  if isinstance(filter, str):
    return WithTag(filter)
  if isinstance(filter, (tuple, list)):
    return Any(*filter)
  if callable(filter):
    return filter
  raise UnknownFilterError(
    f"Invalid filter {filter!r} of type {type(filter).__name__}. A filter is a"
    " Variable type (nnx.Param), `...`/True, None/False, a tag string, a"
    " predicate `(path, value) -> bool`, a tuple of filters, or one of"
    " nnx.All/Any/Not/Everything/Nothing/OfType/PathContains/WithTag."
  )


class _BaseFilter:
  def __call__(self, path: tuple, value: typing.Any) -> bool:  # pragma: no cover
    raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class OfType(_BaseFilter):
  """Matches values that are instances of ``type`` (subclasses included).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.OfType(nnx.Param)((), nnx.Param(jnp.ones(1)))
    True
  """

  type: type

  def __call__(self, path, value):
    return isinstance(value, self.type)

  def __repr__(self):
    return f"OfType({self.type.__name__})"


@dataclasses.dataclass(frozen=True)
class WithTag(_BaseFilter):
  """Matches Variables whose ``tag`` metadata, or class ``collection``, equals ``tag``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.WithTag("params")((), nnx.Param(jnp.ones(1)))
    True
  """

  tag: str

  def __call__(self, path, value):
    if not isinstance(value, Variable):
      return False
    return (
      value._metadata.get("tag") == self.tag or getattr(type(value), "collection", None) == self.tag
    )


@dataclasses.dataclass(frozen=True)
class PathContains(_BaseFilter):
  """Matches leaves whose path contains ``key``.

  Args:
    key: a path part (attribute name or sequence index).
    exact: True (default) matches a path part equal to ``key``; False matches
      any path part whose string form contains ``str(key)`` as a substring.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.PathContains("l1")(("l1", "kernel"), None)
    True
    >>> nnx.PathContains("back", exact=False)(("backbone2", "bias"), None)
    True
  """

  key: typing.Any
  exact: bool = True

  def __call__(self, path, value):
    if self.exact:
      return self.key in path
    needle = str(self.key)
    return any(needle in str(part) for part in path)


class Any(_BaseFilter):
  """Matches if any of the given filters matches (a tuple of filters means the same).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.Any(nnx.Param, nnx.Cache)((), nnx.Cache(jnp.ones(1)))
    True
  """

  def __init__(self, *filters: Filter):
    self.filters = tuple(filters)
    self.predicates = tuple(to_predicate(f) for f in filters)

  def __call__(self, path, value):
    return any(p(path, value) for p in self.predicates)

  def __repr__(self):
    return f"Any({', '.join(map(_name, self.filters))})"

  def __eq__(self, other):
    return isinstance(other, Any) and self.predicates == other.predicates

  def __hash__(self):
    return hash(("Any", self.predicates))


class All(_BaseFilter):
  """Matches if all of the given filters match.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> plain = nnx.All(nnx.Variable, nnx.Not(nnx.Param))
    >>> plain((), nnx.Variable(jnp.ones(1))), plain((), nnx.Param(jnp.ones(1)))
    (True, False)
  """

  def __init__(self, *filters: Filter):
    self.filters = tuple(filters)
    self.predicates = tuple(to_predicate(f) for f in filters)

  def __call__(self, path, value):
    return all(p(path, value) for p in self.predicates)

  def __repr__(self):
    return f"All({', '.join(map(_name, self.filters))})"

  def __eq__(self, other):
    return isinstance(other, All) and self.predicates == other.predicates

  def __hash__(self):
    return hash(("All", self.predicates))


class Not(_BaseFilter):
  """Matches what ``filter`` does not match.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.Not(nnx.Param)((), nnx.BatchStat(jnp.ones(1)))
    True
  """

  def __init__(self, filter: Filter):
    self.filter = filter
    self.predicate = to_predicate(filter)

  def __call__(self, path, value):
    return not self.predicate(path, value)

  def __repr__(self):
    return f"Not({_name(self.filter)})"

  def __eq__(self, other):
    return isinstance(other, Not) and self.predicate == other.predicate

  def __hash__(self):
    return hash(("Not", self.predicate))


class Everything(_BaseFilter):
  """Matches every leaf (the same as ``...``).

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.Everything()((), 1)
    True
  """

  def __call__(self, path, value):
    return True

  def __repr__(self):
    return "Everything()"

  def __eq__(self, other):
    return isinstance(other, Everything)

  def __hash__(self):
    return hash(Everything)


class Nothing(_BaseFilter):
  """Matches no leaf (the same as ``None``).

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.Nothing()((), 1)
    False
  """

  def __call__(self, path, value):
    return False

  def __repr__(self):
    return "Nothing()"

  def __eq__(self, other):
    return isinstance(other, Nothing)

  def __hash__(self):
    return hash(Nothing)


class PathIn(_BaseFilter):
  """Matches leaves whose full path is one of ``paths`` (as flax.nnx.PathIn).

  Example:
    >>> import nnx_eqx as nnx
    >>> f = nnx.filterlib.PathIn(("a", "kernel"), ("b", 0))
    >>> f(("a", "kernel"), None), f(("a",), None)
    (True, False)
    >>> f == nnx.filterlib.PathIn(("b", 0), ("a", "kernel"))
    True
  """

  def __init__(self, *paths: tuple):
    self.paths = frozenset(tuple(p) for p in paths)

  def __call__(self, path: tuple, x: typing.Any) -> bool:
    return tuple(path) in self.paths

  def __repr__(self) -> str:
    return f"PathIn({', '.join(map(repr, sorted(self.paths, key=repr)))})"

  def __eq__(self, other: object) -> bool:
    return isinstance(other, PathIn) and self.paths == other.paths

  def __hash__(self) -> int:
    return hash(("PathIn", self.paths))


def filters_to_predicates(filters: typing.Sequence[Filter]) -> tuple[Predicate, ...]:
  """Predicates for a sequence of filters, where ``...``/``True`` may only come last.

  Args:
    filters: the filters, e.g. ``(nnx.Param, ...)``.

  Returns:
    One predicate per filter.

  Raises:
    FilterError: if ``...`` or ``True`` comes before a filter that is not one of them.

  Example:
    >>> import nnx_eqx as nnx
    >>> preds = nnx.filterlib.filters_to_predicates((nnx.Param, ...))
    >>> preds[0]((), nnx.Param(1.0)), preds[1]((), 3)
    (True, True)
  """
  for i, f in enumerate(filters):
    if (f is ... or f is True) and not all(g is ... or g is True for g in filters[i + 1 :]):
      raise FilterError(
        f"`...` or `True` can only be the last filters, got {_name(f)} at index {i} of"
        f" {_name(tuple(filters))}. Fix: move it to the end."
      )
  return tuple(to_predicate(f) for f in filters)


def buffers(path: tuple, value: typing.Any) -> bool:
  """Matches raw arrays stored directly on a module (not wrapped in a Variable).

  Example:
    >>> import numpy as np, nnx_eqx as nnx
    >>> nnx.buffers(("x",), np.ones(2))
    True
  """
  return isinstance(value, (np.ndarray, jax.Array))


def _name(f) -> str:
  if isinstance(f, type):
    return f.__name__
  if f is Ellipsis:
    return "..."
  if isinstance(f, tuple | list):  # a tuple of filters reads as written: (Param, ...)
    inner = ", ".join(map(_name, f))
    return f"({inner},)" if isinstance(f, tuple) and len(f) == 1 else f"({inner})"
  return repr(f)


def filter_name(f: Filter) -> str:
  """A short human-readable name for a filter, used in error messages."""
  return _name(f)

"""``nnx.reprlib`` (flax.nnx's module path): the ``Representable`` repr protocol.

A class opts in by subclassing ``Representable`` and writing ``__nnx_repr__``, a
generator that yields one ``Object`` (how the whole object is framed) and then one
``Attr`` per field; ``get_repr`` renders it, nesting other ``Representable`` values
with indentation. This follows flax.nnx's protocol, so third-party classes written
for flax's reprs render the same here. nnx_eqx's own Modules, Variables and States
render through ``nnx_eqx/graph/api/_repr.py`` instead (compact arrays, shared-reference
markers); this module is for user classes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections import abc
from typing import Any, NamedTuple

from . import visualization as _visualization


def supports_color() -> bool:
  """Whether the terminal (or an IPython session) shows ANSI colours.

  Returns:
    True when stdout is a colour-capable tty or IPython is running.

  Raises:
    Nothing: a missing IPython counts as "not running".

  Example:
    >>> from nnx_eqx import reprlib
    >>> isinstance(reprlib.supports_color(), bool)
    True
  """
  tty = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
  return (
    tty and (sys.platform != "win32" or "ANSICON" in os.environ)
  ) or _visualization.in_ipython()


class Color(NamedTuple):
  """The ANSI escape codes ``get_repr`` puts around each kind of token.

  Example:
    >>> from nnx_eqx import reprlib
    >>> reprlib.NO_COLOR.TYPE == ""
    True
  """

  TYPE: str
  ATTRIBUTE: str
  SEP: str
  PAREN: str
  COMMENT: str
  INT: str
  STRING: str
  FLOAT: str
  BOOL: str
  NONE: str
  END: str


NO_COLOR = Color(*([""] * len(Color._fields)))
"""No colours: what ``repr()`` of a ``Representable`` always uses."""


def _rgb(r: int, g: int, b: int) -> str:
  return f"\x1b[38;2;{r};{g};{b}m"


_THEME = Color(
  TYPE=_rgb(79, 201, 177),
  ATTRIBUTE=_rgb(156, 220, 254),
  SEP=_rgb(212, 212, 212),
  PAREN=_rgb(255, 213, 3),
  COMMENT=_rgb(105, 105, 105),
  INT=_rgb(182, 207, 169),
  STRING=_rgb(207, 144, 120),
  FLOAT=_rgb(182, 207, 169),
  BOOL=_rgb(86, 156, 214),
  NONE=_rgb(86, 156, 214),
  END="\x1b[0m",
)
COLOR = _THEME if supports_color() else NO_COLOR
"""The colours ``str()`` uses: a VS Code-like theme on colour terminals, else none."""

MAX_DEPTH: int | None = None
"""Nesting depth beyond which ``get_repr`` prints ``...`` for the fields (None: no limit)."""


@dataclasses.dataclass
class ReprContext(threading.local):
  """Per-thread rendering state: the colours in use and the nesting depth.

  Example:
    >>> from nnx_eqx import reprlib
    >>> reprlib.REPR_CONTEXT.depth
    0
  """

  current_color: Color = COLOR
  depth: int = 0


REPR_CONTEXT = ReprContext()
"""The ``ReprContext`` of the current thread."""


def colorized(x: Any, /) -> str:
  """``repr`` of a Python value, coloured by token kind and recursing into containers.

  Args:
    x: any value; ``Representable`` values render through ``get_repr``.

  Returns:
    The text, with the current context's colour codes (none under ``repr()``).

  Raises:
    Whatever ``repr(x)`` raises for a value of another type.

  Example:
    >>> from nnx_eqx import reprlib
    >>> reprlib.colorized({"a": (1,), "b": [None, 2.5, int]})
    "{'a': (1,), 'b': [None, 2.5, int]}"
  """
  c = REPR_CONTEXT.current_color
  if isinstance(x, (list, tuple, set)):
    inner = ", ".join(colorized(i) for i in x)
    if isinstance(x, tuple) and len(x) == 1:
      inner += ","
    left, right = "[]" if isinstance(x, list) else "()" if isinstance(x, tuple) else "{}"
    return f"{c.PAREN}{left}{c.END}{inner}{c.PAREN}{right}{c.END}"
  if isinstance(x, dict):
    inner = ", ".join(f"{c.STRING}{k!r}{c.END}: {colorized(v)}" for k, v in x.items())
    return f"{c.PAREN}{{{c.END}{inner}{c.PAREN}}}{c.END}"
  if isinstance(x, type):
    return f"{c.TYPE}{x.__name__}{c.END}"
  for kind, color in ((bool, c.BOOL), (int, c.INT), (str, c.STRING), (float, c.FLOAT)):
    if isinstance(x, kind):
      return f"{color}{x if kind is not str else repr(x)}{c.END}"
  if x is None:
    return f"{c.NONE}None{c.END}"
  if isinstance(x, Representable):
    return get_repr(x)
  return repr(x)


@dataclasses.dataclass
class Object:
  """How ``get_repr`` frames an object: the first item ``__nnx_repr__`` yields.

  Attributes:
    type: the class (its name is printed) or the text to print.
    start, end: the brackets around the fields.
    kv_sep: between a field's key and value.
    indent: prefix of each field line (multi-line layout).
    empty_repr: printed between the brackets when there are no fields.
    comment: printed after ``start`` in the multi-line layout.
    same_line: put all fields on one line, separated by ``", "``.

  Example:
    >>> from nnx_eqx import reprlib
    >>> reprlib.Object("Point", same_line=True).elem_sep
    ', '
  """

  type: str | type
  start: str = "("
  end: str = ")"
  kv_sep: str = "="
  indent: str = "  "
  empty_repr: str = ""
  comment: str = ""
  same_line: bool = False

  @property
  def elem_sep(self) -> str:
    """The separator between fields: ``", "`` on one line, else ``",\\n"``."""
    return ", " if self.same_line else ",\n"


@dataclasses.dataclass
class Attr:
  """One field of a ``Representable``: the items after the ``Object``.

  Attributes:
    key: the field name.
    value: the value (rendered with ``colorized``) or, with ``use_raw_value``, the text.
    start, end: printed around the whole field.
    use_raw_value: print ``value`` as given (it must be a string).
    use_raw_key: print ``key`` without the attribute colour.

  Example:
    >>> from nnx_eqx import reprlib
    >>> reprlib.Attr("x", 1).use_raw_value
    False
  """

  key: str
  value: Any
  start: str = ""
  end: str = ""
  use_raw_value: bool = False
  use_raw_key: bool = False


class Representable:
  """Base class of objects rendered by ``get_repr`` (flax.nnx's repr protocol).

  Subclasses write ``__nnx_repr__``; ``repr()`` renders without colours and
  ``str()`` with the current context's colours.

  Example:
    >>> from nnx_eqx import reprlib
    >>> class Point(reprlib.Representable):
    ...   def __init__(self, x, y):
    ...     self.x, self.y = x, y
    ...   def __nnx_repr__(self):
    ...     yield reprlib.Object(type(self))
    ...     yield reprlib.Attr("x", self.x)
    ...     yield reprlib.Attr("y", self.y)
    >>> print(repr(Point(1, Point(2, 3))))
    Point(
      x=1,
      y=Point(
        x=2,
        y=3
      )
    )
  """

  __slots__ = ()

  def __nnx_repr__(self) -> abc.Iterator[Object | Attr]:
    """Yields an ``Object``, then an ``Attr`` per field.

    Raises:
      NotImplementedError: unless a subclass defines it.
    """
    raise NotImplementedError(f"{type(self).__name__} must define __nnx_repr__")

  def __repr__(self) -> str:
    saved = REPR_CONTEXT.current_color
    REPR_CONTEXT.current_color = NO_COLOR
    try:
      return get_repr(self)
    finally:
      REPR_CONTEXT.current_color = saved

  def __str__(self) -> str:
    return get_repr(self)


def _render_attr(elem: Any, frame: Object, c: Color) -> str:
  if not isinstance(elem, Attr):
    raise TypeError(f"__nnx_repr__ must yield Attr after the Object, got {type(elem).__name__}")
  text = elem.value if elem.use_raw_value else colorized(elem.value)
  text = text.replace("\n", "\n" + frame.indent)
  key = elem.key if elem.use_raw_key else f"{c.ATTRIBUTE}{elem.key}{c.END}"
  indent = "" if frame.same_line else frame.indent
  return f"{indent}{elem.start}{key}{c.SEP}{frame.kv_sep}{c.END}{text}{elem.end}"


def get_repr(obj: Representable) -> str:
  """Renders a ``Representable`` from the items its ``__nnx_repr__`` yields.

  Args:
    obj: the object.

  Returns:
    ``Type(`` + fields + ``)``, one field per line unless ``Object.same_line``.

  Raises:
    TypeError: if ``obj`` is not a ``Representable``, or its ``__nnx_repr__`` does not
      yield an ``Object`` first and ``Attr`` items after it.

  Example:
    >>> from nnx_eqx import reprlib
    >>> class Pair(reprlib.Representable):
    ...   def __nnx_repr__(self):
    ...     yield reprlib.Object("Pair", same_line=True)
    ...     yield reprlib.Attr("a", 1)
    ...     yield reprlib.Attr("b", "x")
    >>> reprlib.get_repr(Pair())
    "Pair(a=1, b='x')"
  """
  if not isinstance(obj, Representable):
    raise TypeError(f"get_repr: {type(obj).__name__} is not a reprlib.Representable")
  REPR_CONTEXT.depth += 1
  try:
    c = REPR_CONTEXT.current_color
    items = obj.__nnx_repr__()
    frame = next(items)
    if not isinstance(frame, Object):
      raise TypeError(
        f"{type(obj).__name__}.__nnx_repr__ must yield a reprlib.Object first,"
        f" got {type(frame).__name__}"
      )
    too_deep = MAX_DEPTH is not None and REPR_CONTEXT.depth > MAX_DEPTH
    fields = "..." if too_deep else frame.elem_sep.join(_render_attr(e, frame, c) for e in items)
    comment = ""
    if not fields:
      body = frame.empty_repr
    elif frame.same_line or too_deep:
      body = fields
    else:
      body, comment = "\n" + fields + "\n", f"{c.COMMENT}{frame.comment}{c.END}"
    name = frame.type if isinstance(frame.type, str) else frame.type.__name__
    name = f"{c.TYPE}{name}{c.END}" if name else ""
    start = f"{c.PAREN}{frame.start}{c.END}" if frame.start else ""
    end = f"{c.PAREN}{frame.end}{c.END}" if frame.end else ""
    return f"{name}{start}{comment}{body}{end}"
  finally:
    REPR_CONTEXT.depth -= 1


def _mapping_items(obj: Any, mapping: abc.Mapping) -> abc.Iterator[Object | Attr]:
  yield Object(type=type(obj), kv_sep=": ", start="({", end="})")
  for key, value in mapping.items():
    yield Attr(colorized(key), value, use_raw_key=True)


def _sequence_items(obj: Any, sequence: abc.Sequence) -> abc.Iterator[Object | Attr]:
  yield Object(type=type(obj), kv_sep="", start="([", end="])")
  for value in sequence:
    yield Attr("", value, use_raw_key=True)


class MappingReprMixin(Representable):
  """Renders a Mapping subclass as ``Type({key: value, ...})``, one entry per line.

  Example:
    >>> from nnx_eqx import reprlib
    >>> class Table(reprlib.MappingReprMixin, dict): ...
    >>> print(repr(Table(a=1)))
    Table({
      'a': 1
    })
  """

  def __nnx_repr__(self) -> abc.Iterator[Object | Attr]:
    return _mapping_items(self, self)  # type: ignore[arg-type]


@dataclasses.dataclass(repr=False)
class PrettyMapping(Representable):
  """Wraps a mapping so it renders as ``PrettyMapping({key: value, ...})``.

  Example:
    >>> from nnx_eqx import reprlib
    >>> print(repr(reprlib.PrettyMapping({"a": [1, 2]})))
    PrettyMapping({
      'a': [1, 2]
    })
  """

  mapping: abc.Mapping

  def __nnx_repr__(self) -> abc.Iterator[Object | Attr]:
    return _mapping_items(self, self.mapping)


class SequenceReprMixin(Representable):
  """Renders a Sequence subclass as ``Type([item, ...])``, one item per line.

  Example:
    >>> from nnx_eqx import reprlib
    >>> class Row(reprlib.SequenceReprMixin, list): ...
    >>> print(repr(Row([1, "x"])))
    Row([
      1,
      'x'
    ])
  """

  def __nnx_repr__(self) -> abc.Iterator[Object | Attr]:
    return _sequence_items(self, self)  # type: ignore[arg-type]


@dataclasses.dataclass(repr=False)
class PrettySequence(Representable):
  """Wraps a sequence so it renders as ``PrettySequence([item, ...])``.

  Example:
    >>> from nnx_eqx import reprlib
    >>> print(repr(reprlib.PrettySequence((1, None))))
    PrettySequence([
      1,
      None
    ])
  """

  sequence: abc.Sequence

  def __nnx_repr__(self) -> abc.Iterator[Object | Attr]:
    return _sequence_items(self, self.sequence)

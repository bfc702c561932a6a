"""``nnx.Pytree``: the mutable base of Module, with flax 0.12's data/static markers.

An attribute is *data* (a pytree leaf or graph node) or *static* (part of the
GraphDef). By default this follows the value: arrays, Variables, graph nodes
and types given to :func:`register_data_type` are data; everything else is
static. ``nnx.data(v)`` / ``nnx.static(v)`` on assignment, the same calls as
dataclass field specifiers (``a: int = nnx.data()``), or the annotations
``nnx.Data[T]`` / ``nnx.Static[T]`` fix an attribute's kind:

* a data-marked attribute holding a plain Python value (``nnx.data(42)``) is a
  leaf (``jax.tree.leaves`` returns ``42``);
* a static-marked attribute must not hold data: assigning an array, Variable
  or Module (alone or inside a list/dict) raises :class:`PytreeDataError`.

A marker sticks to the attribute until another marker replaces it. The marks
of Python-value data leaves live on the object; an object rebuilt by
``nnx.merge`` or ``jax.tree.unflatten`` keeps the values but not the marks.
"""

from __future__ import annotations

import dataclasses
from abc import ABCMeta
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import jax

from .. import reprlib
from ..graph import _version
from ..graph._errors import NnxError
from ..graph._sentinel import MISSING as _MISSING
from ..graph.api import _functional as _graph
from ..graph.api._functional import NodeImpl, is_node
from ..graph.api._repr import module_repr, treescope_module
from ..graph.state._state import State
from ..graph.tracing._traces import check_trace, current_trace
from ..graph.walk import _node_types
from ..graph.walk._pytree_nodes import is_generic_pytree, is_ref
from ..tracers import TraceState

A = TypeVar("A")
T = TypeVar("T", bound=type)

DATA_TAG = "__data__"
STATIC_TAG = "__static__"
Data = Annotated[A, DATA_TAG]
"""``a: nnx.Data[int]`` marks attribute ``a`` of every instance as data."""

CONTAINERS: dict[type, Callable[[Any], Any]] = {}
"""``{list: nnx.List, dict: nnx.Dict}``: the container Modules that plain lists and
dicts of nodes become on a Module. ``_containers`` registers them here."""


class PytreeDataError(NnxError, ValueError):
  """Data (an array, Variable or Module) was put into a static attribute of a Pytree."""


class DataLeaf:
  """A data-marked plain Python value (``nnx.data(42)``) as a graph leaf.

  A Pytree lists such an attribute's value boxed in a ``DataLeaf``; the graph
  walker sees a registered leaf type and reads the leaf itself from the
  object's ``__dict__`` (the raw value), and rebuilding a Pytree from its
  children unwraps it again. ``nnx.List`` stores the box itself (its reads
  unwrap); as a JAX pytree the box has the value as its one leaf."""

  __slots__ = ("value",)

  def __init__(self, value):
    self.value = value

  def __repr__(self) -> str:
    return repr(self.value)


_node_types.register_leaf_type(DataLeaf)
jax.tree_util.register_pytree_node(
  DataLeaf, lambda b: ((b.value,), None), lambda _, children: DataLeaf(children[0])
)


def _unwrap(v):
  return v.value if type(v) is DataLeaf else v


def _marker(value: Any, is_static: bool, kwargs: dict) -> Any:
  name = "static" if is_static else "data"
  if value is not _MISSING and kwargs:
    raise TypeError(
      f"nnx.{name}() takes either one positional value or dataclass field keywords,"
      f" not both. Fix: call nnx.{name}(value) on assignment or nnx.{name}(default=...)"
      " in a class body."
    )
  metadata = dict(kwargs.pop("metadata", None) or {})
  if "static" in metadata:
    raise PytreeDataError(
      f"nnx.{name}(metadata=...) may not contain the key 'static'. Fix: rename that entry."
    )
  metadata.update(nnx_value=value, static=is_static)
  return dataclasses.field(metadata=metadata, **kwargs)


def data(value: Any = _MISSING, /, **kwargs: Any) -> Any:
  """Marks an attribute as pytree data.

  ``self.a = nnx.data(v)`` stores ``v`` and makes ``a`` data; in a class body
  ``a: int = nnx.data()`` (or ``nnx.data(default=...)``, any
  ``dataclasses.field`` keyword) marks ``a`` for every instance.

  Args:
    value: the value to assign (leave out in a class body).
    **kwargs: ``dataclasses.field`` keywords, for class-body use.

  Returns:
    A marker (a ``dataclasses.Field``) that the attribute assignment unwraps.

  Raises:
    TypeError: if both a value and field keywords are given.
    PytreeDataError: if ``metadata`` contains the reserved key ``"static"``.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> class Foo(nnx.Pytree):
    ...   def __init__(self):
    ...     self.count = nnx.data(42)
    ...     self.name = "hello"
    >>> jax.tree.leaves(Foo())
    [42]
  """
  return _marker(value, False, kwargs)


def static(value: Any = _MISSING, /, **kwargs: Any) -> Any:
  """Marks an attribute as static: it may never hold arrays, Variables or Modules.

  Args:
    value: the value to assign (leave out in a class body).
    **kwargs: ``dataclasses.field`` keywords, for class-body use.

  Returns:
    A marker (a ``dataclasses.Field``) that the attribute assignment unwraps.

  Raises:
    TypeError: if both a value and field keywords are given.
    PytreeDataError: at assignment, if the value contains data (the attribute
      is named); or if ``metadata`` contains the reserved key ``"static"``.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Foo(nnx.Pytree):
    ...   def __init__(self):
    ...     self.w = jnp.ones(2)
    ...     self.size = nnx.static(2)
    >>> len(jax.tree.leaves(Foo()))
    1
  """
  return _marker(value, True, kwargs)


_DATA_TYPES: set[type] = set()


def register_data_type(type_: T, /) -> T:
  """Registers a type whose instances are pytree data (leaves) on a Pytree.

  Args:
    type_: the class; usable as a decorator.

  Returns:
    ``type_`` itself.

  Raises:
    TypeError: never for a class; the registration is global.

  Example:
    >>> import dataclasses, jax, nnx_eqx as nnx
    >>> @nnx.register_data_type
    ... @dataclasses.dataclass(frozen=True)
    ... class Tag:
    ...   value: int
    >>> m = nnx.Module(); m.tag = Tag(1)
    >>> jax.tree.leaves(m)
    [Tag(value=1)]
  """
  _DATA_TYPES.add(type_)
  _node_types.register_leaf_type(type_)
  return type_


def is_data(value: Any, /) -> bool:
  """True for values that are pytree data on their own.

  These are arrays, ``jax.Ref`` values, Variables, graph nodes (Modules,
  Pytrees, Rngs) and registered data types; lists, dicts, other JAX pytrees and
  plain Python values are not.

  Raises:
    TypeError: never.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.is_data(jnp.ones(1)), nnx.is_data(nnx.Param(1.0)), nnx.is_data([jnp.ones(1)])
    (True, True, False)
  """
  return (
    is_node(value)
    or isinstance(value, _node_types.LEAF_TYPES)
    or type(value) in _DATA_TYPES
    or is_ref(value)
  )


def _contains(value: Any, found: Callable[[Any], bool]) -> bool:
  """Whether ``found`` holds for ``value`` or anything in its lists/tuples/dicts."""
  stack = [value]  # explicit: containers may nest deeper than the recursion limit
  while stack:
    value = stack.pop()
    if found(value):
      return True
    if isinstance(value, (list, tuple)):
      stack.extend(value)
    elif isinstance(value, dict):
      stack.extend(value.values())
  return False


def _has_data(value: Any) -> bool:
  return _contains(value, is_data)


def _is_marker(x: Any) -> bool:
  return type(x) is dataclasses.Field and "nnx_value" in x.metadata


def _containerize(value):
  """Lists/dicts that hold nodes become nnx.List/nnx.Dict, so that mutating them
  is seen as a structural change (keeping graph caches correct).

  Nested lists/dicts are converted innermost first with an explicit stack, so
  each wrapper meets converted items and nesting depth is not limited."""
  if CONTAINERS.get(type(value)) is None:
    return value
  order = []  # the plain lists/dicts inside ``value``, parents before children
  stack = [value]
  while stack:
    v = stack.pop()
    if CONTAINERS.get(type(v)) is not None:
      order.append(v)
      stack.extend(v.values() if type(v) is dict else v)
  done: dict[int, Any] = {}  # id -> converted container (or itself, if it holds no data)

  def conv(x):
    return done.get(id(x), x) if type(x) in CONTAINERS else x

  for v in reversed(order):
    if type(v) is dict:
      items = {k: conv(x) for k, x in v.items()}
      data = any(is_data(x) for x in items.values())
    else:
      items = [conv(x) for x in v]
      data = any(is_data(x) for x in items)
    done[id(v)] = CONTAINERS[type(v)](items) if data else v
  return done[id(value)]


def _has_marker(value: Any) -> bool:
  """Whether a list/tuple/dict holds an ``nnx.data``/``nnx.static`` marker (at any depth)."""
  return _contains(value, _is_marker)


def unwrap_marker(value: Any) -> tuple[Any, bool | None]:
  """``(value, True/False)`` for an ``nnx.data``/``nnx.static`` marker, else ``(value, None)``."""
  if type(value) is dataclasses.Field and "nnx_value" in value.metadata:
    return value.metadata["nnx_value"], not value.metadata["static"]
  return value, None


def _annotation_kind(annotation: Any) -> bool | None:
  if isinstance(annotation, str):
    for prefix, kind in (("Data[", True), ("Static[", False)):
      if annotation.startswith((prefix, "nnx." + prefix)):
        return kind
    return None
  tags = getattr(annotation, "__metadata__", ())
  return True if DATA_TAG in tags else False if STATIC_TAG in tags else None


def _class_fields(cls: type) -> dict[str, bool]:
  fields: dict[str, bool] = {}
  for base in reversed(cls.__mro__[1:]):
    fields.update(getattr(base, "_nnx_fields", {}))
  for name, annotation in cls.__dict__.get("__annotations__", {}).items():
    kind = _annotation_kind(annotation)
    if kind is not None:
      fields[name] = kind
  for name, value in cls.__dict__.items():
    # nnx.data()/nnx.static() specifiers, and plain dataclasses.field(metadata={"static": ...})
    if isinstance(value, dataclasses.Field) and "static" in value.metadata:
      fields[name] = not value.metadata["static"]
  return fields


def _static_data_error(obj: Any, name: str, value: Any, found: str) -> PytreeDataError:
  return PytreeDataError(
    f"{found} value of type '{type(value).__name__}' for static attribute {name!r}"
    f" of {type(obj).__name__}: static attributes may not hold arrays, Variables or"
    f" Modules. Fix: assign `obj.{name} = nnx.data(...)` to make the attribute data,"
    " remove the data values, or use nnx.List/nnx.Dict for containers of them."
  )


class PytreeMeta(ABCMeta):
  """Metaclass of :class:`Pytree`: after the outermost ``__init__`` returns, checks
  that no static attribute came to hold data (e.g. arrays appended to a plain list),
  as flax.nnx does (see :func:`check_pytree`)."""

  def __call__(cls, *args: Any, **kwargs: Any) -> Any:
    obj = super().__call__(*args, **kwargs)
    # (a __new__ may return another object, e.g. the seed-era Scan/Remat decorators)
    if cls._nnx_pytree and isinstance(obj, cls):  # type: ignore[attr-defined]
      _check_static_attributes(obj)
    return obj


ObjectMeta = PytreeMeta


def _check_static_attributes(obj: Any) -> None:
  d = obj.__dict__
  kinds = {**type(obj)._nnx_fields, **(d.get("_nnx_marks") or {})}
  # Modules take nodes in plain tuples on assignment (lists/dicts become nnx.List/Dict),
  # so there only a list/dict can have gained data after assignment.
  tuples_are_data = type(obj)._nnx_containerize
  for name, value in d.items():
    if name.startswith("_nnx_") or kinds.get(name) or is_data(value):
      continue
    if tuples_are_data and isinstance(value, tuple) and kinds.get(name) is None:
      continue
    if _has_data(value):
      raise PytreeDataError(
        f"Found unexpected data on value of type {type(value)} in static attribute {name!r}"
        f" of Pytree type {type(obj)} (data such as arrays was added to it after"
        f" assignment, e.g. appended to a list). Fix: assign `self.{name} ="
        f" nnx.data([...])` or use nnx.List/nnx.Dict, or remove the data values."
      )


def has_data(value: Any, /) -> list[Any]:
  """The data leaves (arrays, Variables, graph nodes) found in ``value``, as in flax.nnx.

  Args:
    value: any value; lists, tuples, dicts and pytrees are searched.

  Returns:
    A list of the data values found (empty when ``value`` holds none).

  Raises:
    TypeError: never.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> len(nnx.has_data([1, jnp.ones(2), {"a": nnx.Param(1.0)}])), nnx.has_data("x")
    (2, [])
  """
  seen: set[int] = set()

  def is_leaf(x: Any) -> bool:
    if id(x) in seen:
      return True
    seen.add(id(x))
    return is_data(x)

  return [x for x in jax.tree.leaves(value, is_leaf=is_leaf) if is_data(x)]


def check_pytree(pytree: Any) -> None:
  """Checks every attribute of a Pytree: static attributes must hold no data.

  Pytrees run this after ``__init__``; call it after mutating containers held
  in static attributes.

  Args:
    pytree: an ``nnx.Pytree`` (or Module).

  Raises:
    TypeError: if ``pytree`` is not a Pytree.
    PytreeDataError: naming the static attribute that holds data.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Foo(nnx.Pytree):
    ...   def __init__(self):
    ...     self.names = []
    >>> foo = Foo()
    >>> foo.names.append(jnp.ones(1))
    >>> try:
    ...   nnx.check_pytree(foo)
    ... except nnx.PytreeDataError as e:
    ...   print(str(e)[:81])
    Found unexpected data on value of type <class 'list'> in static attribute 'names'
  """
  if not isinstance(pytree, Pytree):
    raise TypeError(f"check_pytree expects an nnx.Pytree, got {type(pytree).__name__}.")
  _check_static_attributes(pytree)


class PytreeState(reprlib.Representable):
  """flax.nnx's record of a Pytree's bookkeeping, read as ``obj._pytree__state``.

  ``trace_state`` is the :class:`~nnx_eqx.tracers.TraceState` of the JAX trace the
  object belongs to (the trace it was created or rebuilt in): its ``is_valid()`` says
  whether the object's attributes may be set now. ``initializing`` and ``is_setup``
  are the flags flax's Linen bridge keeps for lazily initialised modules; nnx_eqx has
  no such modules, so a Pytree's record has both False.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> m = nnx.Module()
    >>> state = m._pytree__state
    >>> state.trace_state.is_valid(), state.initializing, state.is_setup
    (True, False, False)
    >>> inside = []
    >>> _ = jax.jit(lambda: inside.append(m._pytree__state.trace_state.is_valid()))()
    >>> inside
    [False]
  """

  __slots__ = ("_trace_state", "_initializing", "_is_setup")

  def __init__(self, initializing: bool = False, is_setup: bool = False):
    self._trace_state = TraceState()
    self._initializing = initializing
    self._is_setup = is_setup

  @property
  def trace_state(self) -> TraceState:
    """The JAX trace the object belongs to."""
    return self._trace_state

  @property
  def initializing(self) -> bool:
    """Whether a Linen-bridge module is being lazily initialised (False in nnx_eqx)."""
    return self._initializing

  @property
  def is_setup(self) -> bool:
    """Whether a Linen-bridge module has run its setup (False in nnx_eqx)."""
    return self._is_setup

  def __nnx_repr__(self):
    yield reprlib.Object(type(self))
    yield reprlib.Attr("trace_state", self._trace_state)


class Pytree(metaclass=PytreeMeta):
  """flax 0.12's ``nnx.Pytree``: a mutable object that is a graph node and a JAX pytree.

  Attribute kinds follow the values (arrays, Variables and nodes are data,
  the rest static) unless marked with :func:`data` / :func:`static` or the
  ``Data[...]``/``Static[...]`` annotations. ``Module`` builds on it.
  (The seeds' immutable ``Pytree`` is ``nnx.legacy.Pytree``.)

  Raises:
    PytreeDataError: when data is assigned to a static-marked attribute, or a
      list/dict holding data to an attribute that is not data.
    TraceContextError: when an attribute is set from another JAX trace.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Point(nnx.Pytree):
    ...   def __init__(self, x, label):
    ...     self.x = x
    ...     self.label = label
    >>> p = Point(jnp.ones(2), "a")
    >>> p.x = p.x + 1
    >>> jax.tree.leaves(p)[0].tolist(), p.label
    ([2.0, 2.0], 'a')
  """

  _nnx_fields: dict[str, bool] = {}
  _nnx_containerize = False
  _nnx_pytree = True  # False for classes declared pytree=False (tree mode refuses them)

  def __new__(cls, *args, **kwargs):
    obj = object.__new__(cls)
    obj.__dict__["_nnx_trace"] = current_trace()
    return obj

  def __init_subclass__(cls, pytree: bool = True, **kwargs):
    super().__init_subclass__(**kwargs)
    cls._nnx_fields = _class_fields(cls)
    cls._nnx_pytree = pytree
    if pytree:
      _graph.register_pytree(cls)

  def __setattr__(self, name: str, value: Any) -> None:
    d = self.__dict__
    if name.startswith("_nnx_"):
      d[name] = value
      return
    check_trace(d["_nnx_trace"], f"'{type(self).__name__}'", f"attribute {name!r}")
    value, marked = unwrap_marker(value)
    if self._nnx_pytree and isinstance(value, list | tuple | dict) and _has_marker(value):
      raise PytreeDataError(
        f"nnx.data(...)/nnx.static(...) must be assigned to Pytree attributes directly, not"
        f" inside other structures; got a {type(value).__name__} holding one for attribute"
        f" {name!r} of {type(self).__name__}. Fix: mark the whole value, e.g."
        f" `self.{name} = nnx.data([...])`, or use nnx.List/nnx.Dict."
      )
    marks = d.get("_nnx_marks")
    kind = marked if marked is not None else (marks or {}).get(name, self._nnx_fields.get(name))
    prev = d.get(name)  # (None for a new attribute: the common case skips both checks)
    if (
      kind is None
      and prev is not None
      and self._nnx_pytree
      and is_data(prev)
      and not is_data(value)
    ):
      # An attribute that held data stays data when a non-data value replaces it (as in
      # flax.nnx, where an attribute's kind is fixed by its first assignment). Recorded only
      # now, so that the graph walk keeps its fast path for attributes that were never marked.
      marked = True
    if not self._nnx_pytree:
      pass  # pytree=False: no data/static checks, as in flax.nnx
    elif kind is False and _has_data(value):
      if marked is False:
        found = "Found data in"  # nnx.static(value) given data
      elif marks and name in marks:
        found = "Found data on"  # marked static by an earlier nnx.static(...)
      else:
        found = "Found unexpected data on"  # marked static by the class
      raise _static_data_error(self, name, value, found)
    if kind is not False and self._nnx_pytree:
      if self._nnx_containerize:
        value = _containerize(value)
      elif kind is None and not is_data(value) and _has_data(value):
        raise _static_data_error(self, name, value, "Found data on")
    if marked is not None:
      d["_nnx_marks"] = {**(marks or {}), name: marked}
    if d.get("_nnx_in_graph"):
      old = d.get(name, _MISSING)
      if marked is not None or (old is not value and not (_is_array(old) and _is_array(value))):
        _version.bump()
    object.__setattr__(self, name, value)

  def __delattr__(self, name: str) -> None:
    d = self.__dict__
    check_trace(d["_nnx_trace"], f"'{type(self).__name__}'", f"attribute {name!r}")
    if d.get("_nnx_in_graph"):
      _version.bump()
    marks = d.get("_nnx_marks")
    if marks and name in marks:
      d["_nnx_marks"] = {k: v for k, v in marks.items() if k != name}
    object.__delattr__(self, name)

  @property
  def _pytree__state(self) -> PytreeState:
    """flax.nnx's bookkeeping record of the object (a :class:`PytreeState`): its
    ``trace_state`` is the JAX trace the object belongs to, the trace that
    setting an attribute is checked against. Built from the object each time;
    changing it changes nothing.

    Example:
      >>> import nnx_eqx as nnx
      >>> nnx.Module()._pytree__state.trace_state.is_valid()
      True
    """
    state = PytreeState()
    state.trace_state._jax_trace = self.__dict__.get("_nnx_trace", current_trace())
    return state

  @property
  def _pytree__nodes(self) -> dict[str, bool]:
    """flax.nnx's table of a Pytree's attributes: ``{name: is data}`` for every
    attribute of the instance (not class attributes, properties or descriptors;
    a property setter that writes ``self.x`` adds ``'x'``). Computed from the
    attributes each time; changing it changes nothing.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> class Foo(nnx.Pytree):
      ...   def __init__(self):
      ...     self.x, self.n = jnp.zeros(2), 3
      >>> Foo()._pytree__nodes
      {'n': False, 'x': True}
    """
    d = self.__dict__
    kinds = {**type(self)._nnx_fields, **(d.get("_nnx_marks") or {})}
    names = sorted(k for k in d if not k.startswith("_nnx_"))
    return {k: bool(kinds.get(k)) or _has_data(d[k]) for k in names}

  def __repr__(self) -> str:
    return module_repr(self)

  def __treescope_repr__(self, path, subtree_renderer):
    return treescope_module(self, path, subtree_renderer)


def _is_array(x) -> bool:
  return isinstance(x, _node_types.LEAF_TYPES)  # read at call time: leaf types can be registered


def _children(obj) -> list:
  d = obj.__dict__
  items = [(k, d[k]) for k in sorted(d) if not k.startswith("_nnx_")]
  fields = type(obj)._nnx_fields
  marks = d.get("_nnx_marks")
  if not (fields or marks):
    return items
  kinds = {**fields, **(marks or {})}
  return [
    (k, DataLeaf(v))
    if kinds.get(k)
    and v is not None
    and not isinstance(v, (list, tuple, dict, State))
    and not is_data(v)
    and not is_generic_pytree(v)  # (the walk goes through other JAX pytrees)
    else (k, v)
    for k, v in items
  ]


def _create(cls, meta, trace):
  obj = object.__new__(cls)
  obj.__dict__["_nnx_trace"] = trace
  return obj


def _set_children(obj, items) -> None:
  obj.__dict__.update((k, _unwrap(v)) for k, v in items)


def _set_key(obj, key, value) -> None:
  obj.__dict__[key] = _unwrap(value)


def _clear(obj) -> None:
  d = obj.__dict__
  for k in [k for k in d if not k.startswith("_nnx_")]:
    del d[k]


PYTREE_IMPL = NodeImpl(
  children=_children,
  create=_create,
  set_children=_set_children,
  metadata=lambda obj: None,
  set_key=_set_key,
  clear=_clear,
)
"""How the graph walker reads and rebuilds Pytrees and Modules (attributes in ``__dict__``)."""
_graph._MODULE_IMPL_HOLDER[0] = PYTREE_IMPL
_graph.register_graph_node_type(Pytree, PYTREE_IMPL)
_graph.register_pytree(Pytree)


def dataclass(cls: Any = None, /, **kwargs: Any) -> Any:
  """``dataclasses.dataclass`` for Pytrees, keeping the Pytree's own repr (as
  flax.nnx.pytreelib.dataclass). Fields may use ``nnx.data()``/``nnx.static()``.

  Args:
    cls: the class (or omit it to get a decorator).
    **kwargs: ``dataclasses.dataclass`` options except ``repr``.

  Returns:
    The dataclass (or a decorator).

  Raises:
    TypeError: if ``repr`` is passed.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.pytreelib.dataclass
    ... class Point(nnx.Pytree):
    ...   x: jax.Array
    ...   name: str = nnx.static(default="p")
    >>> jax.tree.leaves(Point(jnp.ones(2)))[0].shape
    (2,)
  """
  if cls is None:
    return lambda c: dataclass(c, **kwargs)
  return dataclasses.dataclass(cls, repr=False, **kwargs)


class Object(Pytree, pytree=False):
  """flax.nnx's ``Object``: a Pytree that is not a JAX pytree (``pytree=False``), with
  no data/static checks. Still a graph node (``nnx.split``/``nnx.state`` see it).

  Raises:
    ValueError: if a subclass passes ``pytree=`` other than False.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Buffers(nnx.Object):
    ...   def __init__(self):
    ...     self.items = [jnp.ones(2)]
    >>> nnx.state(Buffers()).flat_state().paths
    (('items', 0),)
  """

  def __init_subclass__(cls, **kwargs):
    pytree = kwargs.pop("pytree", False)
    if pytree is not False:
      raise ValueError(
        f"{cls.__name__}: nnx.Object is not a pytree; pytree={pytree!r} was given. Fix: subclass"
        " nnx.Pytree for a pytree."
      )
    super().__init_subclass__(pytree=False, **kwargs)


__all__ = [
  "CONTAINERS",
  "Data",
  "DataLeaf",
  "PYTREE_IMPL",
  "Object",
  "ObjectMeta",
  "Pytree",
  "PytreeMeta",
  "check_pytree",
  "has_data",
  "PytreeDataError",
  "data",
  "is_data",
  "register_data_type",
  "static",
  "unwrap_marker",
]

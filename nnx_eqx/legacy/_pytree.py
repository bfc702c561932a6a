"""``nnx.legacy.Pytree``: immutable-by-default objects that are JAX pytrees (the seeds' pytreelib).

A Pytree's attributes are set in ``__init__``; afterwards the object is frozen
and ``.replace(**changes)`` returns an updated copy (``class Foo(nnx.legacy.Pytree,
mutable=True)`` opts out). As a pytree, an attribute is a *child* when its value
is a node — a Variable (``TreeNode``, ``Node``, ``Param``, ...), an array, a
State, a nested Pytree, a Module, or a registered node type — and *static*
(aux data, compared by content) otherwise. Wrap other pytrees, such as an optax
state, in ``nnx.TreeNode`` to make them children. Reading an attribute that
holds a Variable or ``nnx.Static`` returns the wrapped value; assigning to it
(during ``__init__`` or through ``replace``) re-wraps the new value in the same
container type.
"""

from __future__ import annotations

from typing import Any, TypeVar

import jax

from ..graph._errors import ImmutableError, NnxError
from ..graph.api._repr import _leaf
from ..graph.state._state import State
from ..graph.variables._variables import Variable
from ..graph.walk import _node_types
from ..graph.walk._graphdef import StaticValue
from ._boxes import box_fields
from ._node_containers import Node, Static, is_node_leaf

P = TypeVar("P", bound="Pytree")
A = TypeVar("A")

_INIT = "_pytree__initializing"
_BOXES = (Variable, Static)


class UnknownFieldError(NnxError, AttributeError):
  """``Pytree.replace`` was given a name that is not an attribute of the object."""


class TreeNode(Node[A]):
  """Marks a Pytree attribute as a child (e.g. a State or an optax state).

  Example:
    >>> import jax, optax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Opt(nnx.legacy.Pytree):
    ...   def __init__(self, params, tx):
    ...     self.tx = tx                                    # static
    ...     self.opt_state = nnx.TreeNode(tx.init(params))  # child
    >>> opt = Opt({"w": jnp.ones(2)}, optax.sgd(0.1))
    >>> len(jax.tree.leaves(opt)), type(opt.opt_state).__name__
    (0, 'tuple')
  """


def _is_child(value: Any) -> bool:
  return is_node_leaf(value) or isinstance(value, State) or _node_types.is_graph_node(value)


def _rebox(old: Any, value: Any) -> Any:
  """Wraps ``value`` in the container type (and metadata) of ``old``."""
  if isinstance(value, _BOXES):
    return value.copy() if isinstance(value, Variable) else value
  if isinstance(old, Static):
    return Static(value)
  if isinstance(old, Variable):
    new = old.copy()
    new.__dict__["_value"] = value
    return new
  return value


class _PytreeMeta(type):
  """Runs ``__init__`` (and dataclass field boxing) while the object is mutable."""

  def __call__(cls, *args, **kwargs):
    new = cls.__new__
    obj = new(cls) if new is object.__new__ else new(cls, *args, **kwargs)
    d = obj.__dict__
    d[_INIT] = True
    try:
      obj.__init__(*args, **kwargs)
      box_fields(obj)
    finally:
      del d[_INIT]
    return obj


class Pytree(metaclass=_PytreeMeta):
  """Base class of immutable (by default) objects that are JAX pytrees.

  Subclass keyword ``mutable=True`` allows assignment after ``__init__``;
  otherwise it raises :class:`nnx.ImmutableError` and ``replace`` is the way to
  change a field. Children and static attributes follow the module docstring.
  A Pytree stored on a Module is a State leaf (the seeds registered Pytree as
  a node type). Follows the seeds' ``nnx.legacy.Pytree``; works with ``nnx.dataclass``.

  Raises:
    ImmutableError: when an attribute of an immutable Pytree is set or deleted
      after ``__init__`` (the attribute is named).

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Point(nnx.legacy.Pytree):
    ...   def __init__(self, x, name):
    ...     self.x = x          # array: child
    ...     self.name = name    # str: static
    >>> p = Point(jnp.array(1.0), "a")
    >>> q = jax.jit(lambda p: p.replace(x=p.x + 1))(p)
    >>> float(q.x), q.name, float(p.x)
    (2.0, 'a', 1.0)
  """

  _pytree__mutable: bool = False

  def __init_subclass__(cls, mutable: bool | None = None, **kwargs):
    super().__init_subclass__(**kwargs)
    if mutable is not None:
      cls._pytree__mutable = bool(mutable)
    jax.tree_util.register_pytree_with_keys(cls, _flatten_with_keys, _make_unflatten(cls), _flatten)

  def __getattribute__(self, name: str) -> Any:
    value = object.__getattribute__(self, name)
    if isinstance(value, _BOXES):
      return value.value
    return value

  def __setattr__(self, name: str, value: Any) -> None:
    d = self.__dict__
    if _INIT not in d and not type(self)._pytree__mutable:
      raise ImmutableError(
        f"{type(self).__name__} is immutable: cannot set attribute {name!r} after"
        f" __init__. Fix: use `obj = obj.replace({name}=...)` to get an updated copy,"
        f" or declare `class {type(self).__name__}(nnx.legacy.Pytree, mutable=True)`."
      )
    d[name] = _rebox(d.get(name), value)

  def __delattr__(self, name: str) -> None:
    if _INIT not in self.__dict__ and not type(self)._pytree__mutable:
      raise ImmutableError(
        f"{type(self).__name__} is immutable: cannot delete attribute {name!r}."
        f" Fix: declare `class {type(self).__name__}(nnx.legacy.Pytree, mutable=True)`."
      )
    object.__delattr__(self, name)

  def replace(self: P, **changes: Any) -> P:
    """Returns a copy with the given attributes changed (containers kept).

    Raises:
      UnknownFieldError: if a name is not an attribute of this object (the
        name and the existing attributes are listed).

    Example:
      >>> import nnx_eqx as nnx
      >>> class Cfg(nnx.legacy.Pytree):
      ...   def __init__(self, lr): self.lr = lr
      >>> Cfg(0.1).replace(lr=0.2).lr
      0.2
    """
    d = self.__dict__
    unknown = sorted(k for k in changes if k not in d)
    if unknown:
      raise UnknownFieldError(
        f"{type(self).__name__}.replace got unknown attribute(s) {unknown}; its"
        f" attributes are {_fields(d)}. Fix: check the spelling; new attributes"
        " can only be added in __init__ (or on a mutable=True Pytree)."
      )
    new = object.__new__(type(self))
    nd = new.__dict__
    nd.update(d)
    for k, v in changes.items():
      nd[k] = _rebox(d[k], v)
    return new

  def __repr__(self) -> str:
    d = self.__dict__
    items = ", ".join(f"{k}={_leaf(getattr(self, k))}" for k in _fields(d))
    return f"{type(self).__name__}({items})"


def _fields(d: dict) -> list[str]:
  return sorted(k for k in d if k != _INIT)


def _split(obj):
  d = obj.__dict__
  names, children, static = [], [], []
  for k in _fields(d):
    v = d[k]
    if _is_child(v):
      names.append(k)
      children.append(v)
    else:
      static.append((k, v))
  return names, children, StaticValue(tuple(static))


def _flatten(obj):
  names, children, static = _split(obj)
  return children, (tuple(names), static)


def _flatten_with_keys(obj):
  names, children, static = _split(obj)
  keyed = [(jax.tree_util.GetAttrKey(k), c) for k, c in zip(names, children)]
  return keyed, (tuple(names), static)


def _make_unflatten(cls):
  def unflatten(aux, children):
    names, static = aux
    obj = object.__new__(cls)
    d = obj.__dict__
    d.update(static.value)
    d.update(zip(names, children))
    return obj

  return unflatten


jax.tree_util.register_pytree_with_keys(
  Pytree, _flatten_with_keys, _make_unflatten(Pytree), _flatten
)
_node_types.register_leaf_type(Pytree)

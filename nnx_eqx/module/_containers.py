"""Container modules: ``List``, ``Sequence`` (callable chain) and ``Dict``.

A plain ``list``/``dict`` of Modules assigned to a Module attribute is turned
into ``nnx.List``/``nnx.Dict`` automatically, so in-place mutation is tracked.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, MutableSequence
from typing import Any

from ..graph import _version
from ..graph._errors import NnxError
from ..graph.api import _functional as _graph
from ..graph.api._functional import NodeImpl
from ..graph.tracing._traces import check_trace
from ._module import Module
from ._pytree import CONTAINERS, DataLeaf, _containerize, _unwrap, is_data, unwrap_marker


class List(Module, MutableSequence):
  """A list of nodes (Modules, Variables, arrays) that is itself a Module.

  Its paths are integer indices: ``nnx.state(List([a, b]))`` has keys ``0, 1``.
  It is a ``MutableSequence``: slicing reads return plain lists, slice
  assignment and deletion work as on a list.

  Example:
    >>> import nnx_eqx as nnx
    >>> layers = nnx.List([nnx.Linear(2, 2, rngs=nnx.Rngs(0)) for _ in range(2)])
    >>> layers.append(nnx.Linear(2, 2, rngs=nnx.Rngs(1)))
    >>> len(layers), sorted(nnx.state(layers))
    (3, [0, 1, 2])
  """

  _nnx_container = True
  _nnx_skip_iter_modules = True  # flax keeps plain lists/dicts: nnx.iter_modules skips it

  def __init__(self, items: Iterable[Any] = ()):
    self.__dict__["_nnx_items"] = [_item(x) for x in items]

  def _mutate(self) -> list:
    d = self.__dict__
    check_trace(d["_nnx_trace"], f"'{type(self).__name__}'", "its items")
    if d.get("_nnx_in_graph"):
      _version.bump()
    return d["_nnx_items"]

  def __getitem__(self, i):
    items = self.__dict__["_nnx_items"]
    if isinstance(i, slice):
      return [_unwrap(x) for x in items[i]]
    return _unwrap(items[i])

  def __setitem__(self, i, value):
    if isinstance(i, slice):
      self._mutate()[i] = [_item(v) for v in value]
    else:
      self._mutate()[i] = _item(value)

  def __delitem__(self, i):
    del self._mutate()[i]

  def __len__(self) -> int:
    return len(self.__dict__["_nnx_items"])

  def __iter__(self) -> Iterator[Any]:
    return map(_unwrap, self.__dict__["_nnx_items"])

  def append(self, value) -> None:
    self._mutate().append(_item(value))

  def extend(self, values: Iterable[Any]) -> None:
    self._mutate().extend(_item(v) for v in values)

  def __contains__(self, value) -> bool:
    return any(x is value or x == value for x in self)

  def __reversed__(self) -> Iterator[Any]:
    return map(_unwrap, reversed(self.__dict__["_nnx_items"]))

  def insert(self, i: int, value) -> None:
    self._mutate().insert(i, _item(value))

  def pop(self, i: int = -1):
    return _unwrap(self._mutate().pop(i))


def _item(value: Any) -> Any:
  """A List element as stored: ``nnx.data``/``nnx.static`` markers unwrapped, a
  data-marked plain value boxed as a leaf, lists/dicts of nodes containerized."""
  value, marked = unwrap_marker(value)
  if marked and not is_data(value) and value is not None:
    return DataLeaf(value)
  return _containerize(value)


class Sequence(List):
  """A List whose call applies its items in order (the seeds' ``nnx.Sequence``).

  Slicing returns a ``Sequence`` of the selected layers. With no layers, the
  call is the identity: one positional argument comes back as is, several as
  a tuple, keywords alone as a dict and no arguments as ``None``.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> seq = nnx.Sequence([nnx.Linear(2, 4, rngs=nnx.Rngs(0)), jax.nn.relu,
    ...                     nnx.Linear(4, 1, rngs=nnx.Rngs(1))])
    >>> seq(jnp.ones((3, 2))).shape
    (3, 1)
  """

  def __getitem__(self, i):
    out = super().__getitem__(i)
    return type(self)(out) if isinstance(i, slice) else out

  def __call__(self, *args, **kwargs):
    if not self:
      return _identity(args, kwargs)
    out = args
    for i, layer in enumerate(self):
      out = layer(*out, **kwargs) if i == 0 else layer(out)
      if i == 0:
        kwargs = {}
    return out


def _identity(args: tuple, kwargs: dict):
  if not kwargs:
    return None if not args else (args[0] if len(args) == 1 else args)
  return kwargs if not args else (args, kwargs)


class Sequential(Module):
  """flax's ``nnx.Sequential(*layers)``: a Module applying its layers in order.

  The layers live in ``self.layers`` (an :class:`nnx.List`), so their paths
  are ``('layers', i, ...)`` as in flax.nnx 0.12. A single list or tuple
  argument is taken as the layers themselves (``nnx.Sequential([a, b])`` is
  ``nnx.Sequential(a, b)``). The first layer gets the call's arguments; each
  later layer gets the previous output: a tuple spread as positional
  arguments, a dict as keywords, anything else as one argument. Keyword
  arguments of the call (``rngs``, ``deterministic``, ``use_running_average``,
  ...) go to every layer whose signature accepts them (a layer with
  ``**kwargs`` gets them all; a parameter the positional arguments already
  fill gets none), as in flax.nnx 0.12.12, so ``seq(x, deterministic=True)``
  reaches the Dropout layers and skips the Linear ones. With no layers the
  call is the identity (one argument back as is, several as a tuple, keywords
  as a dict, nothing as ``None``).

  Raises:
    TypeError: when a layer is not callable (names its index), or when a
      layer's dict output and the call both give the same keyword.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> seq = nnx.Sequential(nnx.Linear(2, 4, rngs=nnx.Rngs(0)), jax.nn.relu)
    >>> seq(jnp.ones((3, 2))).shape, len(jax.tree.leaves(seq))
    ((3, 4), 2)
    >>> sorted(nnx.state(seq).to_flat_dict())[0]
    ('layers', 0, 'bias')
    >>> drop = nnx.Sequential(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), nnx.Dropout(0.5))
    >>> drop(jnp.ones((1, 2)), deterministic=True).shape  # Linear does not get it
    (1, 2)
  """

  def __init__(self, *layers: Any):
    if len(layers) == 1 and type(layers[0]) in (list, tuple):
      layers = tuple(layers[0])
    self.layers = List(layers)

  def __len__(self) -> int:
    return len(self.layers)

  def __iter__(self) -> Iterator[Any]:
    return iter(self.layers)

  def __getitem__(self, i):
    out = self.layers[i]
    return type(self)(*out) if isinstance(i, slice) else out

  def __call__(self, *args, **kwargs):
    if len(self.layers) == 0:
      return _identity(args, kwargs)
    out: Any = None
    for i, layer in enumerate(self.layers):
      if not callable(layer):
        raise TypeError(
          f"Sequential layer {i} ({type(layer).__name__}) is not callable."
          " Fix: pass only callables (Modules or functions) to nnx.Sequential."
        )
      passed: dict = {}
      if i > 0:
        if isinstance(out, tuple):
          args = out
        elif isinstance(out, dict):
          args, passed = (), dict(out)
        else:
          args = (out,)
      shared = _accepted_kwargs(layer, len(args), kwargs) if kwargs else {}
      if repeated := sorted(set(passed) & set(shared)):
        raise TypeError(
          f"Got multiple values for arguments {repeated} in Sequential[{i}]: the previous"
          " layer's dict output and the call's keywords both give them. Fix: rename one."
        )
      out = layer(*args, **passed, **shared)
    return out


def _accepted_kwargs(fn, n_positional: int, kwargs: dict) -> dict:
  """The part of ``kwargs`` that ``fn`` accepts after ``n_positional`` positional args."""
  try:
    params = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError):
    return {}
  position, var_kw = 0, False
  filled: set[str] = set()
  accepted: set[str] = set()
  for p in params:
    if p.kind is p.POSITIONAL_ONLY:
      position += 1
    elif p.kind is p.POSITIONAL_OR_KEYWORD:
      (filled if position < n_positional else accepted).add(p.name)
      position += 1
    elif p.kind is p.KEYWORD_ONLY:
      accepted.add(p.name)
    elif p.kind is p.VAR_KEYWORD:
      var_kw = True
  if var_kw:
    return {k: v for k, v in kwargs.items() if k not in filled}
  return {k: v for k, v in kwargs.items() if k in accepted}


def _list_children(obj) -> list:
  return list(enumerate(obj.__dict__["_nnx_items"]))


def _list_create(cls, meta, trace):
  obj = object.__new__(cls)
  obj.__dict__.update(_nnx_trace=trace, _nnx_items=[])
  return obj


def _list_set_children(obj, items) -> None:
  obj.__dict__["_nnx_items"] = [v for _, v in items]


def _list_set_key(obj, key, value) -> None:
  items = obj.__dict__["_nnx_items"]
  if value is _graph._DELETE:
    del items[key]
  else:
    items[key] = value


def _list_clear(obj) -> None:
  obj.__dict__["_nnx_items"] = []


_graph.register_graph_node_type(
  List,
  NodeImpl(
    _list_children, _list_create, _list_set_children, lambda o: None, _list_set_key, _list_clear
  ),
)


class Dict(Module, MutableMapping):
  """A string-keyed mapping of nodes that is itself a Module; keys are attributes.

  Raises:
    NnxError: for a key that is not a ``str``.

  Example:
    >>> import nnx_eqx as nnx
    >>> heads = nnx.Dict({"a": nnx.Linear(2, 1, rngs=nnx.Rngs(0))})
    >>> heads["b"] = nnx.Linear(2, 1, rngs=nnx.Rngs(1))
    >>> sorted(heads), type(heads.b).__name__
    (['a', 'b'], 'Linear')
  """

  _nnx_container = True
  _nnx_skip_iter_modules = True  # flax keeps plain lists/dicts: nnx.iter_modules skips it

  def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = (), /, **kwargs: Any):
    for k, v in dict(items, **kwargs).items():
      self[k] = v

  def __setitem__(self, key: str, value: Any) -> None:
    if not isinstance(key, str):
      raise NnxError(
        f"nnx.Dict keys must be str, got {key!r} of type {type(key).__name__}."
        " Fix: convert the key with str(key), or use nnx.List for integer keys."
      )
    setattr(self, key, value)

  def __getitem__(self, key: str) -> Any:
    if not isinstance(key, str) or key.startswith("_nnx_") or key not in self.__dict__:
      raise KeyError(key)
    return self.__dict__[key]

  def __delitem__(self, key: str) -> None:
    delattr(self, key)

  def __iter__(self) -> Iterator[str]:
    return (k for k in sorted(self.__dict__) if not k.startswith("_nnx_"))

  def __len__(self) -> int:
    return sum(1 for k in self.__dict__ if not k.startswith("_nnx_"))


Map = Dict


CONTAINERS.update({list: List, dict: Dict})

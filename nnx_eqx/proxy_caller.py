"""``nnx.proxy_caller`` (flax.nnx's module path): record attribute/item accesses, call later.

``DelayedAccessor`` remembers a chain such as ``.encoder.layers[0]`` and replays it on
an object; ``CallableProxy`` builds that chain from ordinary attribute and item syntax
and, when finally called, hands the chain and the arguments to a callback. This is
the pattern behind ``nnx.call(...)`` and ``GraphDef.apply(...)`` (which return an
``ApplyCaller``), as in flax.nnx.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, Protocol, TypeVar

import jax

_A = TypeVar("_A", covariant=True)


@dataclasses.dataclass(frozen=True)
class GetItem:
  """One recorded ``[key]`` access.

  Example:
    >>> from nnx_eqx.proxy_caller import GetItem
    >>> GetItem(0).key
    0
  """

  key: Any


@dataclasses.dataclass(frozen=True)
class GetAttr:
  """One recorded ``.name`` access.

  Example:
    >>> from nnx_eqx.proxy_caller import GetAttr
    >>> GetAttr("layers").name
    'layers'
  """

  name: str


@dataclasses.dataclass(frozen=True)
class DelayedAccessor:
  """An immutable chain of attribute and item accesses, replayed by calling it.

  A static pytree (no leaves), so it can cross ``jax.jit`` as part of a treedef.

  Attributes:
    actions: the ``GetAttr``/``GetItem`` steps, in order.

  Raises:
    AttributeError, KeyError, IndexError: when called, whatever a replayed step raises.

  Example:
    >>> from nnx_eqx.proxy_caller import DelayedAccessor
    >>> path = DelayedAccessor().real
    >>> path(3 + 4j), DelayedAccessor()["a"][1]({"a": [5, 6]})
    (3.0, 6)
  """

  actions: tuple[GetItem | GetAttr, ...] = ()

  def __call__(self, x: Any) -> Any:
    for step in self.actions:
      x = x[step.key] if isinstance(step, GetItem) else getattr(x, step.name)
    return x

  def __getattr__(self, name: str) -> DelayedAccessor:
    if name.startswith("__"):  # keep copy/pickle protocol lookups ordinary
      raise AttributeError(name)
    return DelayedAccessor(self.actions + (GetAttr(name),))

  def __getitem__(self, key: Any) -> DelayedAccessor:
    return DelayedAccessor(self.actions + (GetItem(key),))


jax.tree_util.register_static(DelayedAccessor)


class CallableProxy:
  """Collects ``.attr`` / ``[key]`` accesses, then calls ``callable(accessor, *args)``.

  Args:
    callable: receives the recorded ``DelayedAccessor`` and the call's arguments.
    accessor: the chain recorded so far (default: empty).

  Raises:
    Whatever ``callable`` raises, when called.

  Example:
    >>> from nnx_eqx.proxy_caller import CallableProxy
    >>> obj = {"scale": lambda x: 2 * x}
    >>> proxy = CallableProxy(lambda accessor, *a: accessor(obj)(*a))
    >>> proxy["scale"](21)
    42
  """

  def __init__(self, callable: Any, accessor: DelayedAccessor | None = None):
    self._callable = callable
    self._accessor = DelayedAccessor() if accessor is None else accessor

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    return self._callable(self._accessor, *args, **kwargs)

  def __getattr__(self, name: str) -> CallableProxy:
    if name.startswith("__"):
      raise AttributeError(name)
    return CallableProxy(self._callable, getattr(self._accessor, name))

  def __getitem__(self, key: Any) -> CallableProxy:
    return CallableProxy(self._callable, self._accessor[key])


class ApplyCaller(Protocol, Generic[_A]):
  """Typing protocol: chained accesses, then a call returning ``(out, A)``.

  What ``nnx.call(...)`` and ``GraphDef.apply(...)`` return (type checkers only).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.proxy_caller import ApplyCaller
    >>> caller: ApplyCaller = nnx.call(nnx.split(nnx.Linear(2, 3, rngs=nnx.Rngs(0))))
    >>> caller(jnp.ones((1, 2)))[0].shape
    (1, 3)
  """

  def __getattr__(self, name: str) -> ApplyCaller[_A]: ...

  def __getitem__(self, name: Any) -> ApplyCaller[_A]: ...

  def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, _A]: ...

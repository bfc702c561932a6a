"""Seed-era module wrappers: ``nnx.Remat`` and the method-call proxy shared
with ``nnx.Scan``.

``nnx.Remat(Block, prevent_cse=..., static_argnums=..., policy=...)``
returns a constructor; the Module it builds holds ``Block(...)`` as
``remat_module`` and calls it under :func:`nnx.remat`. ``wrapper.call``
reaches other methods: ``wrapper.call.encode(x)``. The seeds' ``ctx``
argument is ``rngs`` here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from ..module._module import Module
from ..transforms.lifted._remat import RematWrapped


class MethodPath:
  """Calls ``module.<path>(*args, **kwargs)``; hashable by path, so lifted
  wrappers built around it are cached."""

  __slots__ = ("path",)

  def __init__(self, path: tuple):
    self.path = path

  def __call__(self, module, *args, **kwargs):
    target = module
    for name in self.path:
      target = getattr(target, name)
    return target(*args, **kwargs)

  def __eq__(self, other):
    return isinstance(other, MethodPath) and other.path == self.path

  def __hash__(self):
    return hash(("MethodPath", self.path))


class CallProxy:
  """``wrapper.call.a.b(*args)`` → ``apply(MethodPath(('a', 'b')), *args)``."""

  __slots__ = ("_apply", "_path")

  def __init__(self, apply: Callable, path: tuple = ()):
    self._apply = apply
    self._path = path

  def __getattr__(self, name: str) -> CallProxy:
    return CallProxy(self._apply, self._path + (name,))

  def __call__(self, *args, **kwargs):
    return self._apply(MethodPath(self._path), *args, **kwargs)


@dataclasses.dataclass(frozen=True)
class RematOptions:
  """Options of :class:`Remat` (the seeds' ``RematOptions``); ``static_argnums``
  index the call's positional arguments.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.RematOptions(static_argnums=(1,)).prevent_cse
    True
  """

  prevent_cse: bool = True
  """Keep XLA from merging the recomputation with the forward pass, as ``jax.checkpoint``."""
  static_argnums: tuple = ()
  """Positions of the call's arguments that are static (hashed, not traced)."""
  policy: Callable[..., bool] | None = None
  """Which intermediate values to save instead of recomputing (``jax.checkpoint``'s)."""


def _remat_body(f, module, rngs, *args):
  if rngs is not None:
    return f(module, *args, rngs=rngs)
  return f(module, *args)


@functools.lru_cache(maxsize=256)
def _remat_for(options: RematOptions, f: Callable) -> RematWrapped:
  static = tuple(i + 2 if i >= 0 else i for i in options.static_argnums)
  return RematWrapped(
    functools.partial(_remat_body, f), options.prevent_cse, static, options.policy
  )


def remat_apply(options: RematOptions, f: Callable, module: Module, args: tuple, rngs: Any = None):
  """Calls ``f(module, *args, rngs=rngs)`` under ``jax.checkpoint`` and writes
  the module's updates back (the seeds' ``remat_apply``).

  Raises:
    Whatever ``f`` raises; the module is then unchanged.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> nnx.legacy.remat_apply(nnx.RematOptions(), lambda m, x: m(x), m, (jnp.ones(2),)).shape
    (2,)
  """
  return _remat_for(options, f)(module, rngs, *args)


class Remat(Module):
  """Seed-era wrapper: ``nnx.Remat(Block, **options)(*args, rngs=...)``.

  Args (of ``nnx.Remat(...)``):
    module_constructor: builds the wrapped module (e.g. a Module class).
    prevent_cse, static_argnums, policy: as :func:`nnx.remat`;
      ``static_argnums`` index the positional arguments of the call.

  Returns:
    A constructor; its arguments go to ``module_constructor``.

  Raises:
    Whatever the wrapped module raises; its state is then unchanged.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> block = nnx.Remat(nnx.Linear)(2, 3, rngs=nnx.Rngs(0))
    >>> block(jnp.ones((1, 2))).shape, block.remat_module.kernel.value.shape
    ((1, 3), (2, 3))
  """

  module_constructor: Callable
  options: RematOptions
  remat_module: Any

  def __new__(cls, module_constructor: Callable, /, **options: Any):  # type: ignore[misc]
    opts = RematOptions(**_as_tuple(options, "static_argnums"))

    def create(*args, **kwargs) -> Remat:
      obj = Module.__new__(cls)
      obj.module_constructor = module_constructor
      obj.options = opts
      obj.remat_module = module_constructor(*args, **kwargs)
      return obj

    return create  # type: ignore[return-value]

  def __call__(self, *args, rngs: Any = None):
    return self.call(*args, rngs=rngs)

  @property
  def call(self) -> Any:
    """Proxy to the wrapped module's methods: ``wrapper.call.method(*args)``."""
    return CallProxy(
      lambda f, *args, rngs=None: remat_apply(self.options, f, self.remat_module, args, rngs)
    )


def _as_tuple(options: dict, key: str) -> dict:
  v = options.get(key)
  if isinstance(v, int):
    options = {**options, key: (v,)}
  elif v is not None:
    options = {**options, key: tuple(v)}
  return options

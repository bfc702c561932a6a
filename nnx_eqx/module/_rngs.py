"""Rngs: named streams of JAX PRNG keys whose counters are graph state.

``Rngs(0)`` makes a ``default`` stream; ``Rngs(params=0, dropout=1)`` makes
named ones. Calling a stream (``rngs.params()``, ``rngs["dropout"]()``,
``rngs()`` for ``default``) returns ``fold_in(key, count)`` and increments the
count, which is an ``RngCount`` Variable: counts are state, so they advance
through ``nnx.jit`` and come back from ``split``/``merge``. A stream that does
not exist falls back to ``default`` (as in flax.nnx).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..graph._errors import NnxError, UnknownStreamError
from ..graph.state._filters import to_predicate
from ..graph.tracing._traces import check_trace
from ..graph.variables._variables import Variable
from ._module import Module
from ._rng_random import RandomMethods


class RngState(Variable):
  """Base class of the Variables that hold Rngs state."""


class RngKey(RngState):
  """A stream's base key (a typed PRNG key array)."""


class RngCount(RngState):
  """A stream's call counter (``uint32``)."""


def _as_key(seed: Any) -> jax.Array:
  if isinstance(seed, RngStream):  # a new stream from another's base key (as flax.nnx)
    return seed.key.value
  if isinstance(seed, int):
    return jax.random.key(seed)
  seed = jnp.asarray(seed)
  if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
    return seed
  if seed.dtype == jnp.uint32 and seed.shape[-1:] == (2,):
    return jax.random.wrap_key_data(seed)
  if jnp.issubdtype(seed.dtype, jnp.integer) and seed.ndim == 0:
    return jax.random.key(seed)
  raise NnxError(
    f"Cannot make a PRNG key from {seed!r} (dtype {seed.dtype}, shape"
    f" {seed.shape}). Fix: pass an int seed, `jax.random.key(seed)`, or a"
    " raw `jax.random.PRNGKey(seed)`."
  )


class RngStream(RandomMethods, Module):
  """One named stream: a base key plus a counter.

  Example:
    >>> import nnx_eqx as nnx
    >>> s = nnx.RngStream(0, tag="params")
    >>> k1, k2 = s(), s()
    >>> int(s.count.value)
    2
  """

  _nnx_skip_iter_modules = True  # not a Module in flax.nnx: nnx.iter_modules skips it

  def __init__(self, key: Any, *, tag: str):
    key = _as_key(key)
    self.key = RngKey(key, tag=tag)
    self.count = RngCount(jnp.zeros(key.shape, jnp.uint32), tag=tag)
    self.tag = tag

  def __call__(self) -> jax.Array:
    if not self.count.ref:  # a count in a jax.Ref may be advanced from any trace
      check_trace(self.count._trace, "RngCount")
    key = jax.random.fold_in(self.key.value, self.count.value)
    self.count.value = self.count.value + 1
    return key

  def _next_key(self) -> jax.Array:
    return self()

  def split(self, k: int | tuple[int, ...]) -> RngStream:
    """A new stream whose key is this stream's next key split into shape ``k``."""
    return RngStream(jax.random.split(self(), k), tag=self.tag)

  def broadcast(self, k: int | tuple[int, ...]) -> RngStream:
    """A new stream whose key is this stream's next key repeated to shape ``k``."""
    key = self()
    shape = (k,) if isinstance(k, int) else tuple(k)
    return RngStream(jnp.broadcast_to(key, shape + key.shape), tag=self.tag)

  def fork(self, split: int | tuple[int, ...] | None = None) -> RngStream:
    """A new stream from this one's next key, split into ``split`` keys if given
    (for ``vmap``/``scan`` over the leading axes)."""
    key = self()
    if split is not None:
      key = jax.random.split(key, split)
    new = RngStream.__new__(RngStream)
    new.key = RngKey(key, tag=self.tag)
    new.count = RngCount(jnp.zeros(key.shape, jnp.uint32), tag=self.tag)
    new.tag = self.tag
    return new


class Rngs(RandomMethods, Module):
  """A set of named PRNG streams (as flax.nnx.Rngs).

  Args:
    default: seed (int or key) of the ``default`` stream, optional.
    **streams: seeds of named streams, e.g. ``params=0, dropout=1``.

  Raises:
    UnknownStreamError: when a stream is requested that does not exist and there is no
      ``default`` stream (the message lists the streams).

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(params=0, dropout=1)
    >>> k = rngs.params(); k = rngs["dropout"]()
    >>> int(rngs.params.count.value), int(rngs.dropout.count.value)
    (1, 1)
  """

  _nnx_skip_iter_modules = True  # not a Module in flax.nnx: nnx.iter_modules skips it

  def __init__(self, default: Any = None, /, **streams: Any):
    if default is not None:
      streams = {"default": default, **streams}
    for name, seed in streams.items():
      setattr(self, name, RngStream(seed, tag=name))

  def _streams(self) -> list[str]:
    return [k for k, v in self.__dict__.items() if isinstance(v, RngStream)]

  def __getattr__(self, name: str) -> RngStream:
    if name.startswith("_"):
      raise AttributeError(name)
    d = self.__dict__
    if "default" in d:
      return d["default"]
    raise UnknownStreamError(
      f"No RngStream named {name!r} in Rngs and no 'default' stream; streams:"
      f" {self._streams()}. Fix: create it, e.g. nnx.Rngs({name}=0), or give a"
      " default seed: nnx.Rngs(0)."
    )

  def __getitem__(self, name: str) -> RngStream:
    s = self.__dict__.get(name)
    return s if isinstance(s, RngStream) else getattr(self, name)

  def __call__(self) -> jax.Array:
    return self.default()

  def _next_key(self) -> jax.Array:
    return self.default()

  def items(self):
    """``(name, stream)`` pairs."""
    return [(k, self.__dict__[k]) for k in self._streams()]

  def __iter__(self):
    return iter(self._streams())

  def __len__(self) -> int:
    return len(self._streams())

  def _map_streams(self, rule, method: str) -> Rngs:
    if rule is None or isinstance(rule, int | tuple):
      rule = {...: rule}
    preds = [(to_predicate(f), v) for f, v in rule.items()]
    new = Rngs.__new__(Rngs)
    for name, stream in self.items():
      out = stream
      for pred, v in preds:
        if pred((name, "key"), stream.key):
          out = stream if v is None else getattr(stream, method)(v)
          break
      setattr(new, name, out)
    return new

  def split(self, k) -> Rngs:
    """New Rngs whose selected streams hold keys split to shape ``k``.

    ``k`` is an int or shape for every stream, or a ``{filter: shape or None}``
    mapping (first matching filter wins; None keeps the stream as is).
    """
    return self._map_streams(k, "split")

  def broadcast(self, k) -> Rngs:
    """Like :meth:`split`, but each selected stream's next key is repeated."""
    return self._map_streams(k, "broadcast")

  def __contains__(self, name: str) -> bool:
    return isinstance(self.__dict__.get(name), RngStream)

  def fork(self, split: int | tuple[int, ...] | dict | None = None) -> Rngs:
    """New Rngs whose streams are forked from these (advancing these counts).

    ``split`` is an int/shape for every stream, or a ``{stream: int}`` dict to
    split only some streams (the rest are forked unsplit).
    """
    new = Rngs.__new__(Rngs)
    for name in self._streams():
      n = split.get(name) if isinstance(split, dict) else split
      setattr(new, name, self.__dict__[name].fork(n))
    return new

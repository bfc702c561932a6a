"""``Dropout`` (Srivastava et al., 2014), as flax.nnx.Dropout, and PRNG-key helpers."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from ..module._module import Module
from ..module._rngs import Rngs, RngStream
from ._common import MissingRngsError, RngsTypeError, first_from, optional_kwargs


def own_stream(rngs: Any, collection: str, layer: str) -> RngStream | None:
  """The stream a layer keeps: a fork of ``rngs[collection]`` (advancing it), or None.

  Raises:
    RngsTypeError: if ``rngs`` is neither None, an ``Rngs`` nor an ``RngStream``.
  """
  if rngs is None:
    return None
  if isinstance(rngs, Rngs):
    return rngs[collection].fork()
  if isinstance(rngs, RngStream):
    return rngs.fork()
  raise RngsTypeError(
    f"{layer}: `rngs` must be an nnx.Rngs, an nnx.RngStream or None, got"
    f" {type(rngs).__name__}. Fix: pass e.g. rngs=nnx.Rngs(dropout=0)."
  )


def next_key(rngs: Any, own: RngStream | None, collection: str, layer: str) -> jax.Array:
  """A fresh key from the call's ``rngs`` (Rngs, RngStream or key), else from ``own``.

  Raises:
    MissingRngsError: if neither gives a key.
    RngsTypeError: if ``rngs`` has an unsupported type.
  """
  if rngs is None:
    rngs = own
  if rngs is None:
    raise MissingRngsError(
      f"{layer}: `deterministic` is False, but no `rngs` argument was provided to {layer}"
      " (the layer holds no rngs and the call got none). Fix: build it with"
      " rngs=nnx.Rngs(...), pass rngs=... to the call, or make it deterministic"
      " (`model.eval()`)."
    )
  if isinstance(rngs, Rngs):
    return rngs[collection]()
  if isinstance(rngs, RngStream):
    return rngs()
  if isinstance(rngs, jax.Array):
    return rngs
  raise RngsTypeError(
    f"{layer}: call argument `rngs` must be an nnx.Rngs, an nnx.RngStream or a PRNG key,"
    f" got {type(rngs).__name__}."
  )


# jax < 0.8.1: ``jax.random.bernoulli`` has no ``out_sharding``; the mask is resharded.
_BERNOULLI_OUT_SHARDING = "out_sharding" in inspect.signature(jax.random.bernoulli).parameters


def _bernoulli(key: Any, p: float, shape: tuple[int, ...], sharding: Any) -> Array:
  """A boolean mask of ``shape``, placed with ``sharding`` (None: the default)."""
  if sharding is None or _BERNOULLI_OUT_SHARDING:
    return jax.random.bernoulli(key, p=p, shape=shape, **optional_kwargs(out_sharding=sharding))
  return jax.sharding.reshard(jax.random.bernoulli(key, p=p, shape=shape), sharding)


def _mesh_sharding(x: Array) -> Any:
  """``x``'s sharding when it lives on a mesh (so the mask matches it), else None."""
  sharding = jax.typeof(x).sharding
  mesh = getattr(sharding, "mesh", None)
  return sharding if mesh is not None and not mesh.empty else None


class Dropout(Module):
  """Zeroes each element with probability ``rate`` and scales the rest by
  ``1 / (1 - rate)`` (as flax.nnx.Dropout).

  ``deterministic`` is a module attribute switched for a whole model by
  ``model.train()`` (False) / ``model.eval()`` (True); a call argument takes
  precedence. The layer keeps its own stream, forked from
  ``rngs[rng_collection]`` at construction, whose counter advances on every
  call (so masks differ between calls and are reproducible from the seed);
  ``rngs`` passed to the call take precedence.

  Args:
    rate: drop probability (not the keep probability).
    broadcast_dims: axes along which the mask is shared.
    deterministic: default mode flag (False: apply dropout).
    rng_collection: name of the stream to use (default ``"dropout"``; a missing
      stream falls back to ``default``).
    rngs: ``nnx.Rngs`` or ``nnx.RngStream`` to fork the layer's stream from,
      or None (then keys must be passed to the call).

  Input ``x`` of any shape and float dtype; the output has the same shape and dtype.

  Raises:
    MissingRngsError: when dropout is applied without any rngs.
    MissingFlagError: if ``deterministic`` is None on the module and in the call.
    RngsTypeError: for ``rngs`` of an unsupported type.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=0))
    >>> print(drop(jnp.ones((2, 4))))                     # kept values are scaled by 2
    [[2. 0. 2. 0.]
     [2. 2. 2. 0.]]
    >>> drop.eval(); drop(jnp.ones(3)).tolist()
    [1.0, 1.0, 1.0]
  """

  def __init__(
    self,
    rate: float,
    *,
    broadcast_dims: Sequence[int] = (),
    deterministic: bool | None = False,
    rng_collection: str = "dropout",
    rngs: Rngs | RngStream | None = None,
  ):
    self.rate = rate
    self.broadcast_dims = tuple(broadcast_dims)
    self.deterministic = deterministic
    self.rng_collection = rng_collection
    self.rngs = own_stream(rngs, rng_collection, type(self).__name__)

  def __call__(
    self,
    inputs: Float[Array, "*shape"],
    *,
    deterministic: bool | None = None,
    rngs: Rngs | RngStream | jax.Array | None = None,
  ) -> Float[Array, "*shape"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      name = type(self).__name__
      det = first_from(deterministic, self.deterministic, flag="deterministic", layer=name)
      if self.rate == 0.0 or det:
        return x
      if self.rate == 1.0:
        return jnp.zeros_like(x)
      key = next_key(rngs, self.rngs, self.rng_collection, name)
      keep = 1.0 - self.rate
      shape = list(x.shape)
      for d in self.broadcast_dims:
        shape[d] = 1
      mask = _bernoulli(key, keep, tuple(shape), _mesh_sharding(x))
      mask = jnp.broadcast_to(mask, x.shape)
      return lax.select(mask, x / keep, jnp.zeros_like(x))

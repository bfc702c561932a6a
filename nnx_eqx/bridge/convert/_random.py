"""Keys for converted random layers: an explicit ``key=``, call-time ``rngs=``, or a stream.

A converted ``eqx.nn.Dropout`` (and a ``MultiheadAttention`` through its
dropout) takes its key, in this order of precedence, from:

1. ``key=`` as in Equinox: the Equinox program with that key, bit for bit;
2. ``rngs=`` given to the call (an ``nnx.Rngs``, whose ``"dropout"`` stream is
   used, an ``nnx.RngStream``, or a key): one key is drawn and used as ``key=``;
3. the ``nnx.RngStream`` the layer keeps (``nnx.from_eqx(model, rngs=...)``
   forks one per Dropout), whose count advances on every call.

Generically converted modules run their Equinox methods on an Equinox view of
the module (see ``_generic``). In that view a converted Dropout is a
:class:`StreamDropout` (and an attention layer a :class:`StreamAttention`),
which draws from the live stream when Equinox's code passes ``key=None``, so
the count advances on the NNX module (without a stream it raises
:class:`MissingKeyError` naming its path). ``nnx.to_eqx`` itself gives plain
``eqx.nn`` layers: an Equinox model takes its keys per call.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ...module._rngs import Rngs, RngStream
from ...nn.stochastic import next_key, own_stream
from .._errors import MissingKeyError

COLLECTION = "dropout"
"""The stream a converted random layer draws from (as ``flax.nnx.Dropout``)."""


def fork_stream(rngs: Rngs | RngStream | None, layer: str) -> RngStream | None:
  """The stream a converted layer keeps: a fork of ``rngs["dropout"]`` (or of
  the ``RngStream`` given), advancing it; None for None.

  Raises:
    RngsTypeError: ``rngs`` is neither None, an ``Rngs`` nor an ``RngStream``.
  """
  return own_stream(rngs, COLLECTION, layer)


def draw_key(rngs: Any, own: RngStream | None, layer: str, path: tuple = ()) -> jax.Array:
  """A key from the call's ``rngs`` (``Rngs``, ``RngStream`` or key), else from ``own``.

  Raises:
    MissingKeyError: neither gives one (``path`` is the layer's position).
    RngsTypeError: ``rngs`` has an unsupported type.
  """
  if rngs is None and own is None:
    raise MissingKeyError(layer, path)
  return next_key(rngs, own, COLLECTION, layer)


def resolve_inference(inference: bool | None, deterministic: bool | None, default: bool) -> bool:
  """Equinox's Dropout mode: ``deterministic`` (its old name), else ``inference``,
  else the layer's own flag."""
  if deterministic is not None:
    return deterministic
  return default if inference is None else inference


def dropout_active(p: Any, inference: bool) -> bool:
  """Whether Equinox's Dropout with rate ``p`` draws a mask (a rate of 0 never does)."""
  return not (inference or (isinstance(p, (int, float)) and p == 0))


class StreamRef:
  """A stream held in a static field of an Equinox view (hashed by identity)."""

  __slots__ = ("stream",)

  def __init__(self, stream: RngStream):
    self.stream = stream


class StreamDropout(eqx.nn.Dropout):
  """``eqx.nn.Dropout`` that draws from an NNX stream when called without a key.

  Only the Equinox views of generically converted modules hold these (see the
  module doc). With a key it is ``eqx.nn.Dropout``.

  Attributes:
    ref: a :class:`StreamRef` to the converted layer's ``nnx.RngStream``, or None.
    path: the layer's path in the view, for the error.

  Raises:
    MissingKeyError: active, no key and no stream.

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Net(eqx.Module):
    ...   drop: eqx.nn.Dropout
    ...   def __call__(self, x, *, key=None):
    ...     return self.drop(x, key=key)
    >>> m = nnx.from_eqx(Net(eqx.nn.Dropout(0.5)), rngs=nnx.Rngs(dropout=0))
    >>> m(jnp.ones(4)).shape, int(m.drop.rngs.count[...])
    ((4,), 1)
  """

  ref: Any = eqx.field(static=True, default=None)
  path: tuple = eqx.field(static=True, default=())

  def __call__(
    self,
    x: jax.Array,
    *,
    key: Any = None,
    inference: bool | None = None,
    deterministic: bool | None = None,
  ) -> jax.Array:
    inference = resolve_inference(inference, deterministic, self.inference)
    if key is None and dropout_active(self.p, inference):
      key = draw_key(None, self.ref and self.ref.stream, "Dropout", self.path)
    return super().__call__(x, key=key, inference=inference)


class StreamAttention(eqx.nn.MultiheadAttention):
  """``eqx.nn.MultiheadAttention`` whose dropout is a :class:`StreamDropout`:
  called without a key while the dropout is active, it draws one key from the
  stream and splits it over the heads, as Equinox splits a given key.

  Raises:
    MissingKeyError: the dropout is active, no key and no stream.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Net(eqx.Module):
    ...   attn: eqx.nn.MultiheadAttention
    ...   def __call__(self, x, *, key=None):
    ...     return self.attn(x, x, x, key=key)
    >>> e = Net(eqx.nn.MultiheadAttention(2, 4, dropout_p=0.5, key=jax.random.key(0)))
    >>> m = nnx.from_eqx(e, rngs=nnx.Rngs(dropout=0))
    >>> m(jnp.ones((3, 4))).shape, int(m.attn.dropout.rngs.count[...])
    ((3, 4), 1)
  """

  def __call__(self, query, key_, value, mask=None, *, key=None, inference=None, **kwargs):
    drop = self.dropout
    if key is None and isinstance(drop, StreamDropout):
      mode = resolve_inference(inference, kwargs.get("deterministic"), drop.inference)
      if dropout_active(drop.p, mode):
        key = draw_key(None, drop.ref and drop.ref.stream, "Dropout", drop.path)
    return super().__call__(query, key_, value, mask, key=key, inference=inference, **kwargs)

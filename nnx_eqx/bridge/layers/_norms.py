"""Equinox's normalisation layers as NNX modules (Equinox's equations and convention)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ...graph.variables._variables import BatchStat, Param
from ...module._module import Module
from ...module._pytree import Data
from ...nn._common import read
from .._errors import ExampleShapeError, UnboundAxisError
from ..convert._generic import check_placeholder
from ._layers import NO_STATE, check_example, equinox_name


def _compute_dtype(x: jax.Array):
  with jax.numpy_dtype_promotion("standard"):
    return jnp.result_type(x.dtype, jnp.float32)


def _affine(m: Any, out: jax.Array, dtype: Any) -> jax.Array:
  # Equinox's conditions: its flags, not whether a parameter is there
  if m.use_weight:
    out = read(m.scale).astype(dtype) * out
  if m.use_bias:
    out = out + read(m.bias).astype(dtype)
  return out


def _check_shape(name: str, shape: tuple, x: jax.Array) -> None:
  check_example(f"nnx.bridge.{name} (from eqx.nn.{name})", "x", x, tuple(shape))


def _out(y: jax.Array, state: Any, where: str) -> Any:
  if state is NO_STATE:
    return y
  check_placeholder(state, where)
  return y, state


class LayerNorm(Module):
  """``eqx.nn.LayerNorm``: normalises over all of ``x`` (whose shape must be ``shape``).

  Attributes:
    scale: ``Param`` of shape ``shape`` (Equinox's ``weight``), or None.
    bias: ``Param`` of shape ``shape``, or None.
    shape, eps, use_weight, use_bias: as in Equinox (``eps`` defaults to 1e-5
      there, 1e-6 in ``nnx.LayerNorm``; the converted value is kept).

  Raises:
    ExampleShapeError: ``x.shape != shape`` (as Equinox; use ``jax.vmap`` for batches).
    NnxError: ``state`` is an ``eqx.nn.State`` (pass a placeholder such as None).

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.LayerNorm(4))
    >>> m.eps, m(jnp.arange(4.0)).shape
    (1e-05, (4,))
  """

  scale: Data[Param | None]  # data: None is a pytree child, as in Equinox
  bias: Data[Param | None]
  shape: tuple[int, ...]
  eps: float
  use_weight: bool
  use_bias: bool
  weight = equinox_name("scale")

  def __call__(self, x: jax.Array, state: Any = NO_STATE, *, key: Any = None) -> Any:
    with jax.named_scope("bridge.LayerNorm"):
      _check_shape("LayerNorm", self.shape, x)
      orig = x.dtype
      dtype = _compute_dtype(x)
      x = x.astype(dtype)
      mean = jnp.mean(x, keepdims=True)
      var = jnp.maximum(0.0, jnp.var(x, keepdims=True))
      inv = lax.rsqrt(var + self.eps)  # before ``x - mean``, in Equinox's op order
      out = (x - mean) * inv
      return _out(_affine(self, out, dtype).astype(orig), state, "LayerNorm")


class RMSNorm(Module):
  """``eqx.nn.RMSNorm``: ``x / rms(x) * scale + bias``; keeps Equinox's bias.

  Attributes:
    scale: ``Param`` of shape ``shape`` (Equinox's ``weight``), or None.
    bias: ``Param`` of shape ``shape``, or None (Equinox has one by default).
    shape, eps, use_weight, use_bias: as in Equinox.

  Raises:
    ExampleShapeError: ``x.shape != shape`` (as Equinox; use ``jax.vmap`` for batches).
    NnxError: ``state`` is an ``eqx.nn.State`` (pass a placeholder such as None).

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.RMSNorm(4))
    >>> m.bias.value.shape, m(jnp.arange(4.0)).shape
    ((4,), (4,))
  """

  scale: Data[Param | None]  # data: None is a pytree child, as in Equinox
  bias: Data[Param | None]
  shape: tuple[int, ...]
  eps: float
  use_weight: bool
  use_bias: bool
  weight = equinox_name("scale")

  def __call__(self, x: jax.Array, state: Any = NO_STATE, *, key: Any = None) -> Any:
    with jax.named_scope("bridge.RMSNorm"):
      _check_shape("RMSNorm", self.shape, x)
      orig = x.dtype
      dtype = _compute_dtype(x)
      x = x.astype(dtype)
      out = lax.rsqrt(jnp.mean(x**2) + self.eps) * x
      return _out(_affine(self, out, dtype).astype(orig), state, "RMSNorm")


def _batch_stats(stats: Any, x: jax.Array, axis_name: Any) -> Any:
  """``jax.vmap(stats)(x)``: the batch statistics, averaged over ``axis_name``.

  Raises:
    UnboundAxisError: outside a map with that axis (JAX's ``NameError`` from the
      collective, raised while tracing: a call that works pays nothing).
  """
  try:
    return jax.vmap(stats)(x)
  except NameError:  # (``stats`` names nothing but the axis)
    raise UnboundAxisError("nnx.bridge.BatchNorm (from eqx.nn.BatchNorm)", axis_name) from None


class BatchNorm(Module):
  """``eqx.nn.BatchNorm``: normalises over a named batch axis (``axis_name``).

  As in Equinox the input is one example, ``(input_size, *spatial)``, and the
  layer runs inside ``vmap`` with ``axis_name``; use ``nnx.vmap`` (or merge the
  module inside ``jax.vmap``, as below) so the running statistics can be
  updated. The
  statistics are ``BatchStat`` Variables instead of ``eqx.nn.State`` entries:

  * ``mode="batch"``: ``counter`` (the number of updates, used to debias the
    running averages at inference), ``mean`` and ``var``;
  * ``mode="ema"``: ``first_time``, ``mean`` and ``var``.

  ``nnx.to_eqx_with_state`` puts them back into an ``eqx.nn.State`` exactly.

  Attributes:
    scale, bias: ``Param`` of shape ``(input_size,)`` (Equinox's ``weight`` and
      ``bias``), or None without ``channelwise_affine``.
    use_running_average: Equinox's ``inference`` (``model.eval()`` and
      ``eqx.nn.inference_mode`` set it; ``module.inference`` reads it).
    axis_name, input_size, eps, channelwise_affine, momentum, mode: as Equinox.

  Raises:
    ExampleShapeError: ``x`` is not one example ``(input_size, *spatial)``.
    NameError: called outside a ``vmap`` with ``axis_name`` (from ``lax.pmean``).
    TraceContextError: called in training mode under plain ``jax.vmap`` (the
      statistics cannot be written back; use ``nnx.vmap``).
    NnxError: ``state`` is an ``eqx.nn.State`` (pass a placeholder such as None).

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
    >>> m = nnx.from_eqx(bn, state)
    >>> graphdef, params, stats = nnx.split(m, nnx.Param, nnx.BatchStat)
    >>> def one(x):
    ...   m = nnx.merge(graphdef, params, stats)
    ...   return m(x), nnx.state(m, nnx.BatchStat)
    >>> y, stats = jax.vmap(one, axis_name="batch", out_axes=(0, None))(jnp.ones((4, 3)))
    >>> int(stats.counter.value)
    1
  """

  scale: Data[Param | None]  # data: None is a pytree child, as in Equinox
  bias: Data[Param | None]
  weight = equinox_name("scale")
  counter: BatchStat
  first_time: BatchStat
  mean: BatchStat
  var: BatchStat
  axis_name: Any
  use_running_average: bool
  input_size: int
  eps: float
  channelwise_affine: bool
  momentum: float
  mode: str

  def __call__(
    self, x: jax.Array, state: Any = NO_STATE, *, key: Any = None, inference: bool | None = None
  ) -> Any:
    with jax.named_scope("bridge.BatchNorm"):
      if inference is None:
        inference = self.use_running_average
      axis_name = self.axis_name
      if jnp.ndim(x) == 0 or jnp.shape(x)[0] != self.input_size:
        raise ExampleShapeError(
          "nnx.bridge.BatchNorm (from eqx.nn.BatchNorm)",
          "x",
          f"({self.input_size}, *spatial)",
          jnp.shape(x),
          rank=jnp.ndim(x) - 1 if jnp.ndim(x) > 1 and jnp.shape(x)[1] == self.input_size else None,
        )

      def stats(y):
        mean = lax.pmean(jnp.mean(y), axis_name)
        var = lax.pmean(jnp.mean((y - mean) * jnp.conj(y - mean)), axis_name)
        return mean, jnp.maximum(0.0, var)

      if self.mode == "ema":
        if inference:
          mean, var = read(self.mean), read(self.var)
        else:
          first = self.first_time.value
          self.first_time.value = jnp.array(False)
          batch_mean, batch_var = _batch_stats(stats, x, axis_name)
          mom = self.momentum
          mean = (1 - mom) * batch_mean + mom * self.mean.value
          var = (1 - mom) * batch_var + mom * self.var.value
          mean = lax.select(first, batch_mean, mean)
          var = lax.select(first, batch_var, var)
          self.mean.value, self.var.value = mean, var
      else:
        counter = self.counter.value
        if inference:
          scale = jnp.where(counter == 0, 1, 1 - self.momentum**counter)
          mean, var = self.mean.value / scale, self.var.value / scale
        else:
          mean, var = _batch_stats(stats, x, axis_name)
          mom = self.momentum
          self.counter.value = counter + 1
          new_mean = self.mean.value * mom + mean * (1 - mom)
          new_var = self.var.value * mom + var * (1 - mom)
          self.mean.value, self.var.value = new_mean, new_var

      def norm(y, m, v, w, b):
        out = (y - m) / jnp.sqrt(v + self.eps)
        return out * w + b if self.channelwise_affine else out

      w, b = read(self.scale), read(self.bias)
      y = jax.vmap(norm)(x, mean, var, w, b)
      return _out(y, state, "BatchNorm")

  def is_stateful(self) -> bool:
    return True

"""Equinox layers that keep an NNX layer's layout and program (``nnx.to_eqx``'s side).

``nnx.to_eqx`` gives :class:`KernelLinear` for an ``nnx.Linear``: a compact
Equinox layer (as many fields as ``eqx.nn.Linear``, so Equinox's per-call
flatten and rebuild cost the same) holding the NNX ``kernel`` of shape
``(in, out)`` and running ``nnx.Linear``'s own code, so the converted model is
the NNX model's program. ``nnx.to_eqx(..., native=True)`` gives
``eqx.nn.Linear`` instead.
"""

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import jax
import numpy as np

from ...graph.variables._variables import Param
from ...module._rngs import Rngs
from ...nn import Linear as NnxLinear
from ..walk._context import impl_of


@functools.cache
def nnx_linear_defaults() -> dict:
  """The attributes of a default ``nnx.Linear`` other than its Variables."""
  t = NnxLinear(1, 1, rngs=Rngs(0))
  return {k: v for k, v in impl_of(NnxLinear).children(t) if k not in ("kernel", "bias")}


def build_nnx_linear(kernel: Any, bias: Any, attrs: dict) -> Any:
  """An ``nnx.Linear`` with these Variables and attributes, without running its
  ``__init__`` (no initializer runs, no arrays are made)."""
  m = NnxLinear.__new__(NnxLinear)
  for k, v in {**nnx_linear_defaults(), **attrs}.items():
    setattr(m, k, v)
  m.kernel = kernel
  m.bias = bias
  return m


class KernelLinear(eqx.Module):
  """``nnx.Linear`` as an Equinox layer, in NNX's layout: ``y = x @ kernel + bias``.

  ``nnx.to_eqx`` converts an ``nnx.Linear`` with default computation settings
  to this class (others convert generically), and ``nnx.from_eqx`` converts it
  back. Calling it runs ``nnx.Linear``'s own code on the fields, so forward
  pass and gradients are the NNX layer's bit for bit, with no transpose per
  call. Like ``nnx.Linear`` it takes any leading batch axes.

  Attributes:
    kernel: array of shape ``(in_features, out_features)``.
    bias: array of shape ``(out_features,)``, or None.
    in_features, out_features: ints.
    use_bias: whether there is a bias.

  Raises:
    InputShapeError: the last axis of ``x`` is not ``in_features`` (as ``nnx.Linear``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> lin = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    >>> e = nnx.to_eqx(lin)
    >>> type(e) is nnx.bridge.KernelLinear, e.kernel.shape
    (True, (3, 2))
    >>> bool((e(jnp.ones((4, 3))) == lin(jnp.ones((4, 3)))).all())
    True
  """

  kernel: jax.Array
  bias: jax.Array | None
  in_features: int = eqx.field(static=True)
  out_features: int = eqx.field(static=True)
  use_bias: bool = eqx.field(static=True)

  def __call__(self, x: jax.Array, *, key: Any = None) -> jax.Array:
    bias = None if self.bias is None else Param(self.bias)
    attrs = {"in_features": self.in_features, "out_features": self.out_features}
    attrs["use_bias"] = self.use_bias
    attrs["param_dtype"] = param_dtype(self.kernel.dtype)
    return build_nnx_linear(Param(self.kernel), bias, attrs)(x)


def param_dtype(dtype: Any) -> Any:
  """``nnx.Linear``'s ``param_dtype`` for a kernel dtype: its default object if equal."""
  default = nnx_linear_defaults()["param_dtype"]
  return default if np.dtype(default) == dtype else dtype

"""Dense layers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._module import Module
from .._rngs import Rngs
from .._variables import Param
from . import initializers

Initializer = Callable[..., Any]


class Linear(Module):
  """A dense layer ``y = x @ kernel + bias`` (as flax.nnx.Linear).

  Args:
    in_features: size of the last input axis.
    out_features: size of the last output axis.
    use_bias: whether to add a bias.
    dtype: computation dtype (None: from inputs and params).
    param_dtype: dtype of ``kernel`` and ``bias`` (default float32).
    kernel_init: initializer of ``kernel``, shape ``(in_features, out_features)``.
    bias_init: initializer of ``bias``, shape ``(out_features,)``.
    rngs: uses the ``params`` stream.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> layer = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
    >>> layer(jnp.ones((2, 3))).shape, layer.kernel.value.shape
    ((2, 4), (3, 4))
  """

  def __init__(
    self,
    in_features: int,
    out_features: int,
    *,
    use_bias: bool = True,
    dtype: Any = None,
    param_dtype: Any = jnp.float32,
    kernel_init: Initializer = initializers.default_kernel_init,
    bias_init: Initializer = initializers.default_bias_init,
    rngs: Rngs,
  ):
    self.in_features = in_features
    self.out_features = out_features
    self.use_bias = use_bias
    self.dtype = dtype
    self.kernel = Param(kernel_init(rngs.params(), (in_features, out_features), param_dtype))
    self.bias = Param(bias_init(rngs.params(), (out_features,), param_dtype)) if use_bias else None

  def __call__(self, x: Float[Array, "*batch in"]) -> Float[Array, "*batch out"]:
    with jax.named_scope(type(self).__name__):
      kernel = self.kernel.value
      if self.dtype is not None:
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
      y = x @ kernel
      if self.bias is not None:
        bias = self.bias.value
        y = y + (bias.astype(self.dtype) if self.dtype is not None else bias)
      return y

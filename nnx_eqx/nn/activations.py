"""Activation functions under flax.nnx's names (``jax.nn`` re-exported) and ``PReLU``.

Example:
  >>> import jax.numpy as jnp, nnx_eqx as nnx
  >>> nnx.relu(jnp.array([-1.0, 2.0])).tolist(), nnx.one_hot(jnp.array([1]), 3).tolist()
  ([0.0, 2.0], [[0.0, 1.0, 0.0]])
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
from jax.nn import celu as celu
from jax.nn import elu as elu
from jax.nn import gelu as gelu
from jax.nn import glu as glu
from jax.nn import hard_sigmoid as hard_sigmoid
from jax.nn import hard_silu as hard_silu
from jax.nn import hard_swish as hard_swish
from jax.nn import hard_tanh as hard_tanh
from jax.nn import identity as identity
from jax.nn import leaky_relu as leaky_relu
from jax.nn import log_sigmoid as log_sigmoid
from jax.nn import log_softmax as log_softmax
from jax.nn import logsumexp as logsumexp
from jax.nn import one_hot as one_hot
from jax.nn import relu as relu
from jax.nn import relu6 as relu6
from jax.nn import selu as selu
from jax.nn import sigmoid as sigmoid
from jax.nn import silu as silu
from jax.nn import soft_sign as soft_sign
from jax.nn import softmax as softmax
from jax.nn import softplus as softplus
from jax.nn import standardize as standardize
from jax.nn import swish as swish
from jax.numpy import tanh as tanh
from jaxtyping import Array, Float

from ..graph.variables._variables import Param
from ..module._module import Module
from ._common import Dtype, PromoteDtypeFn, promote_dtype


class PReLU(Module):
  """Parametric ReLU (He et al., 2015): ``x if x >= 0 else negative_slope * x``
  with a learned scalar ``negative_slope`` (as flax.nnx.PReLU).

  Args:
    negative_slope_init: initial slope (default 0.01).
    param_dtype: dtype of the slope Param.
    dtype: computation dtype (default: that of the input). When given, the input
      and the slope go through ``promote_dtype`` with it; else the slope is cast to
      the input's dtype (as flax.nnx).
    promote_dtype: ``f((inputs, slope), dtype=dtype) -> (inputs, slope)`` (default
      :func:`nnx.nn.promote_dtype <nnx_eqx.nn.promote_dtype>`).
    negative_slope_metadata: metadata of the slope Param (e.g. ``sharding``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.PReLU(0.1)(jnp.array([-2.0, 3.0])).tolist()
    [-0.2..., 3.0]
  """

  def __init__(
    self,
    negative_slope_init: float = 0.01,
    *,
    dtype: Dtype | None = None,
    param_dtype=jnp.float32,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    negative_slope_metadata: Mapping[str, Any] = MappingProxyType({}),
  ):
    self.negative_slope = Param(
      jnp.asarray(negative_slope_init, dtype=param_dtype), **negative_slope_metadata
    )
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.promote_dtype = promote_dtype

  def __call__(self, inputs: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      slope = self.negative_slope.value
      if self.dtype is not None:
        x, slope = self.promote_dtype((x, slope), dtype=self.dtype)
      else:
        slope = jnp.asarray(slope, x.dtype)
      return jnp.where(x >= 0, x, slope * x)

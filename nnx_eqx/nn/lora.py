"""Low-rank adaptation: ``LoRA`` (``x @ a @ b``, optionally added to a base
module's output) and ``LoRALinear`` (a Linear plus a LoRA branch)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array as Array  # flax.nnx.nn.lora exports the Array alias

from ..graph.variables._variables import Param, Variable
from ..module._module import Module
from ..module._rngs import Rngs
from . import initializers
from ._common import LayerConfigError, check_features, promote_dtype, read
from .linear import Linear

Dtype = Any
Initializer = Callable[..., jax.Array]


class LoRAParam(Param):
  """The Param type of LoRA's low-rank factors (so optimizers can select them alone).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> isinstance(nnx.LoRAParam(jnp.ones(2)), nnx.Param)
    True
  """


default_a_initializer = initializers.he_uniform()
default_b_initializer = initializers.zeros


class LoRA(Module):
  """A low-rank update ``y = x @ lora_a @ lora_b`` (+ ``base_module(x)`` if given).

  Args:
    in_features: size of the last input axis.
    lora_rank: the rank ``r``: ``lora_a`` is ``(in_features, r)``, ``lora_b``
      ``(r, out_features)``.
    out_features: size of the last output axis.
    base_module: a callable module whose output is added (extra call keywords
      are passed to it).
    dtype: computation dtype (None: promoted from input and params).
    param_dtype: dtype of the factors (float32).
    a_initializer, b_initializer: initializers of the factors (He uniform, zeros).
    lora_param_type: Variable type of the factors (``LoRAParam``).
    promote_dtype: ``((x, a, b), dtype=...) -> (x, a, b)`` dtype promotion.
    rngs: uses the ``params`` stream.
    a_metadata, b_metadata: metadata of the factors.

  Input ``x``: ``(..., in_features)``; output ``(..., out_features)``.

  Raises:
    InputShapeError: if the last axis of ``x`` is not ``in_features``.
    LayerConfigError: if ``base_module`` is not callable.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> lora = nnx.LoRA(3, 2, 4, rngs=nnx.Rngs(0))
    >>> lora.lora_a.shape, lora.lora_b.shape, lora(jnp.ones((5, 3))).shape
    ((3, 2), (2, 4), (5, 4))
  """

  def __init__(
    self,
    in_features: int,
    lora_rank: int,
    out_features: int,
    *,
    base_module: Any = None,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    a_initializer: Initializer = default_a_initializer,
    b_initializer: Initializer = default_b_initializer,
    lora_param_type: type[Variable] = LoRAParam,
    promote_dtype: Callable[..., tuple] = promote_dtype,
    rngs: Rngs,
    a_metadata: Mapping[str, Any] | None = None,
    b_metadata: Mapping[str, Any] | None = None,
  ):
    if base_module is not None and not callable(base_module):
      raise LayerConfigError(
        f"LoRA: base_module must be callable, got {type(base_module).__name__}."
      )
    self.in_features = in_features
    self.out_features = out_features
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.lora_param_type = lora_param_type
    self.base_module = base_module
    self.promote_dtype = promote_dtype
    key_a, key_b = rngs.params(), rngs.params()
    self.lora_a = lora_param_type(
      a_initializer(key_a, (in_features, lora_rank), param_dtype), **(a_metadata or {})
    )
    self.lora_b = lora_param_type(
      b_initializer(key_b, (lora_rank, out_features), param_dtype), **(b_metadata or {})
    )

  def __call__(self, x: jax.Array, **kwargs: Any) -> jax.Array:
    with jax.named_scope(type(self).__name__):
      check_features(type(self).__name__, x, -1, self.in_features)
      x, a, b = self.promote_dtype((x, read(self.lora_a), read(self.lora_b)), dtype=self.dtype)
      out = x @ a @ b
      if self.base_module is not None:
        out = out + self.base_module(x, **kwargs)
      return out


class LoRALinear(Linear):
  """A :class:`Linear` whose output gets a LoRA branch: ``Linear(x) + lora(x)``.

  Its State holds Linear's ``kernel``/``bias`` plus ``lora/lora_a``, ``lora/lora_b``.

  Args:
    in_features, out_features: as for Linear.
    lora_rank: rank of the branch.
    lora_dtype, lora_param_dtype: ``dtype``/``param_dtype`` of the branch.
    a_initializer, b_initializer, lora_param_type, a_metadata, b_metadata: see LoRA.
    lora_promote_dtype: ``promote_dtype`` of the branch.
    rngs: uses the ``params`` stream.
    **kwargs: passed to Linear (``use_bias``, ``dtype``, ...).

  Raises:
    InputShapeError: if the last axis of ``x`` is not ``in_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> layer = nnx.LoRALinear(3, 4, lora_rank=2, rngs=nnx.Rngs(0))
    >>> x = jnp.ones((5, 3))
    >>> bool(jnp.allclose(layer(x), x @ layer.kernel.value + layer.bias.value))  # b starts at 0
    True
  """

  def __init__(
    self,
    in_features: int,
    out_features: int,
    *,
    lora_rank: int,
    lora_dtype: Dtype | None = None,
    lora_param_dtype: Dtype = jnp.float32,
    a_initializer: Initializer = default_a_initializer,
    b_initializer: Initializer = default_b_initializer,
    lora_param_type: type[Variable] = LoRAParam,
    lora_promote_dtype: Callable[..., tuple] = promote_dtype,
    rngs: Rngs,
    a_metadata: Mapping[str, Any] | None = None,
    b_metadata: Mapping[str, Any] | None = None,
    **kwargs: Any,
  ):
    super().__init__(in_features, out_features, rngs=rngs, **kwargs)
    self.lora = LoRA(
      in_features,
      lora_rank,
      out_features,
      dtype=lora_dtype,
      param_dtype=lora_param_dtype,
      a_initializer=a_initializer,
      b_initializer=b_initializer,
      lora_param_type=lora_param_type,
      promote_dtype=lora_promote_dtype,
      rngs=rngs,
      a_metadata=a_metadata,
      b_metadata=b_metadata,
    )

  def __call__(self, x: jax.Array, out_sharding: Any = None) -> jax.Array:
    return super().__call__(x, out_sharding=out_sharding) + self.lora(x)

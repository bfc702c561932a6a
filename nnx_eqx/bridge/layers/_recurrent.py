"""``eqx.nn.GRUCell`` and ``eqx.nn.LSTMCell`` as NNX modules.

The gate order and bias placement are Equinox's (not flax's): a GRU adds
``bias_n`` inside the reset term, ``new = tanh(i_n + r * (h_n + bias_n))``.
Weights keep Equinox's layout ``(gates * hidden, in)``: with the transposed
(NNX-style) layout XLA compiles a matrix-vector product that moves more bytes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ...graph.variables._variables import Param
from ...module._module import Module
from ._layers import check_example
from ._sharding import sharding_errors


class GRUCell(Module):
  """``eqx.nn.GRUCell``: one step ``hidden' = cell(input, hidden)`` on unbatched vectors.

  Attributes:
    weight_ih: ``Param`` ``(3 * hidden_size, input_size)``.
    weight_hh: ``Param`` ``(3 * hidden_size, hidden_size)``.
    bias: ``Param`` ``(3 * hidden_size,)`` or None; bias_n: ``(hidden_size,)`` or None.
    input_size, hidden_size, use_bias: as Equinox.

  Raises:
    ExampleShapeError: ``input`` or the hidden state is not one example (a
      batch needs ``jax.vmap``, as in Equinox).
    ExplicitShardingError: JAX cannot shard the cell's equations on a mesh
      with Explicit axes.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.GRUCell(3, 4, key=jax.random.key(0))
    >>> m = nnx.from_eqx(e)
    >>> x, h = jnp.ones(3), jnp.zeros(4)
    >>> bool(jnp.allclose(m(x, h), e(x, h), atol=1e-6))
    True
  """

  weight_ih: Param
  weight_hh: Param
  bias: Param | None
  bias_n: Param | None
  input_size: int
  hidden_size: int
  use_bias: bool

  def __call__(self, input: jax.Array, hidden: jax.Array, *, key: Any = None) -> jax.Array:
    layer = "nnx.bridge.GRUCell (from eqx.nn.GRUCell)"
    with jax.named_scope("bridge.GRUCell"), sharding_errors(layer, input, hidden, self):
      check_example(layer, "input", input, (self.input_size,))
      check_example(layer, "hidden", hidden, (self.hidden_size,))
      bias: Any = 0
      bias_n: Any = 0
      if self.bias is not None and self.bias_n is not None:  # use_bias
        bias, bias_n = self.bias.value, self.bias_n.value
      i_r, i_z, i_n = jnp.split(self.weight_ih.value @ input + bias, 3)
      h_r, h_z, h_n = jnp.split(self.weight_hh.value @ hidden, 3)
      reset = jax.nn.sigmoid(i_r + h_r)
      update = jax.nn.sigmoid(i_z + h_z)
      new = jnp.tanh(i_n + reset * (h_n + bias_n))
      return new + update * (hidden - new)


class LSTMCell(Module):
  """``eqx.nn.LSTMCell``: one step ``(h', c') = cell(input, (h, c))`` on unbatched vectors.

  Attributes:
    weight_ih: ``Param`` ``(4 * hidden_size, input_size)``.
    weight_hh: ``Param`` ``(4 * hidden_size, hidden_size)``.
    bias: ``Param`` ``(4 * hidden_size,)`` or None.
    input_size, hidden_size, use_bias: as Equinox.

  Raises:
    ExampleShapeError: ``input`` or the hidden state is not one example (a
      batch needs ``jax.vmap``, as in Equinox).
    ExplicitShardingError: JAX cannot shard the cell's equations on a mesh
      with Explicit axes.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.LSTMCell(3, 4, key=jax.random.key(0)))
    >>> h, c = m(jnp.ones(3), (jnp.zeros(4), jnp.zeros(4)))
    >>> h.shape, c.shape
    ((4,), (4,))
  """

  weight_ih: Param
  weight_hh: Param
  bias: Param | None
  input_size: int
  hidden_size: int
  use_bias: bool

  def __call__(self, input: jax.Array, hidden: tuple, *, key: Any = None) -> tuple:
    layer = "nnx.bridge.LSTMCell (from eqx.nn.LSTMCell)"
    with jax.named_scope("bridge.LSTMCell"), sharding_errors(layer, input, hidden, self):
      h, c = hidden
      check_example(layer, "input", input, (self.input_size,))
      check_example(layer, "hidden[0]", h, (self.hidden_size,))
      check_example(layer, "hidden[1]", c, (self.hidden_size,))
      lin = self.weight_ih.value @ input + self.weight_hh.value @ h
      if self.bias is not None:  # use_bias
        lin = lin + self.bias.value
      i, f, g, o = jnp.split(lin, 4)
      i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
      c = f * c + i * g
      return o * jnp.tanh(c), c

"""Recurrent cells: ``LSTMCell``, ``OptimizedLSTMCell``, ``GRUCell``, ``SimpleCell``
(as flax.nnx). A cell maps ``(carry, x) -> (new_carry, y)`` for one time step;
``initialize_carry(input_shape)`` builds the first carry.

flax.nnx.nn.recurrent: ``RNN``, ``Bidirectional`` and ``flip_sequences`` (defined in
``_rnn``) are importable from here too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..module._module import Module
from ..module._rngs import Rngs, RngStream
from . import initializers
from ._common import (
  Dtype,
  Initializer,
  MissingRngsError,
  PromoteDtypeFn,
  check_features,
  promote_dtype,
)
from ._rnn import RNN as RNN
from ._rnn import Bidirectional as Bidirectional
from ._rnn import flip_sequences as flip_sequences
from .initializers import default_bias_init as default_bias_init
from .initializers import default_kernel_init as default_kernel_init
from .linear import Linear
from .stochastic import own_stream


def modified_orthogonal(key: jax.Array, shape: tuple[int, ...], dtype: Dtype = jnp.float32):
  """Orthogonal initializer computed in float32, then cast (safe for half precision)."""
  return initializers.orthogonal()(key, shape).astype(dtype)


class RNNCellBase(Module):
  """Base class of recurrent cells: ``__call__(carry, x) -> (carry, y)`` and
  :meth:`initialize_carry`. Subclasses set ``hidden_features``, ``param_dtype``,
  ``carry_init`` and ``rngs`` and define ``_carry_parts`` (how many arrays the carry holds).

  Example:
    >>> import nnx_eqx as nnx
    >>> isinstance(nnx.GRUCell(2, 3, rngs=nnx.Rngs(0)), nnx.RNNCellBase)
    True
  """

  _carry_parts = 1

  def initialize_carry(
    self,
    input_shape: tuple[int, ...],
    rngs: Rngs | RngStream | None = None,
    carry_init: Initializer | None = None,
  ) -> Any:
    """The initial carry for inputs of shape ``(*batch, in_features)``: arrays of
    shape ``(*batch, hidden_features)`` in ``param_dtype`` (zeros by default).

    Args:
      input_shape: shape of one time step's input.
      rngs: keys for ``carry_init`` (the ``carry`` stream of an ``Rngs``); not
        needed for the default zeros.
      carry_init: initializer (default: the constructor's, else zeros).

    Raises:
      MissingRngsError: if a non-default ``carry_init`` needs keys and no rngs
        were given or kept.

    Example:
      >>> import nnx_eqx as nnx
      >>> c, h = nnx.LSTMCell(3, 4, rngs=nnx.Rngs(0)).initialize_carry((2, 3))
      >>> c.shape, float(h.sum())
      ((2, 4), 0.0)
    """
    init = carry_init or self.carry_init
    rngs = rngs if rngs is not None else self.rngs
    draw: Callable[[], jax.Array]
    if isinstance(rngs, Rngs):
      draw = rngs.carry
    elif rngs is not None:
      draw = rngs
    elif init is not None:
      raise MissingRngsError(
        f"{type(self).__name__}.initialize_carry: carry_init needs PRNG keys. Fix: pass"
        " rngs=nnx.Rngs(carry=0)."
      )
    else:
      draw = functools.partial(jax.random.key, 0)  # zeros ignore the key
    init = init or initializers.zeros
    shape = (*input_shape[:-1], self.hidden_features)
    parts = tuple(init(draw(), shape, self.param_dtype) for _ in range(self._carry_parts))
    return parts if self._carry_parts > 1 else parts[0]

  @property
  def num_feature_axes(self) -> int:
    """Number of feature axes of the input (1)."""
    return 1

  def _setup(
    self,
    in_features,
    hidden_features,
    gate_fn,
    activation_fn,
    dtype,
    param_dtype,
    carry_init,
    keep_rngs,
    rngs,
  ):
    self.in_features = in_features
    self.hidden_features = hidden_features
    self.gate_fn = gate_fn
    self.activation_fn = activation_fn
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.carry_init = carry_init
    self.rngs = own_stream(rngs, "carry", type(self).__name__) if keep_rngs else None

  def _check(self, x) -> None:
    check_features(type(self).__name__, x, -1, self.in_features)


class LSTMCell(RNNCellBase):
  r"""Long short-term memory cell (Hochreiter & Schmidhuber, 1997), as flax.nnx.LSTMCell.

  .. math::
    i = \sigma(W_{ii} x + W_{hi} h + b_{hi}),\ f = \sigma(W_{if} x + W_{hf} h + b_{hf}),\
    g = \tanh(W_{ig} x + W_{hg} h + b_{hg}),\ o = \sigma(W_{io} x + W_{ho} h + b_{ho}),\
    c' = f c + i g,\ h' = o \tanh(c').

  Eight :class:`Linear` layers ``ii, if_, ig, io`` (input, no bias) and
  ``hi, hf, hg, ho`` (hidden, with bias). The carry is ``(c, h)``, each
  ``(*batch, hidden_features)``; the output is ``h'``.

  Args:
    in_features: input features.
    hidden_features: hidden (and output) features.
    gate_fn: gate activation (sigmoid).
    activation_fn: cell/output activation (tanh).
    kernel_init: input kernels (LeCun normal).
    recurrent_kernel_init: hidden kernels (orthogonal).
    bias_init: biases (zeros).
    dtype, param_dtype: as for :class:`Linear`.
    carry_init: default initializer of :meth:`initialize_carry`.
    keep_rngs: keep a fork of the ``carry`` stream for ``initialize_carry``.
    promote_dtype: passed to the :class:`Linear` layers.
    kernel_metadata, recurrent_kernel_metadata, bias_metadata: metadata of the
      input kernels, hidden kernels and biases.
    rngs: ``params`` stream.

  Raises:
    InputShapeError: if ``x.shape[-1] != in_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> cell = nnx.LSTMCell(3, 5, rngs=nnx.Rngs(0))
    >>> carry = cell.initialize_carry((2, 3))
    >>> (c, h), y = cell(carry, jnp.ones((2, 3)))
    >>> c.shape, y.shape
    ((2, 5), (2, 5))
  """

  _carry_parts = 2

  def __init__(
    self,
    in_features: int,
    hidden_features: int,
    *,
    gate_fn: Callable[..., Any] = jax.nn.sigmoid,
    activation_fn: Callable[..., Any] = jnp.tanh,
    kernel_init: Initializer = initializers.default_kernel_init,
    recurrent_kernel_init: Initializer = modified_orthogonal,
    bias_init: Initializer = initializers.zeros,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    carry_init: Initializer | None = None,
    keep_rngs: bool = False,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    kernel_metadata: Mapping[str, Any] | None = None,
    recurrent_kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self._setup(
      in_features,
      hidden_features,
      gate_fn,
      activation_fn,
      dtype,
      param_dtype,
      carry_init,
      keep_rngs,
      rngs,
    )
    lin = dict(dtype=dtype, param_dtype=param_dtype, promote_dtype=promote_dtype, rngs=rngs)
    dense_i = lambda: Linear(
      in_features,
      hidden_features,
      use_bias=False,
      kernel_init=kernel_init,
      kernel_metadata=kernel_metadata,
      **lin,
    )
    dense_h = lambda: Linear(
      hidden_features,
      hidden_features,
      kernel_init=recurrent_kernel_init,
      bias_init=bias_init,
      kernel_metadata=recurrent_kernel_metadata,
      bias_metadata=bias_metadata,
      **lin,
    )
    self.ii, self.if_, self.ig, self.io = dense_i(), dense_i(), dense_i(), dense_i()
    self.hi, self.hf, self.hg, self.ho = dense_h(), dense_h(), dense_h(), dense_h()

  def __call__(
    self, carry: tuple[Array, Array], inputs: Float[Array, "*batch in"]
  ) -> tuple[tuple[Array, Array], Float[Array, "*batch hidden"]]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      self._check(x)
      c, h = carry
      i = self.gate_fn(self.ii(x) + self.hi(h))
      f = self.gate_fn(self.if_(x) + self.hf(h))
      g = self.activation_fn(self.ig(x) + self.hg(h))
      o = self.gate_fn(self.io(x) + self.ho(h))
      new_c = f * c + i * g
      new_h = o * self.activation_fn(new_c)
      return (new_c, new_h), new_h


class OptimizedLSTMCell(RNNCellBase):
  """An LSTM cell computing the four gates with two fused matmuls (as
  flax.nnx.OptimizedLSTMCell): ``dense_i`` ``(in, 4 * hidden)`` without bias and
  ``dense_h`` ``(hidden, 4 * hidden)`` with bias, gates in the order i, f, g, o.
  Same equations, arguments and carry as :class:`LSTMCell`.

  Raises:
    InputShapeError: if ``x.shape[-1] != in_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> cell = nnx.OptimizedLSTMCell(3, 5, rngs=nnx.Rngs(0))
    >>> (c, h), y = cell(cell.initialize_carry((3,)), jnp.ones(3))
    >>> cell.dense_h.kernel.value.shape, y.shape
    ((5, 20), (5,))
  """

  _carry_parts = 2

  def __init__(
    self,
    in_features: int,
    hidden_features: int,
    *,
    gate_fn: Callable[..., Any] = jax.nn.sigmoid,
    activation_fn: Callable[..., Any] = jnp.tanh,
    kernel_init: Initializer = initializers.default_kernel_init,
    recurrent_kernel_init: Initializer = initializers.orthogonal(),
    bias_init: Initializer = initializers.zeros,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    carry_init: Initializer | None = None,
    keep_rngs: bool = False,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    kernel_metadata: Mapping[str, Any] | None = None,
    recurrent_kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self._setup(
      in_features,
      hidden_features,
      gate_fn,
      activation_fn,
      dtype,
      param_dtype,
      carry_init,
      keep_rngs,
      rngs,
    )
    lin = dict(dtype=dtype, param_dtype=param_dtype, promote_dtype=promote_dtype, rngs=rngs)
    self.dense_i = Linear(
      in_features,
      4 * hidden_features,
      use_bias=False,
      kernel_init=kernel_init,
      kernel_metadata=kernel_metadata,
      **lin,
    )
    self.dense_h = Linear(
      hidden_features,
      4 * hidden_features,
      kernel_init=recurrent_kernel_init,
      bias_init=bias_init,
      kernel_metadata=recurrent_kernel_metadata,
      bias_metadata=bias_metadata,
      **lin,
    )

  def __call__(
    self, carry: tuple[Array, Array], inputs: Float[Array, "*batch in"]
  ) -> tuple[tuple[Array, Array], Float[Array, "*batch hidden"]]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      self._check(x)
      c, h = carry
      i, f, g, o = jnp.split(self.dense_i(x) + self.dense_h(h), 4, axis=-1)
      new_c = self.gate_fn(f) * c + self.gate_fn(i) * self.activation_fn(g)
      new_h = self.gate_fn(o) * self.activation_fn(new_c)
      return (new_c, new_h), new_h


class GRUCell(RNNCellBase):
  r"""Gated recurrent unit (Cho et al., 2014), as flax.nnx.GRUCell.

  .. math::
    r = \sigma(W_{ir} x + b_{ir} + W_{hr} h),\ z = \sigma(W_{iz} x + b_{iz} + W_{hz} h),\
    n = \tanh(W_{in} x + b_{in} + r (W_{hn} h)),\ h' = (1 - z) n + z h.

  ``dense_i`` ``(in, 3 * hidden)`` with bias and ``dense_h`` ``(hidden, 3 * hidden)``
  without, gates in the order r, z, n. The carry and the output are ``h``.
  Arguments as :class:`LSTMCell`.

  Raises:
    InputShapeError: if ``x.shape[-1] != in_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> cell = nnx.GRUCell(3, 4, rngs=nnx.Rngs(0))
    >>> h, y = cell(cell.initialize_carry((2, 3)), jnp.ones((2, 3)))
    >>> h.shape
    (2, 4)
  """

  def __init__(
    self,
    in_features: int,
    hidden_features: int,
    *,
    gate_fn: Callable[..., Any] = jax.nn.sigmoid,
    activation_fn: Callable[..., Any] = jnp.tanh,
    kernel_init: Initializer = initializers.default_kernel_init,
    recurrent_kernel_init: Initializer = initializers.orthogonal(),
    bias_init: Initializer = initializers.zeros,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    carry_init: Initializer | None = None,
    keep_rngs: bool = False,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    kernel_metadata: Mapping[str, Any] | None = None,
    recurrent_kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self._setup(
      in_features,
      hidden_features,
      gate_fn,
      activation_fn,
      dtype,
      param_dtype,
      carry_init,
      keep_rngs,
      rngs,
    )
    lin = dict(dtype=dtype, param_dtype=param_dtype, promote_dtype=promote_dtype, rngs=rngs)
    self.dense_i = Linear(
      in_features,
      3 * hidden_features,
      kernel_init=kernel_init,
      bias_init=bias_init,
      kernel_metadata=kernel_metadata,
      bias_metadata=bias_metadata,
      **lin,
    )
    self.dense_h = Linear(
      hidden_features,
      3 * hidden_features,
      use_bias=False,
      kernel_init=recurrent_kernel_init,
      kernel_metadata=recurrent_kernel_metadata,
      **lin,
    )

  def __call__(
    self, carry: Array, inputs: Float[Array, "*batch in"]
  ) -> tuple[Array, Float[Array, "*batch hidden"]]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      self._check(x)
      h = carry
      xr, xz, xn = jnp.split(self.dense_i(x), 3, axis=-1)
      hr, hz, hn = jnp.split(self.dense_h(h), 3, axis=-1)
      r = self.gate_fn(xr + hr)
      z = self.gate_fn(xz + hz)
      n = self.activation_fn(xn + r * hn)
      new_h = (1.0 - z) * n + z * h
      return new_h, new_h


class SimpleCell(RNNCellBase):
  r"""An Elman cell, as flax.nnx.SimpleCell: :math:`h' = \tanh(W_i x + b_i + W_h h)`
  (``+ h`` inside the activation with ``residual``). ``dense_i`` has a bias,
  ``dense_h`` none. The carry and the output are ``h``.

  Args:
    in_features, hidden_features, dtype, param_dtype, carry_init, keep_rngs,
    promote_dtype, kernel_metadata, recurrent_kernel_metadata, bias_metadata,
    rngs: as :class:`LSTMCell`.
    residual: add the previous hidden state before the activation.
    activation_fn: default tanh.
    kernel_init, recurrent_kernel_init, bias_init: LeCun normal, orthogonal, zeros.

  Raises:
    InputShapeError: if ``x.shape[-1] != in_features``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> cell = nnx.SimpleCell(3, 4, rngs=nnx.Rngs(0))
    >>> h, y = cell(cell.initialize_carry((3,)), jnp.ones(3))
    >>> y.shape
    (4,)
  """

  def __init__(
    self,
    in_features: int,
    hidden_features: int,
    *,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    carry_init: Initializer | None = None,
    residual: bool = False,
    activation_fn: Callable[..., Any] = jnp.tanh,
    kernel_init: Initializer = initializers.default_kernel_init,
    recurrent_kernel_init: Initializer = initializers.orthogonal(),
    bias_init: Initializer = initializers.zeros,
    keep_rngs: bool = False,
    promote_dtype: PromoteDtypeFn = promote_dtype,
    kernel_metadata: Mapping[str, Any] | None = None,
    recurrent_kernel_metadata: Mapping[str, Any] | None = None,
    bias_metadata: Mapping[str, Any] | None = None,
    rngs: Rngs,
  ):
    self._setup(
      in_features,
      hidden_features,
      None,
      activation_fn,
      dtype,
      param_dtype,
      carry_init,
      keep_rngs,
      rngs,
    )
    self.residual = residual
    lin = dict(dtype=dtype, param_dtype=param_dtype, promote_dtype=promote_dtype, rngs=rngs)
    self.dense_h = Linear(
      hidden_features,
      hidden_features,
      use_bias=False,
      kernel_init=recurrent_kernel_init,
      kernel_metadata=recurrent_kernel_metadata,
      **lin,
    )
    self.dense_i = Linear(
      in_features,
      hidden_features,
      kernel_init=kernel_init,
      bias_init=bias_init,
      kernel_metadata=kernel_metadata,
      bias_metadata=bias_metadata,
      **lin,
    )

  def __call__(
    self, carry: Array, inputs: Float[Array, "*batch in"]
  ) -> tuple[Array, Float[Array, "*batch hidden"]]:
    x = inputs  # flax.nnx's parameter name (callers may pass inputs=)
    with jax.named_scope(type(self).__name__):
      self._check(x)
      new = self.dense_i(x) + self.dense_h(carry)
      if self.residual:
        new = new + carry
      new = self.activation_fn(new)
      return new, new

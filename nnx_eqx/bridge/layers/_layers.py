"""NNX modules that compute Equinox's layer equations with Equinox's calling convention.

``nnx.from_eqx`` builds these for the ``eqx.nn`` layers (unbatched,
channels-first inputs; a ``key=`` keyword that is ignored or used for dropout).
Parameters keep Equinox's layouts and each ``__call__`` runs Equinox's
equations op for op, so a converted model is its source's program (same
StableHLO, same bits). They are plain NNX modules: ``nnx.split``, ``nnx.jit``,
``nnx.grad`` and ``nnx.Optimizer`` apply.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr
from jax import lax

from ...graph.variables._variables import Param
from ...module._module import Module
from ...module._pytree import Data
from ...module._rngs import Rngs, RngStream
from ...nn._common import read
from .._errors import ExampleShapeError, ExplicitShardingError, MissingKeyError, UnboundAxisError
from ..convert._random import draw_key, dropout_active, resolve_inference
from ._sharding import sharding_errors


def equinox_name(attr: str) -> property:
  """A property under Equinox's field name that reads and sets ``attr`` (the same
  object), so Equinox code (``m.weight``, ``eqx.tree_at(lambda m: m.weight, ...)``)
  runs on a layer whose NNX attribute has another name."""

  def get(self: Any) -> Any:
    return getattr(self, attr)

  def set_(self: Any, value: Any) -> None:
    setattr(self, attr, value)

  return property(get, set_, doc=f"Equinox's name for ``{attr}`` (the same object).")


def check_example(layer: str, arg: str, x: Any, expected: tuple) -> None:
  """Raises unless ``x`` has the shape of one example, ``expected``.

  A check on static shapes while tracing: it adds no operation to the program.

  Raises:
    ExampleShapeError: naming ``layer``, ``arg``, both shapes and the fix
      (``jax.vmap`` for what looks like a batch).
  """
  got = tuple(jnp.shape(x))
  if got != tuple(expected):
    raise ExampleShapeError(layer, arg, tuple(expected), got)


def _matmul_fails(shape: tuple, n: int) -> bool:
  """Whether ``weight @ x`` fails for ``weight`` of shape ``(_, n)`` and ``x`` of
  ``shape`` (Equinox's own equations accept any ``x`` it does not fail on)."""
  if len(shape) == 0:
    return True
  return shape[0] != n if len(shape) == 1 else shape[-2] != n


def check_linear_input(layer: str, x: Any, in_features: int | str) -> None:
  """The input check of ``eqx.nn.Linear``'s equations (and ``MLP``'s): ``()`` for
  ``"scalar"``, else an ``x`` that ``weight @ x`` accepts, as Equinox runs it.

  Raises:
    ExampleShapeError: ``x`` is not one example (see :func:`check_example`).
  """
  shape = tuple(jnp.shape(x))
  if in_features == "scalar":
    check_example(layer, "x", x, ())
  elif _matmul_fails(shape, int(in_features)):
    raise ExampleShapeError(layer, "x", (int(in_features),), shape)


class Linear(Module):
  """``eqx.nn.Linear`` in Equinox's layout: ``y = weight @ x + bias``.

  ``nnx.from_eqx`` converts every ``eqx.nn.Linear`` to this class, wherever it
  sits (at the root, inside ``MLP``/``Sequential``/``MultiheadAttention`` or a
  module of your own): the weight keeps its ``(out, in)`` orientation and the
  layer runs Equinox's equations, so the converted model compiles to the same
  program as the source (an ``nnx.Linear`` holding ``weight.T`` would compute
  ``x @ kernel``, another ``dot_general`` that rounds differently). It is a
  plain NNX module: ``nnx.Optimizer``, filters, Variable metadata (sharding),
  ``nnx.vmap``/``nnx.scan`` over stacked layers and ``nnx.LoRA(base_module=...)``
  apply. ``nnx.from_eqx(model, native=True)`` gives ``nnx.Linear`` instead.

  Attributes:
    weight: ``Param`` of shape ``(out_features, in_features)``.
    bias: ``Param`` of shape ``(out_features,)``, or None.
    in_features, out_features: ints, or ``"scalar"`` (as Equinox).
    use_bias: whether there is a bias.

  Raises:
    ExampleShapeError: ``x`` is not one example (``(in_features,)``, or ``()``
      for ``in_features="scalar"``): a batch needs ``jax.vmap``, as in Equinox.
    ExplicitShardingError: JAX cannot shard ``weight @ x`` on a mesh with
      Explicit axes (e.g. both contracted axes sharded).

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.Linear(3, 2, key=jax.random.key(0))
    >>> m = nnx.from_eqx(e)
    >>> type(m) is nnx.bridge.Linear, m.weight.value.shape, m(jnp.ones(3)).shape
    (True, (2, 3), (2,))
    >>> bool((m(jnp.ones(3)) == e(jnp.ones(3))).all())
    True
  """

  weight: Param
  bias: Data[Param | None]  # data: None is a pytree child, as in Equinox
  in_features: int | str
  out_features: int | str
  use_bias: bool

  def __call__(self, x: jax.Array, *, key: Any = None) -> jax.Array:
    layer = "nnx.bridge.Linear (from eqx.nn.Linear)"
    with jax.named_scope("bridge.Linear"), sharding_errors(layer, x, self):
      check_linear_input(layer, x, self.in_features)
      if self.in_features == "scalar":
        x = jnp.broadcast_to(x, (1,))
      y = read(self.weight) @ x
      if self.bias is not None:
        y = y + read(self.bias)
      if self.out_features == "scalar":
        y = jnp.squeeze(y)
      return y


def _conv_padding(m: Conv, x: jax.Array) -> tuple[jax.Array, Any]:
  if m.padding_mode == "ZEROS":
    return x, m.padding
  if isinstance(m.padding, str):
    rhs = tuple(d * (k - 1) + 1 for k, d in zip(m.kernel_size, m.dilation))
    pads = lax.padtype_to_pads(x.shape[1:], rhs, m.stride, m.padding)
  else:
    pads = list(m.padding)
  mode = {"REFLECT": "reflect", "REPLICATE": "edge", "CIRCULAR": "wrap"}[m.padding_mode]
  return jnp.pad(x, [(0, 0), *pads], mode), "VALID"


class Conv(Module):
  """``eqx.nn.Conv1d/2d/3d``: unbatched, channels-first input ``(in, *spatial)``.

  The parameters keep Equinox's layout, so the compiled program is Equinox's
  (an ``nnx.Conv``-style ``(*kernel_size, in, out)`` kernel would let XLA skip a
  kernel transpose and change the bytes each call moves).

  Attributes:
    weight: ``Param`` of shape ``(out_channels, in_channels // groups,
      *kernel_size)``; ``weight.transpose(2, ..., 1, 0)`` is the NNX layout.
    bias: ``Param`` of shape ``(out_channels, 1, ..., 1)``, or None.
    num_spatial_dims, in_channels, out_channels, kernel_size, stride, padding,
    dilation, groups, use_bias, padding_mode: as in Equinox (padding defaults
      to 0 there, not ``'SAME'`` as in ``nnx.Conv``).

  Raises:
    ExampleShapeError: ``x`` is not one example ``(in_channels, *spatial)``
      (a batch needs ``jax.vmap``, as in Equinox).
    ExplicitShardingError: JAX cannot shard the convolution on a mesh with
      Explicit axes.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.Conv2d(1, 4, 3, key=jax.random.key(0)))
    >>> m.weight.value.shape, m(jnp.ones((1, 8, 8))).shape
    ((4, 1, 3, 3), (4, 6, 6))
  """

  weight: Param
  bias: Data[Param | None]  # data: None is a pytree child, as in Equinox
  num_spatial_dims: int
  in_channels: int
  out_channels: int
  kernel_size: tuple[int, ...]
  stride: tuple[int, ...]
  padding: Any
  dilation: tuple[int, ...]
  groups: int
  use_bias: bool
  padding_mode: str

  def __call__(self, x: jax.Array, *, key: Any = None) -> jax.Array:
    n = self.num_spatial_dims
    layer = f"nnx.bridge.Conv (from eqx.nn.Conv{n}d)"
    with jax.named_scope("bridge.Conv"), sharding_errors(layer, x, self):
      if x.ndim != n + 1 or x.shape[0] != self.in_channels:
        want = f"({self.in_channels}, *spatial), {n} spatial axes"
        raise ExampleShapeError(layer, "x", want, x.shape, rank=n + 1)
      x, padding = _conv_padding(self, x)
      # expand_dims/squeeze as Equinox writes them: older jax lowers x[None]/y[0] otherwise
      y = lax.conv_general_dilated(
        jnp.expand_dims(x, axis=0),
        read(self.weight),
        window_strides=self.stride,
        padding=padding,
        rhs_dilation=self.dilation,
        feature_group_count=self.groups,
      )
      y = jnp.squeeze(y, axis=0)
      if self.use_bias:  # Equinox's condition (its Linear asks ``bias is not None``)
        y = y + read(self.bias)
      return y


class Embedding(Module):
  """``eqx.nn.Embedding``: ``embedding[x]`` for a scalar integer index ``x``.

  Attributes:
    embedding: ``Param`` of shape ``(num_embeddings, embedding_size)``
      (Equinox's ``weight``).

  Raises:
    ExampleShapeError: ``x`` is not a scalar (use ``jax.vmap``, as in Equinox).

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.Embedding(10, 4, key=jax.random.key(0)))
    >>> m(jnp.array(3)).shape
    (4,)
  """

  embedding: Param
  num_embeddings: int
  embedding_size: int
  weight = equinox_name("embedding")

  def __call__(self, x: Any, *, key: Any = None) -> jax.Array:
    with jax.named_scope("bridge.Embedding"):
      check_example("nnx.bridge.Embedding (from eqx.nn.Embedding)", "x", x, ())
      return read(self.embedding)[x]


class Dropout(Module):
  """``eqx.nn.Dropout``: zeroes entries with probability ``rate``, scaling the rest.

  The key comes, in this order, from ``key=`` (Equinox's convention: the mask
  is Equinox's for that key, bit for bit), from ``rngs=`` given to the call
  (an ``nnx.Rngs``, whose ``"dropout"`` stream is used, an ``nnx.RngStream`` or
  a key: one key is drawn and used as ``key=``), or from the layer's own stream
  ``rngs``, which ``nnx.from_eqx(model, rngs=nnx.Rngs(dropout=0))`` forks for
  every converted Dropout and whose count advances on every call (so masks
  differ between calls, and ``nnx.jit`` writes the count back).

  Input ``x`` of any shape and float dtype; the output has the same shape and dtype.

  Attributes:
    rate: Equinox's ``p``.
    deterministic: Equinox's ``inference`` (``model.eval()`` and
      ``eqx.nn.inference_mode`` set it; ``module.inference`` reads it).
    rngs: the layer's ``nnx.RngStream``, or None (then keys come with the call).

  Raises:
    MissingKeyError: active and no key from any of the three (a
      ``RuntimeError``, as Equinox's).
    RngsTypeError: ``rngs`` of an unsupported type.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.Dropout(0.5)
    >>> m = nnx.from_eqx(e, rngs=nnx.Rngs(dropout=0))
    >>> k = jax.random.key(1)
    >>> bool((m(jnp.ones(4), key=k) == e(jnp.ones(4), key=k)).all())   # key= wins
    True
    >>> a, b = m(jnp.ones(4)), m(jnp.ones(4))                      # from the stream
    >>> int(m.rngs.count[...])
    2
  """

  rate: float
  deterministic: bool
  p = equinox_name("rate")
  rngs: RngStream | None = None  # a stream is set by from_eqx(..., rngs=...)

  def __call__(
    self,
    x: jax.Array,
    *,
    key: Any = None,
    inference: bool | None = None,
    deterministic: bool | None = None,
    rngs: Rngs | RngStream | jax.Array | None = None,
  ) -> jax.Array:
    with jax.named_scope("bridge.Dropout"):
      inference = resolve_inference(inference, deterministic, self.deterministic)
      if not dropout_active(self.rate, inference):
        return x
      if key is None:
        key = draw_key(rngs, self.rngs, "Dropout")
      q = 1 - lax.stop_gradient(self.rate)
      mask = jr.bernoulli(key, q, x.shape)
      return jnp.where(mask, x / q, 0)


class Identity(Module):
  """``eqx.nn.Identity``: returns its input.

  Example:
    >>> import equinox as eqx, nnx_eqx as nnx
    >>> nnx.from_eqx(eqx.nn.Identity())(3)
    3
  """

  def __call__(self, x: Any, *, key: Any = None) -> Any:
    return x


class Lambda(Module):
  """``eqx.nn.Lambda``: ``fn(x)``, ignoring ``key``.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.from_eqx(eqx.nn.Lambda(jax.nn.relu))(jnp.array([-1.0, 2.0])).tolist()
    [0.0, 2.0]
  """

  fn: Callable[..., Any]

  def __call__(self, x: Any, *, key: Any = None) -> Any:
    return self.fn(x)


_KEY_CACHE: dict[type, bool] = {}


def _takes_key(layer: Any) -> bool:
  t = type(layer)
  ok = _KEY_CACHE.get(t)
  if ok is None:
    try:
      params = inspect.signature(t.__call__).parameters.values()
      ok = any(p.name == "key" or p.kind is p.VAR_KEYWORD for p in params)
    except (TypeError, ValueError):
      ok = False
    _KEY_CACHE[t] = ok
  return ok


def is_stateful(layer: Any) -> bool:
  """Whether ``layer`` takes and returns a state (Equinox's ``StatefulLayer``)."""
  fn = getattr(type(layer), "is_stateful", None)
  return bool(fn(layer)) if callable(fn) else False


NO_STATE: Any = type("NoState", (), {"__repr__": lambda self: "NO_STATE"})()


class Sequential(Module):
  """``eqx.nn.Sequential``: applies ``layers`` in order.

  As in Equinox, a ``key`` is split across the layers that take one (``rngs=``
  given to the call draws that key from its ``"dropout"`` stream; without
  either, converted Dropouts use their own streams), and a
  ``state`` argument is threaded through stateful layers (``BatchNorm``); here
  the state lives in the layers' Variables, so any placeholder (e.g. None) can
  be passed and is returned unchanged. Without ``state`` the output alone is
  returned and stateful layers update their Variables in place.

  Raises:
    NnxError: ``state`` is an ``eqx.nn.State`` (a stateful layer's state lives
      in its Variables; pass a placeholder such as None).
    MissingKeyError: a Dropout in training mode gets no key (its path is named).
    ExampleShapeError: a layer gets an input that is not one example (its
      path is named).
    ExplicitShardingError: JAX cannot shard a layer's equations on a mesh with
      Explicit axes (its path is named).

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.Sequential([eqx.nn.Linear(2, 3, key=jax.random.key(0)),
    ...                        eqx.nn.Lambda(jax.nn.relu)])
    >>> m = nnx.from_eqx(e)
    >>> len(m), m(jnp.ones(2)).shape
    (2, (3,))
  """

  layers: tuple

  def __call__(
    self,
    x: Any,
    state: Any = NO_STATE,
    *,
    key: Any = None,
    rngs: Rngs | RngStream | jax.Array | None = None,
  ) -> Any:
    with jax.named_scope("bridge.Sequential"):
      if key is None and rngs is not None:  # one key, split over the layers as Equinox does
        key = draw_key(rngs, None, "Sequential")
      keys = [None] * len(self.layers) if key is None else jr.split(key, len(self.layers))
      for i, (layer, k) in enumerate(zip(self.layers, keys)):
        kw = {"key": k} if _takes_key(layer) else {}
        try:
          if is_stateful(layer):
            # Called without a state, a stateful layer still returns ``(x, state)``:
            # give it a placeholder and pass on only ``x``.
            x, new_state = layer(x, state=None if state is NO_STATE else state, **kw)
            state = state if state is NO_STATE else new_state
          else:
            x = layer(x, **kw)
        except (MissingKeyError, ExampleShapeError, ExplicitShardingError, UnboundAxisError) as err:
          err.add_parent("layers", i)
          raise
      return x if state is NO_STATE else (x, state)

  def is_stateful(self) -> bool:
    return any(is_stateful(layer) for layer in self.layers)

  def __getitem__(self, i: int | slice) -> Any:
    if isinstance(i, slice):
      out = Sequential()
      out.layers = self.layers[i]
      return out
    return self.layers[i]

  def __len__(self) -> int:
    return len(self.layers)

  def __iter__(self):
    return iter(self.layers)


class Pool(Module):
  """``eqx.nn.AvgPool1d/2d/3d`` and ``MaxPool1d/2d/3d`` on ``(channels, *spatial)``.

  Attributes:
    init, operation: the reduction's initial value and binary operation.
    average: True for average pooling (the window sum is divided by its size).
    num_spatial_dims, kernel_size, stride, padding, use_ceil: as in Equinox.

  Raises:
    ValueError: ``x`` does not have ``num_spatial_dims`` spatial dimensions.
    RuntimeError: a padding (with ``use_ceil``) exceeds the kernel size (as Equinox).

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.from_eqx(eqx.nn.MaxPool2d(2, 2))(jnp.ones((3, 8, 8))).shape
    (3, 4, 4)
  """

  init: Any
  operation: Callable[..., Any]
  average: bool
  num_spatial_dims: int
  kernel_size: tuple[int, ...]
  stride: tuple[int, ...]
  padding: tuple[tuple[int, int], ...]
  use_ceil: bool

  def __call__(self, x: jax.Array, *, key: Any = None) -> jax.Array:
    with jax.named_scope("bridge.Pool"):
      if x.ndim != self.num_spatial_dims + 1:
        raise ValueError(
          f"Input should have {self.num_spatial_dims} spatial dimensions, but input has"
          f" shape {x.shape}"
        )
      padding = self.padding
      if self.use_ceil:
        padding = tuple(
          (lo, hi) if (size + lo + hi - k) % s == 0 else (lo, hi + s)
          for size, (lo, hi), k, s in zip(x.shape[1:], padding, self.kernel_size, self.stride)
        )
      for (lo, hi), k in zip(padding, self.kernel_size):
        if max(lo, hi) > k:
          raise RuntimeError(
            "Paddings should be less than the size of the kernel. Padding"
            f" {(lo, hi)} received for kernel size {k}."
          )
      y = jnp.expand_dims(jnp.moveaxis(x, 0, -1), axis=0)
      y = lax.reduce_window(
        y,
        self.init,
        self.operation,
        (1, *self.kernel_size, 1),
        (1, *self.stride, 1),
        ((0, 0), *padding, (0, 0)),
      )
      y = jnp.moveaxis(jnp.squeeze(y, axis=0), -1, 0)
      if self.average:
        y = y / math.prod(self.kernel_size)
      return y


def _in_layer(layer: Any, i: int, x: jax.Array) -> jax.Array:
  """``layer(x)`` for the ``i``-th layer of an MLP; an error naming a layer's path
  gains ``layers[i]``."""
  try:
    return layer(x)
  except (ExampleShapeError, ExplicitShardingError) as err:
    err.add_parent("layers", i)
    raise


class MLP(Module):
  """``eqx.nn.MLP``: Linear layers with ``activation`` between them.

  Attributes:
    layers: a tuple of :class:`nnx.bridge.Linear` (Equinox's layout).
    activation, final_activation: applied elementwise (``jax.vmap``), as Equinox.
    in_size, out_size, width_size, depth, use_bias, use_final_bias: as Equinox.

  Raises:
    ExampleShapeError: ``x`` is not one example (``(in_size,)``): a batch
      needs ``jax.vmap``, as in Equinox.
    ExplicitShardingError: JAX cannot shard a layer's equations on a mesh with
      Explicit axes (the layer's path is named).

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(0)))
    >>> len(m.layers), m(jnp.ones(2)).shape
    (3, (3,))
  """

  layers: tuple
  activation: Callable[..., Any]
  final_activation: Callable[..., Any]
  use_bias: bool
  use_final_bias: bool
  in_size: int | str
  out_size: int | str
  width_size: int
  depth: int

  def __call__(self, x: jax.Array, *, key: Any = None) -> jax.Array:
    with jax.named_scope("bridge.MLP"):
      check_linear_input("nnx.bridge.MLP (from eqx.nn.MLP)", x, self.in_size)
      if self.depth == 0:  # Equinox applies no final activation then
        return _in_layer(self.layers[0], 0, x)
      for i, layer in enumerate(self.layers[:-1]):
        x = jax.vmap(self.activation)(_in_layer(layer, i, x))
      x = _in_layer(self.layers[-1], len(self.layers) - 1, x)
      if self.out_size == "scalar":
        return self.final_activation(x)
      return jax.vmap(self.final_activation)(x)

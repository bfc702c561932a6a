"""Shared helpers of the layers: errors, dtype promotion, flag resolution, input checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ..graph._errors import NnxError
from ..graph.api._functional import iter_graph
from ..graph.variables._variables import Param, Variable

Dtype = Any
Initializer = Any
PrecisionLike = Any
#: ``f(arrays, dtype=None, inexact=True) -> arrays``, e.g. :func:`promote_dtype`.
PromoteDtypeFn = Callable[..., tuple]


class InputShapeError(NnxError, ValueError):
  """A layer received an input whose shape does not fit its configuration
  (e.g. the wrong number of input features).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> try:
    ...   nnx.Linear(2, 3, rngs=nnx.Rngs(0))(jnp.ones((1, 5)))
    ... except nnx.InputShapeError as e:
    ...   print(e)
    Linear: input `x` has 5 features on axis -1 (shape (1, 5)), but the layer expects 2. ...
  """


class InputDtypeError(NnxError, TypeError):
  """A layer received an input of the wrong dtype (e.g. floats for ``Embed``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> try:
    ...   nnx.Embed(4, 2, rngs=nnx.Rngs(0))(jnp.array([1.0]))
    ... except nnx.InputDtypeError as e:
    ...   print(e)
    Embed: ids must be integers, got dtype float32. Fix: cast with `ids.astype(jnp.int32)`.
  """


class MissingRngsError(NnxError, ValueError):
  """A stochastic layer needs a PRNG key but has no ``rngs`` and was given none.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> try:
    ...   nnx.Dropout(0.5)(jnp.ones(3))
    ... except nnx.MissingRngsError as e:
    ...   print(e)
    Dropout: `deterministic` is False, but no `rngs` argument was provided to Dropout (the ...
  """


class RngsTypeError(NnxError, TypeError):
  """``rngs`` is not an ``nnx.Rngs``, an ``nnx.RngStream`` or a PRNG key.

  Example:
    >>> import nnx_eqx as nnx
    >>> issubclass(nnx.RngsTypeError, TypeError)   # e.g. nnx.Dropout(0.5, rngs=0)
    True
  """


class MissingFlagError(NnxError, ValueError):
  """A mode flag (``deterministic``, ``use_running_average``) is None both on the
  module and in the call.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> try:
    ...   nnx.BatchNorm(2, use_running_average=None)(jnp.ones((3, 2)))
    ... except nnx.MissingFlagError as e:
    ...   print(e)
    BatchNorm: `use_running_average` is None both as a call argument and as a module attribute. ...
  """


class LayerConfigError(NnxError, ValueError):
  """A layer was constructed (or called) with inconsistent arguments.

  Example:
    >>> import nnx_eqx as nnx
    >>> try:
    ...   nnx.GroupNorm(6, num_groups=4)
    ... except nnx.LayerConfigError as e:
    ...   print(e)
    GroupNorm: num_groups=4 does not divide num_features=6.
  """


class CacheError(NnxError, ValueError):
  """An autoregressive cache is missing or does not fit the input.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> mha = nnx.MultiHeadAttention(2, 4, decode=True, rngs=nnx.Rngs(0))
    >>> try:
    ...   mha(jnp.ones((1, 1, 4)))
    ... except nnx.CacheError as e:
    ...   print(e)
    MultiHeadAttention: decode=True but the cache is not initialized. Fix: call ...
  """


def first_from(*values: Any, flag: str, layer: str) -> Any:
  """The first value that is not None (call argument, then module attribute).

  Raises:
    MissingFlagError: if every value is None; the message names ``flag``.
  """
  for v in values:
    if v is not None:
      return v
  raise MissingFlagError(
    f"{layer}: `{flag}` is None both as a call argument and as a module attribute."
    f" Fix: pass `{flag}=True/False` to the call or to the constructor, or switch the"
    " whole model with `model.train()` / `model.eval()`."
  )


def canonicalize_dtype(*args: Any, dtype: Dtype | None = None, inexact: bool = True) -> Any:
  """The dtype ``args`` should be cast to: ``dtype`` if given, else their
  promoted dtype (standard promotion rules, even under ``strict`` mode, since
  the cast is explicit), made inexact if ``inexact``. As flax.nnx.

  Raises:
    LayerConfigError: if ``inexact`` and the given ``dtype`` is not inexact.

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.nn import canonicalize_dtype
    >>> canonicalize_dtype(jnp.ones(2, jnp.bfloat16), jnp.ones(2))
    dtype('float32')
    >>> canonicalize_dtype(jnp.ones(2, jnp.int32)), canonicalize_dtype(dtype=jnp.bfloat16)
    (dtype('float32'), dtype(bfloat16))
  """
  if dtype is None:
    arrays = [x for x in args if x is not None]
    with jax.numpy_dtype_promotion("standard"):
      dtype = jnp.result_type(*arrays)
    if inexact and not jnp.issubdtype(dtype, jnp.inexact):
      dtype = jnp.float32
  if inexact and not jnp.issubdtype(dtype, jnp.inexact):
    raise LayerConfigError(
      f"dtype must be a floating or complex dtype, got {jnp.dtype(dtype)}. Fix: pass"
      " e.g. dtype=jnp.float32."
    )
  return jnp.dtype(dtype)


def promote_dtype(args: tuple, /, *, dtype: Dtype | None = None, inexact: bool = True) -> tuple:
  """Casts every non-None array of ``args`` to one dtype (see :func:`canonicalize_dtype`).

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.nn import promote_dtype
    >>> x, w, b = promote_dtype((jnp.ones(2, jnp.bfloat16), jnp.ones(2), None))
    >>> x.dtype, w.dtype, b
    (dtype('float32'), dtype('float32'), None)
  """
  dt = canonicalize_dtype(*args, dtype=dtype, inexact=inexact)
  return tuple(None if x is None else jnp.asarray(x, dt) for x in args)


def read(x: Any) -> Any:
  """The value a layer computes with: a Variable's value, or ``x`` itself when
  ``x`` is an array (or None) that a pytree map or ``eqx.tree_at`` put where a
  Variable was, so such a layer keeps working, as flax.nnx 0.12's layers do
  (they read ``self.kernel[...]``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.nn._common import read
    >>> read(nnx.Param(jnp.ones(2))).tolist(), read(jnp.zeros(1)).tolist(), read(None)
    ([1.0, 1.0], [0.0], None)
  """
  return x.value if isinstance(x, Variable) else x


def canonicalize_tuple(x: int | Iterable[int]) -> tuple[int, ...]:
  """``3 -> (3,)``, ``[1, 2] -> (1, 2)``."""
  return tuple(x) if isinstance(x, Iterable) else (x,)


def check_features(layer: str, x: Any, axis: int, expected: int, arg: str = "x") -> None:
  """Raises if ``x.shape[axis] != expected``.

  Raises:
    InputShapeError: naming the layer, the axis, the expected and the actual size.
  """
  shape = jnp.shape(x)
  if len(shape) < (-axis if axis < 0 else axis + 1):
    raise InputShapeError(
      f"{layer}: input `{arg}` has shape {shape}, which has no axis {axis}; expected a"
      f" feature axis of size {expected}. Fix: pass an array of shape (..., {expected})."
    )
  if shape[axis] != expected:
    raise InputShapeError(
      f"{layer}: input `{arg}` has {shape[axis]} features on axis {axis} (shape {shape}),"
      f" but the layer expects {expected}. Fix: reshape the input, or build the layer"
      f" for {shape[axis]} input features."
    )


def params_key(rngs: Any) -> jax.Array:
  """A key from the ``params`` stream of ``rngs``, or a fixed key when ``rngs`` is None
  (for layers whose default initializers are constant)."""
  return rngs.params() if rngs is not None else jax.random.key(0)


def normalize_axes(axes: Sequence[int], ndim: int) -> tuple[int, ...]:
  """Sorted non-negative axes."""
  return tuple(sorted(a if a >= 0 else ndim + a for a in axes))


def optional_kwargs(**kwargs: Any) -> dict[str, Any]:
  """The keyword arguments that are not None.

  Layers pass ``preferred_element_type``/``out_sharding`` to the ``lax`` op (or a
  user's replacement of it) only when set, so a default call is the plain op and
  custom ops without those keywords keep working.

  Example:
    >>> from nnx_eqx.nn._common import optional_kwargs
    >>> optional_kwargs(preferred_element_type=None, out_sharding="x")
    {'out_sharding': 'x'}
  """
  return {k: v for k, v in kwargs.items() if v is not None}


def add_bias(y: Any, bias: Any) -> Any:
  """``y + bias`` (``bias`` broadcast from the right), or ``y`` when ``bias`` is None.

  When a ``preferred_element_type`` makes ``y`` wider than ``bias`` the two are
  promoted by the standard rules (as flax does), even under strict promotion.

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.nn._common import add_bias
    >>> add_bias(jnp.zeros((2, 3)), jnp.ones(3, jnp.bfloat16)).dtype
    dtype('float32')
  """
  if bias is None:
    return y
  if jnp.result_type(y) == jnp.result_type(bias):
    return y + bias
  with jax.numpy_dtype_promotion("standard"):
    return y + bias


def live_params(node: Any, predicate: Callable[..., bool] | None = None) -> list[tuple[tuple, Any]]:
  """``(path, param)`` for the ``Param`` objects inside ``node`` (the live Variables,
  not copies), optionally those for which ``predicate(path, param)`` holds.

  Example:
    >>> import nnx_eqx as nnx
    >>> from nnx_eqx.nn._common import live_params
    >>> layer = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> [(path, p is layer.kernel) for path, p in live_params(layer) if path == ("kernel",)]
    [(('kernel',), True)]
  """
  return [
    (path, v)
    for path, v in iter_graph(node)
    if isinstance(v, Param) and (predicate is None or predicate(path, v))
  ]

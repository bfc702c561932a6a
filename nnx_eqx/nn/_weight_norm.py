"""``WeightNorm`` (Salimans & Kingma, 2016): a wrapper that L2-normalizes a layer's
weights before every call (as flax.nnx.WeightNorm)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ..graph.state._filters import PathContains, to_predicate
from ..graph.variables._variables import Param
from ..module._containers import List
from ..module._module import Module
from ..module._rngs import Rngs
from . import initializers
from ._common import (
  Dtype,
  Initializer,
  LayerConfigError,
  PromoteDtypeFn,
  canonicalize_dtype,
  live_params,
)
from ._common import promote_dtype as default_promote_dtype
from ._norm_stats import Axes, _axes


class WeightScales(Module, Mapping):
  """:class:`WeightNorm`'s scales: a read-only mapping from the path of each
  normalized weight inside the wrapped layer (e.g. ``('kernel',)``) to its scale
  Param. The Params live in the List ``params``, in the order of ``paths``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> wn = nnx.WeightNorm(nnx.Linear(3, 2, rngs=nnx.Rngs(0)), rngs=nnx.Rngs(1))
    >>> wn.scales[("kernel",)].value.shape, list(wn.scales)
    ((2,), [('kernel',)])
  """

  def __init__(self, paths: tuple[tuple, ...], params: list[Param]):
    self.paths = tuple(paths)
    self.params = List(params)

  def __getitem__(self, path: tuple) -> Param:
    if path not in self.paths:
      raise KeyError(path)
    return self.params[self.paths.index(path)]

  def __iter__(self) -> Iterator[tuple]:
    return iter(self.paths)

  def __len__(self) -> int:
    return len(self.paths)


class WeightNorm(Module):
  """Wraps ``layer_instance``; each call first replaces every selected Param ``w``
  of the layer (in place) by ``scale * w / ||w||`` and then calls the layer.

  The norm is taken over every axis of ``w`` but ``feature_axes`` (default the
  last: one norm per output feature of a kernel); ``scale`` has the shape of
  those feature axes. ``scales`` (a :class:`WeightScales`, ``None`` without
  ``use_scale``) maps each selected Param's path inside the layer (e.g.
  ``('kernel',)``) to its scale Param, which trains with the other Params (as
  flax.nnx 0.12.12: ``'scales' in nnx.state(wn, nnx.Param)``). Normalizing is
  idempotent, so repeated calls keep the weights at norm ``scale``.

  Args:
    layer_instance: the wrapped Module.
    feature_axes: axes of ``w`` that keep their own norm (None: one norm for all).
    use_scale: learn a scale per feature (else the weights get unit norm).
    scale_init: initializer of the scales (default ones); called with a key and
      the scale shape, so the scales have its default dtype (float32).
    epsilon: added to the squared norm (default 1e-12).
    dtype: dtype of the normalized weights (default: promoted from the weight and
      the scale).
    param_dtype: kept for flax compatibility (the scale dtype comes from ``scale_init``).
    variable_filter: which Params to normalize (default
      ``nnx.PathContains('kernel')``); a filter of ``(path, variable)``.
    promote_dtype: kept for flax compatibility.
    rngs: ``params`` stream for ``scale_init``.

  Raises:
    LayerConfigError: (at call time) if the layer's selected Params are not the
      ones the scales were built for.

  Example:
    >>> import jax, jax.numpy as jnp, numpy as np, nnx_eqx as nnx
    >>> wn = nnx.WeightNorm(nnx.Linear(8, 4, rngs=nnx.Rngs(0)), rngs=nnx.Rngs(1))
    >>> wn(jnp.ones((5, 8))).shape
    (5, 4)
    >>> np.round(np.linalg.norm(wn.layer_instance.kernel.value, axis=0), 5).tolist()
    [1.0, 1.0, 1.0, 1.0]
    >>> list(wn.scales)
    [('kernel',)]
  """

  def __init__(
    self,
    layer_instance: Any,
    *,
    feature_axes: Axes | None = -1,
    use_scale: bool = True,
    scale_init: Initializer = initializers.ones,
    epsilon: float = 1e-12,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    variable_filter: Any = PathContains("kernel"),
    promote_dtype: PromoteDtypeFn = default_promote_dtype,
    rngs: Rngs,
  ):
    self.layer_instance = layer_instance
    self.feature_axes = () if feature_axes is None else feature_axes
    self.use_scale = use_scale
    self.epsilon = epsilon
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.variable_filter: Callable[..., bool] = to_predicate(variable_filter)
    self.promote_dtype = promote_dtype
    self.scales: WeightScales | None = None
    if use_scale:
      selected = self._selected()
      self.scales = WeightScales(
        tuple(path for path, _ in selected),
        [Param(scale_init(rngs.params(), self._scale_shape(w.value))) for _, w in selected],
      )

  def _selected(self) -> list[tuple[tuple, Param]]:
    return live_params(self.layer_instance, self.variable_filter)

  def _feature_axes(self, ndim: int) -> tuple[int, ...]:
    return _axes(ndim, self.feature_axes) if self.feature_axes != () else ()

  def _scale_shape(self, w: jax.Array) -> tuple[int, ...]:
    return tuple(w.shape[a] for a in self._feature_axes(w.ndim))

  def _normalized(self, w: jax.Array, scale: jax.Array | None) -> jax.Array:
    features = self._feature_axes(w.ndim)
    reduce = tuple(a for a in range(w.ndim) if a not in features)
    with jax.numpy_dtype_promotion("standard"):
      w_bar = w * lax.rsqrt((w * w).sum(axis=reduce, keepdims=True) + self.epsilon)
      if scale is not None:
        shape = [w.shape[a] if a in features else 1 for a in range(w.ndim)]
        w_bar = w_bar * scale.reshape(shape)
    out_dtype = canonicalize_dtype(w, scale, dtype=self.dtype)
    return jnp.asarray(w_bar, out_dtype)

  def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Normalizes the selected weights in place, then returns
    ``layer_instance(x, *args, **kwargs)``."""
    with jax.named_scope(type(self).__name__):
      scales = self.scales
      for path, w in self._selected():
        scale = None
        if scales is not None:
          if path not in scales:
            raise LayerConfigError(
              f"WeightNorm: no scale for the weight at path {path}; scales exist for"
              f" {list(scales)}. The wrapped layer's Params must not change after"
              " construction. Fix: build a new WeightNorm around the changed layer."
            )
          scale = scales[path].value
        w.value = self._normalized(w.value, scale)
      return self.layer_instance(x, *args, **kwargs)

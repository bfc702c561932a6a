"""``SpectralNorm`` (Miyato et al., 2018): a wrapper that divides a layer's weight
matrices by their largest singular value before every call (as flax.nnx.SpectralNorm)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ..graph.variables._variables import BatchStat
from ..module._containers import List
from ..module._module import Module
from ..module._rngs import Rngs
from . import initializers
from ._common import Dtype, LayerConfigError, canonicalize_dtype, first_from, live_params


def _l2_normalize(x: jax.Array, eps: float) -> jax.Array:
  return x * lax.rsqrt((x * x).sum(keepdims=True) + eps)


class SpectralNorm(Module):
  """Wraps ``layer_instance``; each call first replaces every weight ``W`` of the
  layer with two or more axes (in place) by ``W / sigma``, where ``sigma``
  estimates ``W``'s largest singular value by ``n_steps`` of power iteration,
  and then calls the layer.

  Weights with more than two axes are treated as matrices
  ``(prod(leading axes), last axis)``; vectors and scalars are left as they are.
  Each weight at path ``p`` in the layer has ``BatchStat`` s ``u`` ``(1, last
  axis)`` (the power iteration's vector, normal init) and ``sigma`` ``()``;
  ``batch_stats`` maps ``(*p, 'u')`` and ``(*p, 'sigma')`` to them. With
  ``update_stats`` they take the new values, so the estimate improves over
  calls. ``model.eval()`` / ``model.train()`` switch ``update_stats`` off / on
  (through the ``use_running_average`` attribute).

  Args:
    layer_instance: the wrapped Module.
    n_steps: power-iteration steps per call (0: no normalization).
    epsilon: added to the squared norms (default 1e-12).
    dtype: dtype of the normalized weights (default: promoted).
    param_dtype: dtype of ``u`` and ``sigma``.
    error_on_non_matrix: raise for weights with more than two axes instead of
      flattening them.
    update_stats: default of the call's ``update_stats``.
    rngs: ``params`` stream for the ``u`` vectors.

  Raises:
    LayerConfigError: with ``error_on_non_matrix``, for a weight with more than
      two axes; at call time, if the layer's weights are not the ones the
      statistics were built for.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> sn = nnx.SpectralNorm(nnx.Linear(4, 5, rngs=nnx.Rngs(0)), n_steps=20, rngs=nnx.Rngs(1))
    >>> y = sn(jnp.ones((3, 4)))
    >>> round(float(jnp.linalg.norm(sn.layer_instance.kernel.value, ord=2)), 3)
    1.0
    >>> sorted(sn.batch_stats)
    [('kernel', 'sigma'), ('kernel', 'u')]
  """

  def __init__(
    self,
    layer_instance: Any,
    *,
    n_steps: int = 1,
    epsilon: float = 1e-12,
    dtype: Dtype | None = None,
    param_dtype: Dtype = jnp.float32,
    error_on_non_matrix: bool = False,
    update_stats: bool = True,
    rngs: Rngs,
  ):
    self.layer_instance = layer_instance
    self.n_steps = n_steps
    self.epsilon = epsilon
    self.dtype = dtype
    self.param_dtype = param_dtype
    self.error_on_non_matrix = error_on_non_matrix
    self.use_running_average = not update_stats
    paths: list[tuple] = []
    stats: list[BatchStat] = []
    for path, w in live_params(layer_instance):
      matrix = self._as_matrix(path, w.value)
      if matrix is None:
        continue
      key = rngs.params()
      paths += [(*path, "u"), (*path, "sigma")]
      stats += [
        BatchStat(initializers.normal()(key, (1, matrix.shape[-1]), param_dtype)),
        BatchStat(initializers.ones(key, (), param_dtype)),
      ]
    self.stat_paths = tuple(paths)
    self.stat_list = List(stats)

  @property
  def batch_stats(self) -> dict[tuple, BatchStat]:
    """``{(*weight path, 'u' or 'sigma'): BatchStat}``."""
    return dict(zip(self.stat_paths, self.stat_list))

  def _as_matrix(self, path: tuple, w: jax.Array) -> jax.Array | None:
    if w.ndim <= 1 or self.n_steps < 1:
      return None
    if w.ndim > 2:
      if self.error_on_non_matrix:
        raise LayerConfigError(
          f"SpectralNorm: the weight at path {path} has {w.ndim} axes but"
          " error_on_non_matrix=True. Fix: pass error_on_non_matrix=False to flatten it"
          " to (-1, last axis)."
        )
      w = jnp.reshape(w, (-1, w.shape[-1]))
    return w

  def __call__(self, x: Any, update_stats: bool | None = None) -> Any:
    """Normalizes the weights in place (updating ``u``/``sigma`` if ``update_stats``),
    then returns ``layer_instance(x)``."""
    with jax.named_scope(type(self).__name__):
      update = first_from(
        update_stats,
        None if self.use_running_average is None else not self.use_running_average,
        flag="update_stats",
        layer=type(self).__name__,
      )
      stats = self.batch_stats
      for path, w in live_params(self.layer_instance):
        matrix = self._as_matrix(path, w.value)
        if matrix is None:
          continue
        if (*path, "u") not in stats:
          raise LayerConfigError(
            f"SpectralNorm: no statistics for the weight at path {path}. The wrapped"
            " layer's Params must not change after construction. Fix: build a new"
            " SpectralNorm around the changed layer."
          )
        u_var, sigma_var = stats[(*path, "u")], stats[(*path, "sigma")]
        w.value = self._normalized(matrix, w.value.shape, u_var, sigma_var, update)
      return self.layer_instance(x)

  def _normalized(self, w, shape, u_var: BatchStat, sigma_var: BatchStat, update: bool):
    with jax.numpy_dtype_promotion("standard"):
      u = u_var.value
      for _ in range(self.n_steps):
        v = _l2_normalize(jnp.matmul(u, w.T), self.epsilon)
        u = _l2_normalize(jnp.matmul(v, w), self.epsilon)
      u, v = lax.stop_gradient(u), lax.stop_gradient(v)
      sigma = jnp.matmul(jnp.matmul(v, w), u.T)[0, 0]
      w_bar = (w / jnp.where(sigma != 0, sigma, 1)).reshape(shape)
    if update:
      u_var.value = u
      sigma_var.value = sigma
    return jnp.asarray(w_bar, canonicalize_dtype(w_bar, u, v, sigma, dtype=self.dtype))

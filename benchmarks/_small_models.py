"""Small user-written Equinox models, trained Equinox-style, for the
``small_models`` table of ``bridge.py``: steps of 60-100 us where any fixed
per-call cost of a converted model shows.

* ``linear regression``: a weight vector and a bias, mean squared error;
* ``PCA``: a mean (not trained: ``stop_gradient``) and components, trained to
  maximise the projected variance with an orthonormality penalty;
* ``scaler pipeline``: a standard scaler (mean and scale, not trained) feeding an
  ``eqx.nn.Linear`` head through ``jax.vmap``.

Each runs the same step (``eqx.filter_jit`` + ``eqx.filter_value_and_grad`` +
optax SGD + ``eqx.apply_updates``) on the Equinox model and on its
``nnx.from_eqx`` conversion, on a batch of 64 examples of 8 features.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

FEATURES, BATCH = 8, 64


class LinearRegression(eqx.Module):
  weight: jax.Array
  bias: jax.Array

  def __init__(self, key: jax.Array):
    self.weight = jax.random.normal(key, (FEATURES,))
    self.bias = jnp.zeros(())

  def __call__(self, x):
    return x @ self.weight + self.bias


class PCA(eqx.Module):
  mean: jax.Array
  components: jax.Array

  def __init__(self, key: jax.Array, k: int = 3):
    self.mean = jnp.zeros(FEATURES)
    self.components = jax.random.normal(key, (k, FEATURES))

  def __call__(self, x):
    return (x - jax.lax.stop_gradient(self.mean)) @ self.components.T


class Scaler(eqx.Module):
  mean: jax.Array
  scale: jax.Array

  def __call__(self, x):
    return (x - jax.lax.stop_gradient(self.mean)) / jax.lax.stop_gradient(self.scale)


class ScalerPipeline(eqx.Module):
  scaler: Scaler
  head: eqx.nn.Linear

  def __init__(self, key: jax.Array):
    self.scaler = Scaler(jnp.zeros(FEATURES), jnp.ones(FEATURES))
    self.head = eqx.nn.Linear(FEATURES, 1, key=key)

  def __call__(self, x):
    return jax.vmap(self.head)(self.scaler(x))[:, 0]


def _mse(m, x, y):
  return jnp.mean((m(x) - y) ** 2)


def _pca_loss(m, x, y):
  c = m.components
  return -jnp.mean(m(x) ** 2) + jnp.sum((c @ c.T - jnp.eye(c.shape[0])) ** 2)


def cases() -> dict[str, tuple[eqx.Module, Callable]]:
  """``{name: (Equinox model, loss(model, x, y))}``."""
  key = jax.random.key(0)
  return {
    "linear regression": (LinearRegression(key), _mse),
    "PCA": (PCA(key), _pca_loss),
    "scaler pipeline": (ScalerPipeline(key), _mse),
  }


def step_fn(model: Any, loss: Callable) -> Callable[[], Any]:
  """A closure running the Equinox-style step on ``model``, feeding its outputs back."""
  opt = optax.sgd(1e-2)

  @eqx.filter_jit
  def step(m, opt_state, x, y):
    value, grads = eqx.filter_value_and_grad(loss)(m, x, y)
    updates, opt_state = opt.update(grads, opt_state, m)
    return eqx.apply_updates(m, updates), opt_state, value

  x = jax.random.normal(jax.random.key(1), (BATCH, FEATURES))
  y = jnp.zeros(BATCH)
  carry = [model, opt.init(eqx.filter(model, eqx.is_inexact_array))]

  def run():
    carry[0], carry[1], value = step(carry[0], carry[1], x, y)
    return value

  return run

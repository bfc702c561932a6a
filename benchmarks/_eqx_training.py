"""Equinox-style training over NNX modules, side by side with the same loop
over Equinox models (the rows of ``bridge.py``'s ``eqx_training`` table).

An Equinox-style step is ``eqx.filter_jit`` + ``eqx.filter_value_and_grad`` +
optax + ``eqx.apply_updates``: it takes and returns whole modules, so every call
flattens and rebuilds them. Two directions are compared:

* ``from_eqx``: ``nnx.from_eqx(eqx.nn.MLP(16, 16, 16, depth))`` vs the Equinox MLP;
* ``to_eqx``: ``nnx.to_eqx`` of an NNX model holding ``Linear(16, 16)`` layers in
  an ``nnx.List`` vs the same model written by hand as an ``eqx.Module``.

Each runs on a batch of 32 (``batched``) and on one example (``per-example``:
a ``(16,)`` input, no ``vmap``), where any per-call work on the weights (e.g.
a transpose of every kernel) weighs most.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nnx_eqx as nnx

WIDTH, BATCH = 16, 32


class NnxStack(nnx.Module):
  """``depth`` ``Linear(16, 16)`` layers in an ``nnx.List``, relu between them."""

  def __init__(self, depth: int, rngs: nnx.Rngs):
    self.layers = nnx.List([nnx.Linear(WIDTH, WIDTH, rngs=rngs) for _ in range(depth)])

  def __call__(self, x):
    for layer in self.layers[:-1]:
      x = jax.nn.relu(layer(x))
    return self.layers[-1](x)


class EqxStack(eqx.Module):
  """The hand-written Equinox equivalent of :class:`NnxStack`."""

  layers: list

  def __init__(self, depth: int, key: jax.Array):
    keys = jax.random.split(key, depth)
    self.layers = [eqx.nn.Linear(WIDTH, WIDTH, key=k) for k in keys]

  def __call__(self, x):
    def apply(layer, x):  # a batch through jax.vmap, as Equinox layers take one example
      return jax.vmap(layer)(x) if x.ndim == 2 else layer(x)

    for layer in self.layers[:-1]:
      x = jax.nn.relu(apply(layer, x))
    return apply(self.layers[-1], x)


def models(direction: str, depth: int, batched: bool = True) -> tuple[Any, Any, Callable]:
  """``(equinox_model, nnx_based_model, forward)`` for one direction; ``forward``
  takes a batch ``(32, 16)`` if ``batched``, else one example ``(16,)``."""
  if direction == "from_eqx":
    e = eqx.nn.MLP(WIDTH, WIDTH, WIDTH, depth, key=jax.random.key(0))
    fwd = (lambda m, x: jax.vmap(m)(x)) if batched else (lambda m, x: m(x))
    return e, nnx.from_eqx(e), fwd
  e = EqxStack(depth + 1, jax.random.key(0))
  return e, nnx.to_eqx(NnxStack(depth + 1, nnx.Rngs(0))), lambda m, x: m(x)


def _xy(batched: bool) -> tuple[jax.Array, jax.Array]:
  shape = (BATCH, WIDTH) if batched else (WIDTH,)
  return jnp.ones(shape), jnp.zeros(shape)


def _loss(forward: Callable) -> Callable:
  def loss(model, x, y):
    return jnp.mean((forward(model, x) - y) ** 2)

  return loss


def train_step(forward: Callable, opt: Any) -> Callable:
  """The Equinox-style step: returns ``(model, opt_state, loss)``."""
  loss = _loss(forward)

  @eqx.filter_jit
  def step(model, opt_state, x, y):
    value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
    updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value

  return step


def step_fns(model: Any, forward: Callable, batched: bool = True) -> Callable[[], Any]:
  """A closure running the train step in a loop, feeding its outputs back."""
  opt = optax.adam(1e-3)
  step = train_step(forward, opt)
  x, y = _xy(batched)
  carry = [model, opt.init(eqx.filter(model, eqx.is_inexact_array))]

  def run():
    carry[0], carry[1], value = step(carry[0], carry[1], x, y)
    return value

  return run


def piece_fns(model: Any, forward: Callable) -> dict[str, Callable[[], Any]]:
  """The parts of a step, each as a no-argument closure over ``model``."""
  x, y = _xy(True)
  fwd = eqx.filter_jit(forward)
  grads = eqx.filter_jit(eqx.filter_grad(_loss(forward)))
  ident = eqx.filter_jit(lambda m: m)
  updates = eqx.filter(model, eqx.is_array)
  return {
    "forward only": lambda: fwd(model, x),
    "grads out": lambda: jax.tree.leaves(grads(model, x, y))[0],
    "module in+out": lambda: jax.tree.leaves(ident(model))[0],
    "eqx.filter": lambda: eqx.filter(model, eqx.is_array),
    "partition + combine": lambda: eqx.combine(*eqx.partition(model, eqx.is_array)),
    "apply_updates": lambda: eqx.apply_updates(model, updates),
  }

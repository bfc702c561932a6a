"""The main job, bridged: a CNN built in Equinox, trained in NNX, evaluated in Equinox.

The digits data of ``nnx_eqx.demo`` is ``(n, 8, 8, 1)`` float32 images and
``(n,)`` int labels. The Equinox CNN takes one image channels-first,
``(1, 8, 8)``, as Equinox layers do; :class:`EqxDigits` adapts it to batches of
channels-last images, so ``nnx_eqx.demo.train`` can train it like the native
model::

    eqx_cnn = build_eqx_cnn(jax.random.key(0))
    model = to_nnx(eqx_cnn)                  # nnx.from_eqx inside
    train(model, data)                       # nnx.jit + nnx.Optimizer
    trained = to_eqx(model)                  # nnx.to_eqx: an eqx.nn.Sequential again
    eqx_accuracy(trained, data.x_test, data.y_test)   # eqx.filter_jit
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..module._module import Module
from .convert._convert import from_eqx
from .convert._convert import to_eqx as _to_eqx


def build_eqx_cnn(key: jax.Array, channels: tuple[int, int] = (16, 32)) -> eqx.nn.Sequential:
  """The demo CNN in Equinox: ``[Conv2d 3x3 -> relu -> MaxPool 2x2] x 2 -> Linear``.

  Args:
    key: a PRNG key for the initial parameters.
    channels: output channels of the two convolutions.

  Returns:
    An ``eqx.nn.Sequential`` mapping one image ``(1, 8, 8)`` to 10 logits.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.bridge._demo import build_eqx_cnn
    >>> build_eqx_cnn(jax.random.key(0))(jnp.zeros((1, 8, 8))).shape
    (10,)
  """
  k1, k2, k3 = jax.random.split(key, 3)
  c1, c2 = channels
  return eqx.nn.Sequential(
    [
      eqx.nn.Conv2d(1, c1, 3, padding=1, key=k1),
      eqx.nn.Lambda(jax.nn.relu),
      eqx.nn.MaxPool2d(2, 2),
      eqx.nn.Conv2d(c1, c2, 3, padding=1, key=k2),
      eqx.nn.Lambda(jax.nn.relu),
      eqx.nn.MaxPool2d(2, 2),
      eqx.nn.Lambda(jnp.ravel),
      eqx.nn.Linear(c2 * 2 * 2, 10, key=k3),
    ]
  )


class EqxDigits(Module):
  """An NNX module running a converted Equinox CNN on batches of ``(n, 8, 8, 1)`` images.

  Attributes:
    cnn: the NNX form of the Equinox CNN (``nnx.from_eqx``); it takes one
      channels-first image.
  """

  def __init__(self, cnn: Any):
    self.cnn = cnn

  def __call__(self, x: jax.Array) -> jax.Array:
    return jax.vmap(self.cnn)(jnp.moveaxis(x, -1, 1))


def to_nnx(eqx_model: eqx.Module) -> EqxDigits:
  """``nnx.from_eqx(eqx_model)``, wrapped to take the demo's batches.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.bridge._demo import build_eqx_cnn, to_nnx
    >>> to_nnx(build_eqx_cnn(jax.random.key(0)))(jnp.zeros((4, 8, 8, 1))).shape
    (4, 10)
  """
  return EqxDigits(from_eqx(eqx_model))


def to_eqx(model: EqxDigits) -> eqx.Module:
  """The trained Equinox CNN: ``nnx.to_eqx(model.cnn)``.

  Example:
    >>> import equinox as eqx, jax
    >>> from nnx_eqx.bridge._demo import build_eqx_cnn, to_eqx, to_nnx
    >>> e = build_eqx_cnn(jax.random.key(0))
    >>> bool(eqx.tree_equal(to_eqx(to_nnx(e)), e))
    True
  """
  return _to_eqx(model.cnn)


@eqx.filter_jit
def _correct(eqx_model: Any, x: jax.Array, y: jax.Array) -> jax.Array:
  logits = jax.vmap(eqx_model)(jnp.moveaxis(x, -1, 1))
  return jnp.sum(jnp.argmax(logits, -1) == y)


def eqx_accuracy(eqx_model: eqx.Module, x: jax.Array, y: jax.Array, batch_size: int = 512) -> float:
  """Test accuracy of the Equinox CNN, evaluated with ``eqx.filter_jit``.

  Args:
    eqx_model: the CNN (one ``(1, 8, 8)`` image -> 10 logits).
    x: images ``(n, 8, 8, 1)`` float32 (the demo's layout).
    y: labels ``(n,)`` int.
    batch_size: images per jitted call.

  Returns:
    The fraction of correctly classified images.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.bridge._demo import build_eqx_cnn, eqx_accuracy
    >>> acc = eqx_accuracy(build_eqx_cnn(jax.random.key(0)), jnp.zeros((3, 8, 8, 1)),
    ...                    jnp.zeros(3, jnp.int32))
    >>> 0.0 <= acc <= 1.0
    True
  """
  correct = 0
  for i in range(0, len(x), batch_size):
    xb, yb = jnp.asarray(x[i : i + batch_size]), jnp.asarray(y[i : i + batch_size])
    correct += int(_correct(eqx_model, xb, yb))
  return correct / len(x)

"""Training equality: an Equinox model trained with eqx.filter_jit + optax and its
conversion trained with nnx.jit + nnx.Optimizer follow the same loss curve.

The two sides are different programs and 50 optimizer steps compound their
rounding differences, so losses and trained weights use a looser tolerance
than the single-call policy (tests/README.md)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close

STEPS = 50
KEYS = jax.random.split(jax.random.key(7), 8)


def cross_entropy(logits, y):
  return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def _train_eqx(model, state, batches, tx, call):
  params = eqx.filter(model, eqx.is_inexact_array)
  with jax.numpy_dtype_promotion("standard"):  # optax needs it (nnx.Optimizer does the same)
    opt_state = tx.init(params)

  @eqx.filter_jit
  def step(model, state, opt_state, x, y):
    def loss_fn(model):
      logits, new_state = call(model, state, x)
      return cross_entropy(logits, y), new_state

    (loss, state), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model)
    with jax.numpy_dtype_promotion("standard"):
      updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    return eqx.apply_updates(model, updates), state, opt_state, loss

  losses = []
  for x, y in batches:
    model, state, opt_state, loss = step(model, state, opt_state, x, y)
    losses.append(float(loss))
  return np.array(losses), model, state


def _train_nnx(module, batches, tx, call):
  optimizer = nnx.Optimizer(module, tx, wrt=nnx.Param)

  @nnx.jit
  def step(module, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: cross_entropy(call(m, x), y))(module)
    optimizer.update(module, grads)
    return loss

  return np.array([float(step(module, optimizer, x, y)) for x, y in batches])


def _batches(shape, n_classes, dtype=jnp.float32, batch=8):
  """Random inputs with learnable labels (a fixed random linear teacher, or the
  first token), so the loss curve goes down."""
  teacher = jax.random.normal(KEYS[6], (int(np.prod(shape)), n_classes))
  out = []
  for i in range(STEPS):
    kx = jax.random.fold_in(KEYS[0], i)
    if dtype == jnp.int32:
      x = jax.random.randint(kx, (batch, *shape), 0, n_classes)
      y = x[:, 0]
    else:
      x = jax.random.normal(kx, (batch, *shape))
      y = jnp.argmax(x.reshape(batch, -1) @ teacher, axis=-1)
    out.append((x, y))
  return out


def test_cnn_same_loss_curve():
  k = KEYS[1:4]
  model = eqx.nn.Sequential(
    [
      eqx.nn.Conv2d(1, 3, 3, padding=1, key=k[0]),
      eqx.nn.Lambda(jax.nn.relu),
      eqx.nn.MaxPool2d(2, 2),
      eqx.nn.Lambda(jnp.ravel),
      eqx.nn.Linear(48, 10, key=k[2]),
    ]
  )
  module = nnx.from_eqx(model)
  batches = _batches((1, 8, 8), 10)
  tx = optax.adam(1e-2)
  eqx_losses, trained, _ = _train_eqx(model, None, batches, tx, lambda m, s, x: (jax.vmap(m)(x), s))
  nnx_losses = _train_nnx(module, batches, tx, lambda m, x: jax.vmap(m)(x))
  assert_trees_close(nnx_losses, eqx_losses, atol=1e-5)
  assert eqx_losses[-1] < eqx_losses[0]
  assert_trees_close(nnx.to_eqx(module), trained, rtol=1e-4, atol=1e-5)


class BNNet(eqx.Module):
  conv: eqx.nn.Conv2d
  bn: eqx.nn.BatchNorm
  head: eqx.nn.Linear

  def __init__(self, key):
    k1, k2 = jax.random.split(key)
    self.conv = eqx.nn.Conv2d(1, 4, 3, key=k1)
    self.bn = eqx.nn.BatchNorm(4, "batch", mode="batch", momentum=0.9)
    self.head = eqx.nn.Linear(36, 3, key=k2)

  def __call__(self, x, state):
    h, state = self.bn(self.conv(x), state)
    return self.head(jax.nn.relu(h).ravel()), state


def test_batchnorm_model_same_loss_curve_and_statistics():
  model, state = eqx.nn.make_with_state(BNNet)(KEYS[4])
  module = nnx.from_eqx(model, state)
  batches = _batches((1, 5, 5), 3)
  tx = optax.sgd(0.05, momentum=0.9)

  def eqx_call(m, s, x):
    return jax.vmap(m, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, s)

  def nnx_call(m, x):
    logits, _ = nnx.vmap(lambda m, x: m(x, None), in_axes=(None, 0), axis_name="batch")(m, x)
    return logits

  eqx_losses, trained, final_state = _train_eqx(model, state, batches, tx, eqx_call)
  nnx_losses = _train_nnx(module, batches, tx, nnx_call)
  assert_trees_close(nnx_losses, eqx_losses, atol=1e-5)
  assert eqx_losses[-10:].mean() < eqx_losses[:10].mean()
  assert int(module.bn.counter.value) == STEPS  # the debiasing counter advanced as in Equinox
  assert_trees_close(nnx.to_eqx_with_state(module), (trained, final_state), rtol=1e-4, atol=1e-5)


class TiedLM(eqx.Module):
  shared: eqx.nn.Shared
  mix: eqx.nn.Linear

  def __init__(self, key):
    k1, k2, k3 = jax.random.split(key, 3)
    emb, out = eqx.nn.Embedding(12, 8, key=k1), eqx.nn.Linear(8, 12, key=k2)
    self.shared = eqx.nn.Shared((emb, out), lambda t: t[1].weight, lambda t: t[0].weight)
    self.mix = eqx.nn.Linear(8, 8, key=k3)

  def __call__(self, tokens):
    emb, out = self.shared()
    h = jax.vmap(emb)(tokens).mean(0)
    return out(jnp.tanh(self.mix(h)))


def test_tied_embedding_model_same_loss_curve():
  model = TiedLM(KEYS[5])
  module = nnx.from_eqx(model)
  assert module.shared.pytree[0].embedding is module.shared.pytree[1].weight
  batches = _batches((5,), 12, dtype=jnp.int32)
  tx = optax.adam(5e-3)
  eqx_losses, trained, _ = _train_eqx(model, None, batches, tx, lambda m, s, x: (jax.vmap(m)(x), s))
  nnx_losses = _train_nnx(module, batches, tx, lambda m, x: jax.vmap(m)(x))
  assert_trees_close(nnx_losses, eqx_losses, atol=1e-5)
  assert eqx_losses[-1] < eqx_losses[0]
  assert module.shared.pytree[0].embedding is module.shared.pytree[1].weight  # still tied
  assert_trees_close(nnx.to_eqx(module), trained, rtol=1e-4, atol=1e-5)

# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Converting an Equinox model, and training it both ways
#
# `nnx.from_eqx` turns an Equinox model into a native nnx_eqx module that runs
# the same program (an `eqx.nn.Linear` becomes an `nnx.bridge.Linear` that keeps
# Equinox's `weight` of shape `(out, in)` and computes `weight @ x + bias`), and
# `nnx.to_eqx` turns it back into a real `eqx.Module`. Conversions keep parameters
# and computations exactly, so a model can be trained in either framework and
# handed to the other.
#
# Here an `eqx.nn.MLP` classifies scikit-learn's 8×8 digits (real data, bundled
# with scikit-learn). We train it once with Equinox and once, from the same
# initial weights, with `nnx.jit` + `nnx.Optimizer`, and compare the runs.

# %%
import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax
from sklearn.datasets import load_digits

import nnx_eqx as nnx

digits = load_digits()
X = jnp.asarray(digits.data / 16.0, jnp.float32)
Y = jnp.asarray(digits.target)
x_train, y_train, x_test, y_test = X[:1400], Y[:1400], X[1400:], Y[1400:]
print("train", x_train.shape, "test", x_test.shape)

# %% tags=["remove_cell"]
# Build plumbing (hidden on the site): each figure is also saved as a file, into
# $NNX_EQX_FIGURES (notebooks/run.py sets it) or figures/.
import os
import pathlib

FIGURES = pathlib.Path(os.environ.get("NNX_EQX_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Convert

# %%
eqx_model = eqx.nn.MLP(64, 10, width_size=64, depth=2, key=jax.random.key(0))
model = nnx.from_eqx(eqx_model)
print(nnx.tabulate(model, x_train[0]))
print("eqx weight", eqx_model.layers[2].weight.shape, "-> nnx weight",
      model.layers[2].weight.value.shape, type(model.layers[2]))
print("the very same array:", model.layers[2].weight.value is eqx_model.layers[2].weight)

# %%
back = nnx.to_eqx(model)
print("to_eqx(from_eqx(m)) is the same Equinox model:", eqx.tree_equal(back, eqx_model))
same = bool((jax.vmap(model)(x_test) == jax.vmap(eqx_model)(x_test)).all())
print("outputs equal bit for bit:", same)

# %% [markdown]
# ## Train with Equinox

# %%
tx = optax.adam(3e-3)
STEPS = 200


def xent(logits, labels):
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


@eqx.filter_jit
def eqx_step(m, opt_state, x, y):
  loss, grads = eqx.filter_value_and_grad(lambda m: xent(jax.vmap(m)(x), y))(m)
  updates, opt_state = tx.update(grads, opt_state, eqx.filter(m, eqx.is_array))
  return eqx.apply_updates(m, updates), opt_state, loss


m, opt_state = eqx_model, tx.init(eqx.filter(eqx_model, eqx.is_array))
eqx_losses = []
for _ in range(STEPS):
  m, opt_state, loss = eqx_step(m, opt_state, x_train, y_train)
  eqx_losses.append(float(loss))
trained_eqx = m

# %% [markdown]
# ## Train the converted model with nnx_eqx

# %%
model = nnx.from_eqx(eqx_model)  # the same initial weights
optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)


@nnx.jit
def nnx_step(model, optimizer, x, y):
  loss, grads = nnx.value_and_grad(lambda m: xent(jax.vmap(m)(x), y))(model)
  optimizer.update(model, grads)
  return loss


nnx_losses = [float(nnx_step(model, optimizer, x_train, y_train)) for _ in range(STEPS)]
gap = max(abs(a - b) for a, b in zip(eqx_losses, nnx_losses))
print(f"final loss: equinox {eqx_losses[-1]:.5f}, nnx_eqx {nnx_losses[-1]:.5f};"
      f" largest difference over {STEPS} steps {gap:.1e}")

# %% [markdown]
# ## Back to Equinox, evaluated with `eqx.filter_jit`

# %%
trained_back = nnx.to_eqx(model)


@eqx.filter_jit
def accuracy(m, x, y):
  return (jax.vmap(m)(x).argmax(-1) == y).mean()


accuracies = {
  "trained in Equinox": accuracy(trained_eqx, x_test, y_test),
  "trained in nnx_eqx, converted back": accuracy(trained_back, x_test, y_test),
  "the nnx_eqx model itself": (jax.vmap(model)(x_test).argmax(-1) == y_test).mean(),
}
for name, acc in accuracies.items():
  print(f"test accuracy, {name:>34}: {float(acc):.4f}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
ax1.semilogy(eqx_losses, label="Equinox (eqx.filter_jit)")
ax1.semilogy(nnx_losses, "--", label="nnx_eqx (nnx.jit), converted")
ax1.set(xlabel="step", ylabel="cross-entropy", title="training loss on digits")
ax1.legend()
ax2.semilogy([abs(a - b) + 1e-12 for a, b in zip(eqx_losses, nnx_losses)])
ax2.set(xlabel="step", ylabel="|difference|", title="loss difference between the runs")
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "bridge_training_both_ways.png", dpi=100)

# %% [markdown]
# The converted model's forward pass and gradients are the Equinox model's, bit
# for bit; the two runs can differ only where the two training loops compile
# the optimizer's update differently, far below the loss itself.
#
# ## Stateful models
#
# Equinox keeps BatchNorm statistics in an `eqx.nn.State`; nnx_eqx keeps them in
# `BatchStat` Variables. `nnx.from_eqx(model, state)` takes both, and
# `nnx.to_eqx_with_state` gives back the pair `eqx.nn.make_with_state` would.


# %%
class Net(eqx.Module):
  lin: eqx.nn.Linear
  bn: eqx.nn.BatchNorm

  def __init__(self, key):
    self.lin = eqx.nn.Linear(64, 16, key=key)
    self.bn = eqx.nn.BatchNorm(16, axis_name="batch", mode="batch")

  def __call__(self, x, state):
    return self.bn(self.lin(x), state)


net, state = eqx.nn.make_with_state(Net)(jax.random.key(0))
converted = nnx.from_eqx(net, state)
print(nnx.tabulate(converted))
net2, state2 = nnx.to_eqx_with_state(converted)
batched = jax.vmap(lambda m, x, s: m(x, s), in_axes=(None, 0, None), out_axes=(0, None),
                   axis_name="batch")
out1, _ = batched(net, x_test[:32], state)
out2, _ = batched(net2, x_test[:32], state2)
print("round trip exact:", eqx.tree_equal(net2, net), "| same outputs:", bool((out1 == out2).all()))

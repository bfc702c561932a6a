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
# # Getting started with nnx_eqx
#
# `import nnx_eqx as nnx` gives the flax.nnx module system, implemented natively on
# JAX: modules are ordinary mutable Python objects that may share submodules and
# Variables. This notebook covers
#
# 1. defining a module and looking at it (text repr, treescope, `nnx.tabulate`);
# 2. the functional API: `nnx.split` / `nnx.merge` and filters;
# 3. training with `nnx.jit`, `nnx.value_and_grad` and `nnx.Optimizer` (optax);
# 4. saving and restoring a checkpoint (orbax).

# %%
import pathlib

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax
import treescope

import nnx_eqx as nnx

print("jax", jax.__version__, "| devices:", jax.devices()[:1])

# %% tags=["remove_cell"]
# Build plumbing (hidden on the site): each figure is also saved as a file, into
# $NNX_EQX_FIGURES (notebooks/run.py sets it) or figures/.
import os

FIGURES = pathlib.Path(os.environ.get("NNX_EQX_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. Modules
#
# A module stores its state in attributes. `nnx.Param` marks trainable weights; a
# `nnx.Variable` subclass is a collection of its own (here a call counter).

# %%
class Count(nnx.Variable):
  """A user-defined collection: how often the model was called."""


class MLP(nnx.Module):
  def __init__(self, din, dhidden, dout, *, rngs: nnx.Rngs):
    self.l1 = nnx.Linear(din, dhidden, rngs=rngs)
    self.l2 = nnx.Linear(dhidden, dhidden, rngs=rngs)
    self.out = nnx.Linear(dhidden, dout, rngs=rngs)
    self.count = Count(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    x = jnp.tanh(self.l1(x))
    x = jnp.tanh(self.l2(x))
    return self.out(x)


model = MLP(1, 32, 1, rngs=nnx.Rngs(0))
model  # the terminal repr: arrays summarised as dtype[shape]

# %% [markdown]
# In a notebook, treescope renders the same model as a foldable tree (click the
# arrows); arrays show their statistics.

# %%
treescope.show(model)

# %% [markdown]
# `nnx.tabulate` counts parameters and bytes per module and per Variable type, and
# traces one call abstractly to show each module's input and output shapes.

# %%
print(nnx.tabulate(model, jnp.ones((16, 1))))

# %% [markdown]
# ## 2. split / merge and filters
#
# `nnx.split` turns a module into a static `GraphDef` and one `State` per filter;
# `nnx.merge` is its inverse. A filter is a Variable type, `...` (everything else),
# a predicate, or a combinator such as `nnx.Not`.

# %%
graphdef, params, counts = nnx.split(model, nnx.Param, ...)
print(graphdef)
print("params:", [("/".join(p), v.value.shape) for p, v in params.flat_state()])
print("rest:", counts)

# %%
rebuilt = nnx.merge(graphdef, params, counts)
x = jnp.linspace(-1, 1, 16)[:, None]
print("same outputs:", bool((rebuilt(x) == model(x)).all()))

# %%
kernels = nnx.state(model, lambda path, v: path[-1] == "kernel")
not_params = nnx.state(model, nnx.Not(nnx.Param))
print("kernels:", sorted("/".join(p) for p in kernels.flat_state().paths))
print("not params:", not_params)

# %% [markdown]
# Sharing survives the round trip: a Variable reachable from two attributes is
# stored once in the State and comes back shared.

# %%
model.l2_alias = model.l2
_, state = nnx.split(model)
again = nnx.merge(*nnx.split(model))
print("shared after merge:", again.l2_alias is again.l2, "| stored once:", "l2_alias" not in state)
del model.l2_alias

# %% [markdown]
# ## 3. Training with nnx.jit
#
# Fit `sin(3x)` on [-1, 1]. `nnx.jit` and `nnx.value_and_grad` take modules as
# arguments; updates made inside (the optimizer step, the call counter) are
# written back to the objects outside.

# %%
xs = jnp.linspace(-1, 1, 128)[:, None]
ys = jnp.sin(3 * xs)

model = MLP(1, 32, 1, rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, x, y):
  def loss_fn(m):
    return jnp.mean((m(x) - y) ** 2)

  loss, grads = nnx.value_and_grad(loss_fn)(model)
  optimizer.update(model, grads)
  return loss


losses = [float(train_step(model, optimizer, xs, ys)) for _ in range(400)]
print(f"loss {losses[0]:.4f} -> {losses[-1]:.5f}; calls counted: {int(model.count.value)}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
ax1.semilogy(losses)
ax1.set_xlabel("step")
ax1.set_ylabel("MSE")
ax1.set_title("training loss")
ax2.plot(xs[:, 0], ys[:, 0], label="sin(3x)")
ax2.plot(xs[:, 0], model(xs)[:, 0], "--", label="MLP")
ax2.legend()
ax2.set_title("fit after 400 steps")
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "getting_started_loss.png", dpi=100)

# %% [markdown]
# Modules are JAX pytrees too (keeping their sharing), so plain `jax.jit` and
# Equinox transforms accept them directly. Inside those the module is a copy:
# return it to keep what the call changed (here the call counter); an update that
# is dropped leaves the module stale, and using it again raises `nnx.LostUpdateError`.

# %%
import equinox as eqx

y, counted = eqx.filter_jit(lambda m, x: (m(x), m))(model, xs[:2])
print(y, "count:", int(model.count.value), "->", int(counted.count.value))
nnx.update(model, nnx.state(counted))  # keep the new count
y, counted = jax.jit(lambda m, x: (m(x), m))(model, xs[:2])
print(y, "count:", int(counted.count.value))

# %% [markdown]
# ## 4. Checkpoints
#
# `nnx.checkpoint.save` writes the State with orbax. To restore without allocating
# the model twice, build an abstract model with `nnx.eval_shape` (its leaves are
# `ShapeDtypeStruct`s) and restore into it.

# %%
import tempfile

ckpt_dir = pathlib.Path(tempfile.mkdtemp()) / "mlp"
nnx.checkpoint.save(ckpt_dir, (model, optimizer))

abstract = nnx.eval_shape(
  lambda: (lambda m: (m, nnx.Optimizer(m, optax.adam(1e-2), wrt=nnx.Param)))(
    MLP(1, 32, 1, rngs=nnx.Rngs(1))
  )
)
print(abstract[0].l1.kernel)
restored, restored_opt = nnx.checkpoint.restore(ckpt_dir, abstract)
print("restored outputs equal:", bool((restored(xs) == model(xs)).all()))
print("optimizer step:", int(restored_opt.step.value))

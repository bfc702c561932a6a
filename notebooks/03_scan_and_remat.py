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
# # Scan over layers, and remat
#
# A deep stack of identical blocks can be written as a Python loop (the program
# grows with depth, and so does compile time) or as one `jax.lax.scan` over
# stacked parameters (the program has one copy of the block). With nnx_eqx:
#
# * `nnx.vmap` over a constructor (with `nnx.split_rngs`) builds the stack: every
#   Param gets a leading layer axis;
# * `nnx.scan` runs the stack, carrying the activations;
# * `nnx.remat` recomputes each block's activations in the backward pass instead
#   of storing them, trading compute for memory.
#
# The lowered programs are the ones `jax.lax.scan` / `jax.checkpoint` give when
# written by hand over the split state, which we check below on compiled memory.

# %%
import os
import platform
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax

import nnx_eqx as nnx

WIDTH, BATCH = 64, 16


class Block(nnx.Module):
  """A pre-norm residual block."""

  def __init__(self, rngs: nnx.Rngs):
    self.norm = nnx.LayerNorm(WIDTH, rngs=rngs)
    self.dense = nnx.Linear(WIDTH, WIDTH, rngs=rngs)

  def __call__(self, x):
    return x + jax.nn.gelu(self.dense(self.norm(x)))


def make_stack(depth: int, seed: int = 0) -> Block:
  """`depth` Blocks as one Block whose leaves have a leading layer axis."""

  @nnx.split_rngs(splits=depth)
  @nnx.vmap(in_axes=0, out_axes=0)
  def make(rngs):
    return Block(rngs)

  return make(nnx.Rngs(seed))


stack = make_stack(8)
print(nnx.tabulate(stack))
print("stacked kernel:", stack.dense.kernel.value.shape)

# %% tags=["remove_cell"]
# Build plumbing (hidden on the site): each figure is also saved as a file, into
# $NNX_EQX_FIGURES (notebooks/run.py sets it) or figures/.
import os
import pathlib

FIGURES = pathlib.Path(os.environ.get("NNX_EQX_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## The forward pass as a scan
#
# `in_axes=(nnx.Carry, 0)`: the activations are the carry, the stack is scanned
# over its axis 0. Wrapping the block call in `nnx.remat` makes it a checkpoint.


# %%
def forward(blocks, x, remat=False):
  call = nnx.remat(lambda b, x: b(x)) if remat else (lambda b, x: b(x))

  @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
  def body(x, block):
    return call(block, x)

  return body(x, blocks)


x = jax.random.normal(jax.random.key(1), (BATCH, WIDTH))
y = forward(stack, x)
print(y.shape, "| remat gives the same output:", bool(jnp.allclose(forward(stack, x, True), y)))

# %% [markdown]
# ## Compile time vs depth: nnx.scan, jax.lax.scan, and an unrolled loop
#
# The baseline is `jax.lax.scan` written by hand over the split state (each step
# merges one layer's slice of the State into a Block). The unrolled model keeps
# the blocks in a Python list and loops over them, so XLA sees `depth` copies of
# the block. We time `lower + compile` of the gradient of a loss (fresh functions
# each time, so nothing is cached). The times are measured when the notebook runs
# (on the site: on the machine that built it, printed below); the suite's committed
# run is in the [performance guide](../../guides/performance/) (`scan_depth.py`).


# %%
def loss_scan(blocks, x):
  return jnp.mean(forward(blocks, x) ** 2)


def hand_forward(graphdef, state, x, remat=False):
  def one_layer(layer_state, x):
    return nnx.merge(graphdef, layer_state)(x)

  layer = jax.checkpoint(one_layer) if remat else one_layer
  x, _ = jax.lax.scan(lambda x, s: (layer(s, x), None), x, state)
  return x


def loss_unrolled(blocks, x):
  for block in blocks:
    x = block(x)
  return jnp.mean(x**2)


def compile_seconds(loss, model):
  fn = jax.jit(jax.grad(loss))
  t0 = time.perf_counter()
  fn.lower(model, x).compile()
  return time.perf_counter() - t0


def lax_loss_for(graphdef):
  return lambda state, x: jnp.mean(hand_forward(graphdef, state, x) ** 2)


print(f"measured on: {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__},",
      jax.devices()[0].device_kind)
warm = make_stack(2)  # warm up the tracing machinery of each path once
compile_seconds(loss_scan, warm)
compile_seconds(lax_loss_for(nnx.graphdef(warm)), nnx.state(warm))
DEPTHS = (2, 8, 32)
times = {"nnx.scan": [], "jax.lax.scan (by hand)": [], "unrolled loop": []}
for depth in DEPTHS:
  blocks = make_stack(depth)
  times["nnx.scan"].append(compile_seconds(loss_scan, blocks))
  gd, st = nnx.split(blocks)
  times["jax.lax.scan (by hand)"].append(compile_seconds(lax_loss_for(gd), st))
  unrolled = nnx.List([Block(nnx.Rngs(i)) for i in range(depth)])
  times["unrolled loop"].append(compile_seconds(loss_unrolled, unrolled))
  print(depth, {k: f"{v[-1]:.2f} s" for k, v in times.items()})

# %%
fig, ax = plt.subplots(figsize=(6, 3.8))
for name, ts in times.items():
  ax.plot(DEPTHS, ts, marker="o", label=name)
ax.set(xlabel="depth (blocks)", ylabel="lower + compile of grad (s)", title="compile time vs depth")
ax.set_xticks(DEPTHS)
ax.legend()
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "scan_compile_time.png", dpi=100)

# %% [markdown]
# ## Memory: remat inside scan
#
# XLA's memory analysis of the compiled gradient gives the temporary (scratch)
# bytes. Without remat, the scan stores every block's intermediate activations for
# the backward pass; with `nnx.remat` only the carried activations are stored.
# The hand-written version is `jax.lax.scan` + `jax.checkpoint` over the split
# state — nnx.remat should need exactly the same memory, since it returns no
# parameter copies.

# %%
DEPTH = 16
deep = make_stack(DEPTH)
graphdef, state = nnx.split(deep)


def loss_remat(blocks, x):
  return jnp.mean(forward(blocks, x, remat=True) ** 2)


def loss_hand_remat(state, x):
  return jnp.mean(hand_forward(graphdef, state, x, remat=True) ** 2)


def temp_bytes(loss, model):
  compiled = jax.jit(jax.grad(loss)).lower(model, x).compile()
  return compiled.memory_analysis().temp_size_in_bytes


memory = {
  "nnx.scan": temp_bytes(loss_scan, deep),
  "nnx.scan\n+ nnx.remat": temp_bytes(loss_remat, deep),
  "lax.scan\n+ jax.checkpoint\n(by hand)": temp_bytes(loss_hand_remat, state),
}
for k, v in memory.items():
  print(f"{k.replace(chr(10), ' '):>36}: {v / 1024:8.1f} KiB")

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.bar(list(memory), [v / 1024 for v in memory.values()], color=["C0", "C1", "C2"])
ax.set(ylabel="compiled temporary memory (KiB)",
       title=f"gradient of a {DEPTH}-block scan, batch {BATCH}, width {WIDTH}")
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "remat_memory.png", dpi=100)

# %% [markdown]
# ## Training the scanned model
#
# `nnx.jit` + `nnx.Optimizer` work on the stacked module like on any other. The
# same run with remat gives the same losses (remat changes what is stored, not
# what is computed).


# %%
def train(remat, steps=50):
  model = make_stack(8, seed=0)
  opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
  xs = jax.random.normal(jax.random.key(2), (64, WIDTH))
  ys = jnp.sin(xs)

  @nnx.jit
  def step(model, opt):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((forward(m, xs, remat) - ys) ** 2))(model)
    opt.update(model, grads)
    return loss

  return [float(step(model, opt)) for _ in range(steps)]


plain, rematted = train(False), train(True)
print(f"loss {plain[0]:.4f} -> {plain[-1]:.4f}; largest difference with remat:"
      f" {max(abs(a - b) for a, b in zip(plain, rematted)):.2e}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.semilogy(plain, label="nnx.scan")
ax.semilogy(rematted, "--", label="nnx.scan + nnx.remat")
ax.set(xlabel="step", ylabel="MSE", title="training an 8-block scanned model")
ax.legend()
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "scan_training_loss.png", dpi=100)

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
# # Performance: nnx_eqx next to hand-written JAX, Equinox and flax.nnx
#
# The benchmark suite (`python benchmarks/run_all.py`, see `benchmarks/README.md`)
# measures per-step overhead, split/merge cost, conversion cost, scan compile time
# and compiled memory, every figure a ratio measured side by side in one process;
# its committed report, with the machine it ran on, is the
# [performance guide](../../guides/performance/). This notebook re-measures the two
# questions a picture answers best, at a small scale that runs in seconds:
#
# * how the fixed per-step overhead of each framework compares with the step's
#   compute as the model grows;
# * how split + merge time grows with the number of Variables.
#
# **Where these numbers come from.** Every number and plot below is measured when
# the notebook runs: on the site, while the site was built, on the machine that
# built it (the first output names it, with the versions). That is seldom the
# machine of the committed report, and timings on a shared machine are noisy, so
# where a ratio here differs from the guide's, the guide's is the one measured
# under the suite's controlled conditions: read the trends, not the digits.

# %%
import os
import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path("..", "benchmarks").resolve()))
import _common  # the benchmark suite's timing helpers
import overhead  # the suite's overhead benchmarks

fnnx = _common.flax_nnx()
machine = _common.machine()
print("measured on:", ", ".join(f"{k} {v}" for k, v in machine.items()))

# %% tags=["remove_cell"]
# Build plumbing (hidden on the site): each figure is also saved as a file, into
# $NNX_EQX_FIGURES (notebooks/run.py sets it) or figures/.
FIGURES = pathlib.Path(os.environ.get("NNX_EQX_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Per-step overhead vs model size
#
# One SGD train step of a 4-layer MLP (batch 32) for several widths, written four
# ways: a hand-written `jax.jit` over a params pytree (the baseline), `nnx.jit` with
# `nnx.Optimizer`, `eqx.filter_jit`, and `flax.nnx.jit` when flax is installed.

# %%
DEPTH, BATCH, LR = 4, 32, 1e-2
tx = optax.sgd(LR)


def mse(pred, y):
  return jnp.mean((pred - y) ** 2)


class MLP(nnx.Module):
  def __init__(self, width, rngs):
    self.layers = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(DEPTH)])

  def __call__(self, x):
    for layer in self.layers[:-1]:
      x = jax.nn.relu(layer(x))
    return self.layers[-1](x)


def steps_for(width):
  x = jax.random.normal(jax.random.key(1), (BATCH, width))
  y = jax.random.normal(jax.random.key(2), (BATCH, width))
  fns = {}

  # Hand-written JAX.
  params = [{"w": jax.random.normal(k, (width, width)) / width**0.5, "b": jnp.zeros(width)}
            for k in jax.random.split(jax.random.key(0), DEPTH)]

  def forward(ps, x):
    for p in ps[:-1]:
      x = jax.nn.relu(x @ p["w"] + p["b"])
    return x @ ps[-1]["w"] + ps[-1]["b"]

  @jax.jit
  def jax_step(ps, os_, x, y):
    loss, g = jax.value_and_grad(lambda p: mse(forward(p, x), y))(ps)
    u, os_ = tx.update(g, os_, ps)
    return optax.apply_updates(ps, u), os_, loss

  box = {"p": params, "o": tx.init(params)}

  def run_jax():
    box["p"], box["o"], loss = jax_step(box["p"], box["o"], x, y)
    return loss

  fns["jax.jit"] = run_jax

  # nnx_eqx.
  model = MLP(width, nnx.Rngs(0))
  opt = nnx.Optimizer(model, tx, wrt=nnx.Param)

  @nnx.jit
  def nnx_step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(lambda m: mse(m(x), y))(model)
    opt.update(model, grads)
    return loss

  fns["nnx_eqx.jit"] = lambda: nnx_step(model, opt, x, y)

  # Equinox.
  emodel = [eqx.nn.Linear(width, width, key=k) for k in jax.random.split(jax.random.key(0), DEPTH)]

  def eforward(m, x):
    for layer in m[:-1]:
      x = jax.nn.relu(jax.vmap(layer)(x))
    return jax.vmap(m[-1])(x)

  @eqx.filter_jit
  def eqx_step(m, os_, x, y):
    loss, g = eqx.filter_value_and_grad(lambda m: mse(eforward(m, x), y))(m)
    u, os_ = tx.update(g, os_, eqx.filter(m, eqx.is_array))
    return eqx.apply_updates(m, u), os_, loss

  ebox = {"m": emodel, "o": tx.init(eqx.filter(emodel, eqx.is_array))}

  def run_eqx():
    ebox["m"], ebox["o"], loss = eqx_step(ebox["m"], ebox["o"], x, y)
    return loss

  fns["eqx.filter_jit"] = run_eqx

  if fnnx is not None:  # flax.nnx, when installed

    class FMLP(fnnx.Module):
      def __init__(self, rngs):
        self.layers = fnnx.List([fnnx.Linear(width, width, rngs=rngs) for _ in range(DEPTH)])

      def __call__(self, x):
        for layer in self.layers[:-1]:
          x = jax.nn.relu(layer(x))
        return self.layers[-1](x)

    fmodel = FMLP(fnnx.Rngs(0))
    fopt = fnnx.Optimizer(fmodel, tx, wrt=fnnx.Param)

    @fnnx.jit
    def flax_step(model, opt, x, y):
      loss, grads = fnnx.value_and_grad(lambda m: mse(m(x), y))(model)
      opt.update(model, grads)
      return loss

    fns["flax.nnx.jit"] = lambda: flax_step(fmodel, fopt, x, y)
  return fns


WIDTHS = (16, 64, 256)
step_us = {}
for width in WIDTHS:
  times = _common.interleaved(steps_for(width), n=100, rounds=5)
  step_us[width] = {k: t * 1e6 for k, t in times.items()}
  print(width, {k: f"{v:.0f} us ({v / step_us[width]['jax.jit']:.2f}x)"
                for k, v in step_us[width].items()})

# %%
n_params = {w: DEPTH * (w * w + w) for w in WIDTHS}
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for impl in step_us[WIDTHS[0]]:
  xs = [n_params[w] for w in WIDTHS]
  ax1.plot(xs, [step_us[w][impl] for w in WIDTHS], marker="o", label=impl)
  ax2.plot(xs, [step_us[w][impl] / step_us[w]["jax.jit"] for w in WIDTHS], marker="o", label=impl)
ax1.set(xscale="log", yscale="log", xlabel="parameters", ylabel="µs per step",
        title="train step time")
ax2.set(xscale="log", xlabel="parameters", ylabel="ratio vs hand-written jax.jit",
        title="overhead relative to plain JAX (lower is better)")
ax2.axhline(1.0, color="black", linewidth=0.8)
ax1.legend(fontsize=8)
ax2.legend(fontsize=8)
fig.text(0.01, 0.01, f"{_common.cpu_model()}, {os.cpu_count()} cores, jax {jax.__version__}",
         fontsize=7, color="gray")
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "performance_step_overhead.png", dpi=100)

# %% [markdown]
# The gap between a framework and plain JAX is a fixed cost per call (Python work
# to flatten the module and dispatch), so its ratio shrinks as the step's compute
# grows. nnx_eqx caches each module's graph walk, so a repeated call only reads
# the current leaf values.

# %% [markdown]
# ## split + merge vs number of Variables
#
# A module holding `n` scalar Params: `nnx.merge(*nnx.split(m))` next to a plain
# `jax.tree` flatten + unflatten of the same State (and flax.nnx when installed),
# measured by the suite's own function (`benchmarks/overhead.py`,
# `split_merge_rows`: the `overhead/split_merge` table of the guide) with the
# suite's repetitions, over smaller models.

# %%
SIZES = (10, 30, 100, 300)
split_us = {n: {} for n in SIZES}
for row in overhead.split_merge_rows(SIZES, n=500, rounds=7):
  size = int(row["case"].split()[0]) if row["case"].endswith("Variables") else None
  if size in split_us:
    split_us[size][row["impl"]] = row["us"]
for n in SIZES:
  base = split_us[n]["jax.tree flatten+unflatten"]
  print(n, {k: f"{v:.1f} us ({v / base:.2f}x)" for k, v in split_us[n].items()})

# %%
fig, ax = plt.subplots(figsize=(6, 3.8))
for impl in split_us[SIZES[0]]:
  ax.plot(SIZES, [split_us[n][impl] for n in SIZES], marker="o", label=impl)
ax.set(xscale="log", yscale="log", xlabel="Variables", ylabel="µs",
       title="split + merge time vs model size")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% tags=["remove_cell"]
fig.savefig(FIGURES / "performance_split_merge.png", dpi=100)

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
# and compiled memory, every figure a ratio measured side by side in one process.
# This notebook shows the suite's last committed report, then re-measures the two
# questions a picture answers best, at a small scale that runs in seconds:
#
# * how the fixed per-step overhead of each framework compares with the step's
#   compute as the model grows;
# * how split + merge time grows with the number of Variables.
#
# Timings on a shared 2-core machine are noisy: read the ratios, not the digits.

# %%
import os
import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax
from IPython.display import Markdown, display

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path("..", "benchmarks").resolve()))
import _common  # noqa: E402  (the suite's timing helpers)

FIGURES = pathlib.Path(os.environ.get("NNX_EQX_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)
fnnx = _common.flax_nnx()
print(_common.machine())

# %% [markdown]
# ## The suite's last report
#
# `benchmarks/results/RESULTS.md` is written by `run_all.py` (with the machine it
# ran on); it is shown here as committed.

# %%
report = pathlib.Path("..", "benchmarks", "results", "RESULTS.md")
if report.exists():
  display(Markdown(report.read_text().split("\n", 1)[1].replace("](", "](../benchmarks/results/")))
else:
  print("No committed report yet: run `python benchmarks/run_all.py`.")

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
fig.savefig(FIGURES / "performance_step_overhead.png", dpi=100)
plt.show()

# %% [markdown]
# The gap between a framework and plain JAX is a fixed cost per call (Python work
# to flatten the module and dispatch), so its ratio shrinks as the step's compute
# grows. nnx_eqx caches each module's graph walk, so a repeated call only reads
# the current leaf values.

# %% [markdown]
# ## split + merge vs number of Variables
#
# A module holding `n` scalar Params: `nnx.merge(*nnx.split(m))` next to a plain
# `jax.tree` flatten + unflatten of the same State (and flax.nnx when installed).


# %%
class Wide(nnx.Module):
  def __init__(self, n):
    self.params = nnx.List([nnx.Param(jnp.zeros(())) for _ in range(n)])


SIZES = (10, 30, 100, 300)
split_us = {}
for n in SIZES:
  m = Wide(n)
  st = nnx.state(m)
  fns = {
    "nnx_eqx split+merge": lambda m=m: nnx.merge(*nnx.split(m)),
    "jax.tree flatten+unflatten": lambda st=st: jax.tree.unflatten(*reversed(jax.tree.flatten(st))),
  }
  if fnnx is not None:

    class FWide(fnnx.Module):
      def __init__(self, n):
        self.params = fnnx.List([fnnx.Param(jnp.zeros(())) for _ in range(n)])

    fm = FWide(n)
    fns["flax.nnx split+merge"] = lambda fm=fm: fnnx.merge(*fnnx.split(fm))
  reps = max(5, 2000 // n)
  split_us[n] = {k: t * 1e6 for k, t in _common.interleaved(fns, n=reps, rounds=5).items()}
  print(n, {k: f"{v:.1f} us" for k, v in split_us[n].items()})

# %%
fig, ax = plt.subplots(figsize=(6, 3.8))
for impl in split_us[SIZES[0]]:
  ax.plot(SIZES, [split_us[n][impl] for n in SIZES], marker="o", label=impl)
ax.set(xscale="log", yscale="log", xlabel="Variables", ylabel="µs",
       title="split + merge time vs model size")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(FIGURES / "performance_split_merge.png", dpi=100)
plt.show()

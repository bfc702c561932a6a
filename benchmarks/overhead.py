"""Per-step overhead of a jitted train step, and split/merge cost vs model size.

Side by side in one process: nnx_eqx, hand-written ``jax.jit``, ``eqx.filter_jit``
and ``flax.nnx`` (when importable). Run with the ``bench`` extra installed, or:

    python benchmarks/overhead.py            # nnx_eqx, jax, equinox (+ flax if installed)
    python benchmarks/overhead.py --quick    # fewer repeats

Prints tables of times and ratios (lower is better); ``main`` returns the rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nnx_eqx as nnx

try:  # optional comparison
  from flax import nnx as fnnx
except ImportError:  # pragma: no cover - depends on the environment
  fnnx = None

WIDTH, DEPTH, BATCH, LR = 64, 4, 32, 1e-2


def _time_per_call(fn: Callable[[], Any], n: int) -> float:
  t0 = time.perf_counter()
  for _ in range(n):
    out = fn()
  jax.block_until_ready(out)
  return (time.perf_counter() - t0) / n


def interleaved(fns: dict[str, Callable[[], Any]], n: int, rounds: int) -> dict[str, float]:
  """Median per-call seconds of each function, measured in interleaved rounds."""
  for fn in fns.values():  # warm up (compile)
    for _ in range(20):
      out = fn()
    jax.block_until_ready(out)
  samples: dict[str, list[float]] = {k: [] for k in fns}
  for _ in range(rounds):
    for k, fn in fns.items():
      samples[k].append(_time_per_call(fn, n))
  return {k: statistics.median(v) for k, v in samples.items()}


# -- train steps --------------------------------------------------------------
class MLP(nnx.Module):
  def __init__(self, rngs):
    self.layers = [nnx.Linear(WIDTH, WIDTH, rngs=rngs) for _ in range(DEPTH)]

  def __call__(self, x):
    for layer in self.layers[:-1]:
      x = jax.nn.relu(layer(x))
    return self.layers[-1](x)


def _loss(y_pred, y):
  return jnp.mean((y_pred - y) ** 2)


def make_steps(x, y) -> dict[str, Callable[[], Any]]:
  tx = optax.sgd(LR)
  steps: dict[str, Callable[[], Any]] = {}

  # Hand-written jax.jit over a params pytree.
  keys = jax.random.split(jax.random.key(0), DEPTH)
  params = [
    {"w": jax.random.normal(k, (WIDTH, WIDTH)) / WIDTH**0.5, "b": jnp.zeros(WIDTH)} for k in keys
  ]

  def forward(params, x):
    for p in params[:-1]:
      x = jax.nn.relu(x @ p["w"] + p["b"])
    return x @ params[-1]["w"] + params[-1]["b"]

  @jax.jit
  def jax_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(lambda p: _loss(forward(p, x), y))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  jstate = {"p": params, "o": tx.init(params)}

  def run_jax():
    jstate["p"], jstate["o"], loss = jax_step(jstate["p"], jstate["o"], x, y)
    return loss

  steps["jax.jit"] = run_jax

  # nnx_eqx.jit with nnx.Optimizer when available (else SGD through nnx.update).
  model = MLP(nnx.Rngs(0))
  if hasattr(nnx, "Optimizer"):
    opt = nnx.Optimizer(model, tx, wrt=nnx.Param)

    @nnx.jit
    def nnx_step(model, opt, x, y):
      loss, grads = nnx.value_and_grad(lambda m: _loss(m(x), y))(model)
      opt.update(model, grads)
      return loss

    steps["nnx_eqx.jit"] = lambda: nnx_step(model, opt, x, y)
  else:  # pragma: no cover - Optimizer ships with the library

    @nnx.jit
    def nnx_sgd(model, x, y):
      loss, grads = nnx.value_and_grad(lambda m: _loss(m(x), y))(model)
      params = nnx.state(model, nnx.Param)
      nnx.update(model, jax.tree.map(lambda p, g: p - LR * g, params, grads))
      return loss

    steps["nnx_eqx.jit"] = lambda: nnx_sgd(model, x, y)

  # Equinox.
  ekeys = jax.random.split(jax.random.key(0), DEPTH)
  emodel = [eqx.nn.Linear(WIDTH, WIDTH, key=k) for k in ekeys]

  def eforward(m, x):
    for layer in m[:-1]:
      x = jax.nn.relu(jax.vmap(layer)(x))
    return jax.vmap(m[-1])(x)

  @eqx.filter_jit
  def eqx_step(m, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(lambda m: _loss(eforward(m, x), y))(m)
    updates, opt_state = tx.update(grads, opt_state, eqx.filter(m, eqx.is_array))
    return eqx.apply_updates(m, updates), opt_state, loss

  estate = {"m": emodel, "o": tx.init(eqx.filter(emodel, eqx.is_array))}

  def run_eqx():
    estate["m"], estate["o"], loss = eqx_step(estate["m"], estate["o"], x, y)
    return loss

  steps["eqx.filter_jit"] = run_eqx

  if fnnx is not None:

    class FMLP(fnnx.Module):
      def __init__(self, rngs):
        self.layers = fnnx.List([fnnx.Linear(WIDTH, WIDTH, rngs=rngs) for _ in range(DEPTH)])

      def __call__(self, x):
        for layer in self.layers[:-1]:
          x = jax.nn.relu(layer(x))
        return self.layers[-1](x)

    fmodel = FMLP(fnnx.Rngs(0))
    fopt = fnnx.Optimizer(fmodel, tx, wrt=fnnx.Param)

    @fnnx.jit
    def flax_step(model, opt, x, y):
      loss, grads = fnnx.value_and_grad(lambda m: _loss(m(x), y))(model)
      opt.update(model, grads)
      return loss

    steps["flax.nnx.jit"] = lambda: flax_step(fmodel, fopt, x, y)

    fgraphdef, fstate = fnnx.split((fmodel, fopt))

    @jax.jit
    def flax_split_step(state, x, y):
      model, opt = fnnx.merge(fgraphdef, state)
      loss, grads = fnnx.value_and_grad(lambda m: _loss(m(x), y))(model)
      opt.update(model, grads)
      return fnnx.state((model, opt)), loss

    fbox = {"s": fstate}

    def run_flax_best():
      fbox["s"], loss = flax_split_step(fbox["s"], x, y)
      return loss

    steps["flax.nnx split+jax.jit"] = run_flax_best
  return steps


# -- split / merge ------------------------------------------------------------
class Wide(nnx.Module):
  def __init__(self, n):
    self.params = [nnx.Param(jnp.zeros(())) for _ in range(n)]


def split_merge_rows(sizes, n, rounds) -> list[dict]:
  rows = []
  mlp = MLP(nnx.Rngs(0))
  fns: dict[str, Callable[[], Any]] = {
    "nnx_eqx split+merge": lambda: nnx.merge(*nnx.split(mlp)),
    "jax tree flatten+unflatten": lambda: jax.tree.unflatten(
      *reversed(jax.tree.flatten(nnx.state(mlp)))
    ),
  }
  emodel = [eqx.nn.Linear(WIDTH, WIDTH, key=k) for k in jax.random.split(jax.random.key(0), DEPTH)]
  fns["eqx partition+combine"] = lambda: eqx.combine(*eqx.partition(emodel, eqx.is_array))
  if fnnx is not None:
    fm = fnnx.List([fnnx.Linear(WIDTH, WIDTH, rngs=fnnx.Rngs(0)) for _ in range(DEPTH)])
    fns["flax.nnx split+merge"] = lambda: fnnx.merge(*fnnx.split(fm))
  times = interleaved(fns, n, rounds)
  for k, t in times.items():
    rows.append({"case": f"MLP {DEPTH}x{WIDTH}", "impl": k, "us": t * 1e6})
  for size in sizes:
    model = Wide(size)
    cases: dict[str, Callable[[], Any]] = {
      "nnx_eqx split+merge": lambda m=model: nnx.merge(*nnx.split(m))
    }
    if fnnx is not None:

      class FWide(fnnx.Module):
        def __init__(self, n):
          self.params = fnnx.List([fnnx.Param(jnp.zeros(())) for _ in range(n)])

      fw = FWide(size)
      cases["flax.nnx split+merge"] = lambda m=fw: fnnx.merge(*fnnx.split(m))
    reps = max(3, n // max(1, size // 10))
    for k, t in interleaved(cases, reps, rounds).items():
      rows.append({"case": f"{size} Variables", "impl": k, "us": t * 1e6})
  return rows


def deep_nesting_ok(depth: int = 1000) -> bool:
  root = cur = nnx.Module()
  for _ in range(depth):
    cur.child = nnx.Module()
    cur = cur.child
  cur.w = nnx.Param(jnp.ones(1))
  return nnx.merge(*nnx.split(root)) is not None


def _print_table(title: str, rows: list[dict], base: str, key: str = "case") -> None:
  print(f"\n{title}")
  groups: dict[str, list[dict]] = {}
  for r in rows:
    groups.setdefault(r[key], []).append(r)
  for case, rs in groups.items():
    ref = next((r["us"] for r in rs if r["impl"] == base), None)
    for r in rs:
      ratio = f"{r['us'] / ref:6.2f}x" if ref else "   -  "
      print(f"  {case:>16} | {r['impl']:<28} {r['us']:10.1f} us  {ratio} vs {base}")


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
  p.add_argument("--rounds", type=int, default=7)
  args = p.parse_args(argv)
  n, rounds = (50, 3) if args.quick else (500, args.rounds)
  print(f"jax {jax.__version__}, devices {jax.devices()}, flax: {fnnx is not None}")
  x = jax.random.normal(jax.random.key(1), (BATCH, WIDTH))
  y = jax.random.normal(jax.random.key(2), (BATCH, WIDTH))
  step_times = interleaved(make_steps(x, y), n, rounds)
  steps = [{"case": "train step", "impl": k, "us": t * 1e6} for k, t in step_times.items()]
  _print_table(f"Train step, {DEPTH}x{WIDTH} MLP, batch {BATCH}, SGD", steps, "jax.jit")
  sizes = (10, 100, 1000) if args.quick else (10, 100, 1000, 10000)
  sm = split_merge_rows(sizes, n, rounds)
  _print_table("split + merge", sm, "nnx_eqx split+merge")
  print(f"\nnesting depth 1000 split/merge: {'ok' if deep_nesting_ok() else 'FAILED'}")
  return {"train_step": steps, "split_merge": sm}


if __name__ == "__main__":
  main(sys.argv[1:])

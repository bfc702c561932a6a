"""Cost of the flax.nnx bridge: conversion time vs model size, and a training step of
an ``nnx.to_flax`` model under ``flax.nnx.jit`` vs the same model written in flax.

Side by side in one process (interleaved rounds, medians):

* conversion: ``nnx.from_flax`` of a flax.nnx model of 10 to 10,000 Variables (an
  ``nnx.List`` of ``Linear(4, 4)`` layers) and ``nnx.to_flax`` of the nnx_eqx model of
  the same shape, next to flax's own ``nnx.split`` + ``nnx.merge`` of the flax model
  (the walk both conversions rest on); the per-Variable time shows whether
  conversion grows linearly;
* training: one SGD step (4x64 MLP, batch 32) under ``flax.nnx.jit`` with flax's
  ``Optimizer``, on the MLP written natively in flax.nnx (the baseline) and on the
  same MLP written in nnx_eqx and passed through ``nnx.to_flax``; and the other way,
  ``nnx.jit`` + ``nnx.Optimizer`` on ``nnx.from_flax`` of the flax MLP against the
  native nnx_eqx MLP. Target: ratio <= 1.05.

Needs flax (``pip install -e ".[bench]"``); without it, ``main`` returns no rows.

    python benchmarks/flax_interop.py            # full run
    python benchmarks/flax_interop.py --quick    # fewer repeats, smaller sizes

``main`` returns ``{"conversion": rows, "training": rows}``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

import jax
import optax

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import flax_nnx, interleaved, print_table  # noqa: E402


def _none(_: object) -> None:
  return None


def stacks(fnnx: Any, n_vars: int) -> tuple[Any, Any]:
  """``(flax model, nnx_eqx model)``: ``n_vars / 2`` ``Linear(4, 4)`` layers in a List each."""
  n = max(1, n_vars // 2)
  f = fnnx.List([fnnx.Linear(4, 4, rngs=fnnx.Rngs(i)) for i in range(n)])
  m = nnx.List([nnx.Linear(4, 4, rngs=nnx.Rngs(i)) for i in range(n)])

  class FlaxStack(fnnx.Module):
    def __init__(self, layers):
      self.layers = layers

  class NnxStack(nnx.Module):
    def __init__(self, layers):
      self.layers = layers

  return FlaxStack(f), NnxStack(m)


def conversion_rows(fnnx: Any, sizes, n, rounds) -> list[dict]:
  rows = []
  for size in sizes:
    f, m = stacks(fnnx, size)
    n_vars = len(jax.tree.leaves(nnx.state(m)))
    case = f"{n_vars} Variables"
    times = interleaved(
      {
        "flax split + merge": lambda f=f: _none(fnnx.merge(*fnnx.split(f))),
        "nnx.from_flax": lambda f=f: _none(nnx.from_flax(f)),
        "nnx.to_flax": lambda m=m: _none(nnx.to_flax(m)),
      },
      n=max(1, n // max(1, size // 10)),
      rounds=rounds,
      warmup=2,
    )
    for impl, t in times.items():
      rows.append(
        {
          "case": case,
          "impl": impl,
          "us": t * 1e6,
          "us_per_var": t * 1e6 / n_vars,
          "baseline": impl == "flax split + merge",
        }
      )
  return rows


def mlps(fnnx: Any, depth: int = 4, width: int = 64) -> tuple[Any, Any]:
  """The same MLP written in flax.nnx and in nnx_eqx (same shapes, initializers, seeds)."""

  class FlaxMLP(fnnx.Module):
    def __init__(self, rngs):
      self.layers = fnnx.List([fnnx.Linear(width, width, rngs=rngs) for _ in range(depth)])

    def __call__(self, x):
      for layer in self.layers:
        x = jax.nn.relu(layer(x))
      return x

  class NnxMLP(nnx.Module):
    def __init__(self, rngs):
      self.layers = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(depth)])

    def __call__(self, x):
      for layer in self.layers:
        x = jax.nn.relu(layer(x))
      return x

  return FlaxMLP(fnnx.Rngs(0)), NnxMLP(nnx.Rngs(0))


def training_rows(fnnx: Any, n, rounds) -> list[dict]:
  x = jax.random.normal(jax.random.key(1), (32, 64))
  y = jax.random.normal(jax.random.key(2), (32, 64))

  def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()

  @fnnx.jit
  def flax_step(model, opt, x, y):
    loss, grads = fnnx.value_and_grad(loss_fn)(model, x, y)
    opt.update(model, grads)
    return loss

  @nnx.jit
  def nnx_step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    opt.update(model, grads)
    return loss

  native_flax, native_nnx = mlps(fnnx)
  to_flax = nnx.to_flax(mlps(fnnx)[1])
  from_flax = nnx.from_flax(mlps(fnnx)[0])
  tx = optax.sgd(1e-3)
  opts = {
    "flax.nnx MLP": fnnx.Optimizer(native_flax, tx, wrt=fnnx.Param),
    "nnx.to_flax(nnx_eqx MLP)": fnnx.Optimizer(to_flax, tx, wrt=fnnx.Param),
    "nnx_eqx MLP": nnx.Optimizer(native_nnx, tx, wrt=nnx.Param),
    "nnx.from_flax(flax.nnx MLP)": nnx.Optimizer(from_flax, tx, wrt=nnx.Param),
  }
  flax_case = "flax.nnx.jit step, MLP 4x64, batch 32"
  nnx_case = "nnx.jit step, MLP 4x64, batch 32"
  times = interleaved(
    {
      "flax.nnx MLP": lambda: flax_step(native_flax, opts["flax.nnx MLP"], x, y),
      "nnx.to_flax(nnx_eqx MLP)": lambda: flax_step(
        to_flax, opts["nnx.to_flax(nnx_eqx MLP)"], x, y
      ),
      "nnx_eqx MLP": lambda: nnx_step(native_nnx, opts["nnx_eqx MLP"], x, y),
      "nnx.from_flax(flax.nnx MLP)": lambda: nnx_step(
        from_flax, opts["nnx.from_flax(flax.nnx MLP)"], x, y
      ),
    },
    n=n,
    rounds=rounds,
  )
  return [
    {
      "case": flax_case,
      "impl": "flax.nnx MLP",
      "us": times["flax.nnx MLP"] * 1e6,
      "baseline": True,
    },
    {
      "case": flax_case,
      "impl": "nnx.to_flax(nnx_eqx MLP)",
      "us": times["nnx.to_flax(nnx_eqx MLP)"] * 1e6,
    },
    {"case": nnx_case, "impl": "nnx_eqx MLP", "us": times["nnx_eqx MLP"] * 1e6, "baseline": True},
    {
      "case": nnx_case,
      "impl": "nnx.from_flax(flax.nnx MLP)",
      "us": times["nnx.from_flax(flax.nnx MLP)"] * 1e6,
    },
  ]


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes")
  p.add_argument("--only", choices=("conversion", "training"), help="one table")
  args = p.parse_args(argv)
  fnnx = flax_nnx()
  if fnnx is None:
    print("flax is not installed: no flax.nnx bridge rows (pip install -e '.[bench]')")
    return {}
  sizes = (10, 100, 1000) if args.quick else (10, 100, 1000, 10000)
  n, rounds = (20, 3) if args.quick else (100, 7)
  out: dict[str, list[dict]] = {}
  if args.only in (None, "conversion"):
    conv = out["conversion"] = conversion_rows(fnnx, sizes, n, rounds)
    print_table("Conversion time vs model size (ratios vs flax's split + merge)", conv)
    print("\n  per Variable (flat across sizes = linear growth):")
    for r in conv:
      print(f"  {r['case']:>16} | {r['impl']:<20} {r['us_per_var']:8.2f} us/Variable")
  if args.only in (None, "training"):
    tr = out["training"] = training_rows(fnnx, n, rounds)
    print_table("Training step through the bridge (target: <= 1.05x the native model)", tr)
  return out


if __name__ == "__main__":
  main()

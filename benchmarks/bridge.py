"""Cost of the Equinox bridge: conversion time vs model size, and eqx.filter_jit
per-call overhead on an nnx_eqx module vs on the equivalent Equinox model.

Side by side in one process (interleaved rounds, medians):

* conversion: ``nnx.from_eqx`` and ``nnx.to_eqx`` of models with 10 to 10,000
  Variables (an ``eqx.nn.Sequential`` of ``Linear(4, 4)`` layers, and a user
  ``eqx.Module`` holding them, converted generically), next to a plain
  ``jax.tree.map`` copy of the same Equinox model; the per-Variable time shows
  whether conversion grows linearly;
* ``eqx.filter_jit``: the same jitted forward pass called on an Equinox MLP and
  on its NNX conversion (target: ratio <= 1.0);
* Equinox-style training (``eqx.filter_jit`` + ``eqx.filter_value_and_grad`` +
  optax + ``eqx.apply_updates``) over ``nnx.from_eqx(eqx.nn.MLP(...))`` and over
  ``nnx.to_eqx`` of an NNX model, at depth 2 / 8 / 32, on a batch and on one
  example, and the pieces of such a step at depth 8, each against the same code
  on the Equinox model (target: ratio <= 1.05, flat in depth; see
  ``_eqx_training.py``);
* small user-written Equinox models (linear regression, PCA, a scaler pipeline:
  60-100 us steps) trained the same way, on the Equinox model and on its
  ``nnx.from_eqx`` conversion, where a fixed per-step cost would show (target:
  ratio <= 1.10; see ``_small_models.py``).

    python benchmarks/bridge.py            # full run
    python benchmarks/bridge.py --quick    # fewer repeats, smaller sizes

``main`` returns ``{"conversion": rows, "filter_jit": rows, "eqx_training": rows,
"small_models": rows}``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import interleaved, print_table  # noqa: E402
from _eqx_training import models, piece_fns, step_fns  # noqa: E402
from _small_models import cases as small_cases  # noqa: E402
from _small_models import step_fn as small_step  # noqa: E402


class Stack(eqx.Module):
  """A user module (converted generically) holding a tuple of layers."""

  layers: tuple

  def __call__(self, x):
    for layer in self.layers:
      x = layer(x)
    return x


def eqx_model(n_vars: int, generic: bool) -> eqx.Module:
  keys = jax.random.split(jax.random.key(0), max(1, n_vars // 2))
  layers = tuple(eqx.nn.Linear(4, 4, key=k) for k in keys)
  return Stack(layers) if generic else eqx.nn.Sequential(list(layers))


def _none(_: object) -> None:
  return None


def conversion_rows(sizes, n, rounds) -> list[dict]:
  rows = []
  for size in sizes:
    for generic in (False, True):
      e = eqx_model(size, generic)
      m = nnx.from_eqx(e)
      n_vars = len(jax.tree.leaves(nnx.state(m)))
      label = "user Module" if generic else "eqx.nn.Sequential"
      case = f"{n_vars} Variables ({label})"
      # Each function returns None: the timer blocks on what a function returns,
      # and flattening a 10k-Variable result would be timed with the conversion.
      times = interleaved(
        {
          "jax.tree.map copy": lambda e=e: _none(jax.tree.map(lambda x: x, e)),
          "nnx.from_eqx": lambda e=e: _none(nnx.from_eqx(e)),
          "nnx.to_eqx": lambda m=m: _none(nnx.to_eqx(m)),
        },
        n=max(1, n // max(1, size // 10)),
        rounds=rounds,
        warmup=2,
      )
      for impl, t in times.items():
        rows.append({"case": case, "impl": impl, "us": t * 1e6, "us_per_var": t * 1e6 / n_vars})
  return rows


def filter_jit_rows(n, rounds) -> list[dict]:
  e = eqx.nn.MLP(64, 64, 64, 4, key=jax.random.key(0))
  m = nnx.from_eqx(e)
  x = jnp.ones((32, 64))
  fwd = eqx.filter_jit(lambda model, x: jax.vmap(model)(x))
  times = interleaved(
    {"equinox model": lambda: fwd(e, x), "nnx_eqx module": lambda: fwd(m, x)}, n=n, rounds=rounds
  )
  case = "eqx.filter_jit MLP 4x64, batch 32"
  return [
    {"case": case, "impl": "equinox model", "us": times["equinox model"] * 1e6, "baseline": True},
    {"case": case, "impl": "nnx_eqx module", "us": times["nnx_eqx module"] * 1e6},
  ]


def eqx_training_rows(depths, n, rounds) -> list[dict]:
  rows = []

  def add(case: str, fns: dict) -> None:
    times = interleaved(fns, n=n, rounds=rounds)
    for impl, t in times.items():
      rows.append({"case": case, "impl": impl, "us": t * 1e6, "baseline": impl == "equinox model"})

  for direction in ("from_eqx", "to_eqx"):
    for batched in (True, False):
      for depth in depths:
        e, m, forward = models(direction, depth, batched)
        kind = "batched" if batched else "per-example"
        add(
          f"train step, {direction}, {kind}, depth {depth}",
          {
            "equinox model": step_fns(e, forward, batched),
            "nnx_eqx module": step_fns(m, forward, batched),
          },
        )
    e, m, forward = models(direction, 8)
    pe, pm = piece_fns(e, forward), piece_fns(m, forward)
    for piece in pe:
      add(
        f"{piece}, {direction}, depth 8", {"equinox model": pe[piece], "nnx_eqx module": pm[piece]}
      )
  return rows


def small_model_rows(n, rounds) -> list[dict]:
  rows = []
  for name, (e, loss) in small_cases().items():
    times = interleaved(
      {"equinox model": small_step(e, loss), "nnx_eqx module": small_step(nnx.from_eqx(e), loss)},
      n=n,
      rounds=rounds,
    )
    for impl, t in times.items():
      rows.append(
        {
          "case": f"train step, {name}",
          "impl": impl,
          "us": t * 1e6,
          "baseline": impl == "equinox model",
        }
      )
  return rows


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes")
  p.add_argument(
    "--only", choices=("conversion", "filter_jit", "eqx_training", "small_models"), help="one table"
  )
  args = p.parse_args(argv)
  sizes = (10, 100, 1000) if args.quick else (10, 100, 1000, 10000)
  n, rounds = (20, 3) if args.quick else (100, 7)
  out: dict[str, list[dict]] = {}
  if args.only in (None, "conversion"):
    conv = out["conversion"] = conversion_rows(sizes, n, rounds)
    print_table("Conversion time vs model size (ratios vs a jax.tree.map copy)", conv)
    print("\n  per Variable (flat across sizes = linear growth):")
    for r in conv:
      if r["impl"] != "jax.tree.map copy":
        print(f"  {r['case']:>38} | {r['impl']:<14} {r['us_per_var']:8.2f} us/Variable")
  if args.only in (None, "filter_jit"):
    fj = out["filter_jit"] = filter_jit_rows(n * 10, rounds)
    print_table("eqx.filter_jit per-call time (target: nnx_eqx <= 1.0x the Equinox model)", fj)
  if args.only in (None, "eqx_training"):
    tr = out["eqx_training"] = eqx_training_rows((2, 8, 32), n, rounds)
    print_table("Equinox-style training (target: nnx_eqx <= 1.05x the Equinox model)", tr)
  if args.only in (None, "small_models"):
    sm = out["small_models"] = small_model_rows(n * 5, rounds)
    print_table("Small user-written Equinox models (target: nnx_eqx <= 1.10x)", sm)
  return out


if __name__ == "__main__":
  main()

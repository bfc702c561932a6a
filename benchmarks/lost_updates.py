"""What watching for dropped state updates (``nnx.LostUpdateError``) costs.

Two tables, each measured side by side in this process:

* ``watch``: a model of 100 ``Linear(4, 4)`` layers in an ``nnx.List`` (200
  Variables), used while nothing is stale (the baseline) and while a dropped
  update left a Variable of *another* module stale (it is held, unreported).
  Staleness belongs to the Variable that was traced, so using a module that holds
  no stale Variable should cost the same either way (ratios near 1.00x):
  ``jax.tree`` flatten + unflatten, a graph walk (``nnx.state``), and reading
  one Variable's value.
* ``eqx_step``: the Equinox-style training step (``eqx.filter_jit`` +
  ``filter_value_and_grad`` + optax + ``apply_updates``) over
  ``nnx.from_eqx(eqx.nn.MLP(16, 16, 16, 32))`` against the same step over the
  Equinox MLP (targets: 1.10x batched, 1.20x per example). Every call flattens
  and rebuilds the whole model, so per-flatten work of the watch shows here.

    python benchmarks/lost_updates.py            # full run
    python benchmarks/lost_updates.py --quick    # fewer repeats

``main`` returns ``{"watch": rows, "eqx_step": rows}``.
"""

from __future__ import annotations

import argparse
import gc
import pathlib
import sys
import time

import jax
import jax.numpy as jnp

import nnx_eqx as nnx
from nnx_eqx.graph.tracing import _lost_updates

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import interleaved, print_table  # noqa: E402
from _eqx_training import models, step_fns  # noqa: E402

LAYERS = 100
DEPTH = 32


class Stack(nnx.Module):
  def __init__(self, n: int, rngs: nnx.Rngs):
    self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(n)])


def _use_fns(model: Stack) -> dict[str, object]:
  def flatten_unflatten():
    leaves, tree = jax.tree.flatten(model)
    return jax.tree.unflatten(tree, leaves)

  return {
    "jax.tree flatten + unflatten": flatten_unflatten,
    "graph walk (nnx.state)": lambda: nnx.state(model),
    "read one Variable": lambda: model.layers[0].kernel[...],
  }


def _alternating(fns: dict, n: int, rounds: int, marks: dict) -> tuple[dict, dict]:
  """Seconds per call of each function (its best round: a shared machine only
  ever adds time) with no stale mark held and with ``marks`` held, the two
  alternating round by round (drifts of the machine hit both alike)."""
  stale = _lost_updates.STALE
  clean: dict[str, list] = {k: [] for k in fns}
  marked: dict[str, list] = {k: [] for k in fns}
  for fn in fns.values():
    fn()
  for _ in range(rounds):
    for held, out in ((False, clean), (True, marked)):
      stale.clear()
      if held:
        stale.update(marks)
      for k, fn in fns.items():
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(n):
          fn()
        out[k].append((time.perf_counter() - t0) / n)
  stale.update(marks)
  return (
    {k: min(v) for k, v in clean.items()},
    {k: min(v) for k, v in marked.items()},
  )


def watch_rows(n: int, rounds: int) -> list[dict]:
  model = Stack(LAYERS, nnx.Rngs(0))
  elsewhere = nnx.BatchNorm(4, rngs=nnx.Rngs(1))
  jax.jit(lambda m, x: m(x))(elsewhere, jnp.ones((2, 4)))  # its update is dropped
  try:
    elsewhere.mean[...]
  except nnx.LostUpdateError:
    pass
  else:
    raise AssertionError("the dropped update was not found")
  marks = dict(_lost_updates.STALE)
  clean, marked = _alternating(_use_fns(model), n, rounds, marks)
  rows = []
  for case in clean:
    label = f"{case}, {LAYERS} layers"
    rows.append({"case": label, "impl": "nothing stale", "us": clean[case] * 1e6, "baseline": True})
    rows.append({"case": label, "impl": "a Variable stale elsewhere", "us": marked[case] * 1e6})
  nnx.clear_lost_updates(elsewhere)
  return rows


def eqx_step_rows(n: int, rounds: int) -> list[dict]:
  rows = []
  for batched in (True, False):
    e, m, forward = models("from_eqx", DEPTH, batched)
    fns = {"equinox model": step_fns(e, forward, batched), "nnx_eqx": step_fns(m, forward, batched)}
    t = interleaved(fns, n, rounds, block=True)
    case = f"from_eqx MLP depth {DEPTH}, {'batched' if batched else 'per example'}"
    for impl, sec in t.items():
      rows.append(
        {"case": case, "impl": impl, "us": sec * 1e6, "baseline": impl == "equinox model"}
      )
  return rows


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats")
  p.add_argument("--only", choices=("watch", "eqx_step"), help="one table")
  args = p.parse_args(argv)
  n, rounds = (20, 5) if args.quick else (100, 9)
  out: dict[str, list[dict]] = {}
  if args.only in (None, "watch"):
    out["watch"] = watch_rows(n, rounds)
    print_table(
      "Using a module while another holds a stale Variable (ratios vs none)", out["watch"]
    )
  if args.only in (None, "eqx_step"):
    out["eqx_step"] = eqx_step_rows(max(n // 2, 10), rounds)
    print_table(
      "Equinox-style step over from_eqx(MLP) (targets: 1.10x batched, 1.20x per example)",
      out["eqx_step"],
    )
  return out


if __name__ == "__main__":
  main()

"""Scan over layers vs an unrolled loop, and what remat saves.

Measured side by side in one run (train step: value_and_grad + SGD, jitted):

1. compile time (trace + lower + XLA compile) and step time of ``nnx.scan``
   over N layers, an unrolled Python loop over N ``nnx.Linear`` layers, and a
   hand-written ``jax.lax.scan`` over the split state (and ``flax.nnx.scan``
   when flax is importable);
2. compiled temp memory of a deep unrolled MLP with and without ``nnx.remat``;
3. compiled temp memory of ``nnx.remat`` inside ``nnx.scan`` vs a hand-written
   ``jax.checkpoint`` inside ``jax.lax.scan`` (and flax.nnx's);
4. a converted Equinox transformer (attention + MLP blocks): compile and step time
   of the unrolled Equinox model vs ``nnx.stack`` + ``nnx.scan`` by depth, and
   compiled temp memory with and without ``nnx.remat`` (``_eqx_scan.py``).
   ``--quick`` runs small sizes only (a smoke test).

Usage: ``python benchmarks/scan_depth.py [--depths 4 16 64] [--width 128]``.
For the flax.nnx columns, run it with an interpreter that has flax installed
(``PYTHONPATH`` pointing at this repository where nnx_eqx is not installed there).
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import time

import jax
import jax.numpy as jnp

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _eqx_scan  # noqa: E402
from _common import print_table  # noqa: E402

try:
  from flax import nnx as fnnx
except ImportError:  # pragma: no cover - optional
  fnnx = None

LR = 0.01


def _timed_compile(make, *args, repeats: int = 5) -> float:
  """Trace + lower + XLA compile time, each time of a fresh function; the
  minimum over ``repeats`` (robust to other load on the machine)."""
  times = []
  for _ in range(repeats):
    jitted = make()
    t = time.perf_counter()
    jitted.lower(*args).compile()
    times.append(time.perf_counter() - t)
  return min(times)


def _step_time(fn, args, steps: int, rounds: int = 5) -> float:
  """Mean time per call over ``steps`` calls; the minimum over ``rounds``."""
  jax.block_until_ready(fn(*args))
  best = float("inf")
  for _ in range(rounds):
    t = time.perf_counter()
    for _ in range(steps):
      out = fn(*args)
    jax.block_until_ready(out)
    best = min(best, (time.perf_counter() - t) / steps)
  return best


# --------------------------------------------------------------------------
# Models: a Linear+tanh layer (depth table) and an MLP block (remat tables)
# --------------------------------------------------------------------------
def linear_body(layer, x):
  return jnp.tanh(layer(x))


def block_body(block, x):
  return x + block.down(jax.nn.gelu(block.up(x)))


@functools.cache
def block_class(lib):
  """An MLP block class for ``lib`` (nnx_eqx or flax.nnx): up to 4x width, gelu, down."""

  def __init__(self, width: int, rngs):
    self.up = lib.Linear(width, 4 * width, rngs=rngs)
    self.down = lib.Linear(4 * width, width, rngs=rngs)

  return type("MLPBlock", (lib.Module,), {"__init__": __init__})


def make_layer(lib, width: int, blocks: bool, rngs):
  if blocks:
    return block_class(lib)(width, rngs)
  return lib.Linear(width, width, rngs=rngs)


def stacked(lib, depth: int, width: int, blocks: bool = False):
  @lib.split_rngs(splits=depth)
  @lib.vmap(in_axes=0, out_axes=0)
  def make(rngs):
    return make_layer(lib, width, blocks, rngs)

  return make(lib.Rngs(0))


def scan_step(lib, remat: bool = False, body=linear_body):
  """A jitted SGD train step over stacked layers with ``lib.scan`` (nnx_eqx or flax.nnx)."""
  if remat:
    body = lib.remat(body)
  forward = lib.scan(body, in_axes=(0, lib.Carry), out_axes=lib.Carry)

  @lib.jit
  def step(model, x):
    loss, grads = lib.value_and_grad(lambda m: forward(m, x).sum())(model)
    params = lib.state(model, lib.Param)
    lib.update(model, jax.tree.map(lambda p, g: p - LR * g, params, grads))
    return loss

  return step


class Unrolled(nnx.Module):
  """``depth`` separate layers applied by a Python loop."""

  def __init__(self, depth: int, width: int, remat: bool, blocks: bool = False):
    rngs = nnx.Rngs(0)
    self.layers = nnx.List([make_layer(nnx, width, blocks, rngs) for _ in range(depth)])
    self.remat = remat
    self.body = block_body if blocks else linear_body

  def __call__(self, x):
    apply = nnx.remat(self.body) if self.remat else self.body
    for layer in self.layers:
      x = apply(layer, x)
    return x


def unrolled_step():
  @nnx.jit
  def step(model, x):
    loss, grads = nnx.value_and_grad(lambda m: m(x).sum())(model)
    params = nnx.state(model, nnx.Param)
    nnx.update(model, jax.tree.map(lambda p, g: p - LR * g, params, grads))
    return loss

  return step


def lax_scan_step(graphdef, remat: bool = False, body=linear_body):
  """The same train step written by hand: jax.lax.scan over the split state."""

  def layer(p, x):
    return body(nnx.merge(graphdef, p), x)

  if remat:
    layer = jax.checkpoint(layer)

  def loss_fn(params, x):
    return jax.lax.scan(lambda x, p: (layer(p, x), None), x, params)[0].sum()

  @jax.jit
  def step(params, x):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    return loss, jax.tree.map(lambda p, g: p - LR * g, params, grads)

  return step


# --------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------
def depth_table(depths, width, batch, steps, unrolled_max):
  x = jnp.ones((batch, width))
  rows = []
  for d in depths:
    row: dict = {"depth": d}
    model = stacked(nnx, d, width)
    row["scan_c"] = _timed_compile(lambda: scan_step(nnx), model, x)
    row["scan_s"] = _step_time(scan_step(nnx), (model, x), steps)
    graphdef, params = nnx.split(stacked(nnx, d, width))
    row["lax_c"] = _timed_compile(lambda: lax_scan_step(graphdef), params, x)
    row["lax_s"] = _step_time(lax_scan_step(graphdef), (params, x), steps)
    if d <= unrolled_max:
      unrolled = Unrolled(d, width, remat=False)
      row["unr_c"] = _timed_compile(unrolled_step, unrolled, x)
      row["unr_s"] = _step_time(unrolled_step(), (unrolled, x), steps)
    if fnnx is not None:
      fmodel = stacked(fnnx, d, width)
      row["flax_c"] = _timed_compile(lambda: scan_step(fnnx), fmodel, x)
      row["flax_s"] = _step_time(scan_step(fnnx), (fmodel, x), steps)
    rows.append(row)
    print(f"  measured depth {d}", flush=True)
  return rows


def print_depth_table(rows):
  base = rows[0]
  cols = [("scan", "nnx.scan"), ("lax", "lax.scan"), ("unr", "unrolled"), ("flax", "flax.scan")]
  cols = [(k, n) for k, n in cols if f"{k}_c" in base]
  print(
    "\nTrain step compile time (s, min of 5) and its ratio to the shallowest depth;"
    " step time (ms, min of 5 rounds)"
  )
  head = f"{'depth':>5} | " + " | ".join(f"{n + ' compile':>22}" for _, n in cols)
  head += " | " + " | ".join(f"{n + ' step':>16}" for _, n in cols)
  print(head)
  print("-" * len(head))
  for r in rows:
    cells = []
    for k, _ in cols:
      c = r.get(f"{k}_c")
      cells.append(f"{c:8.2f} ({c / base[f'{k}_c']:5.2f}x)" if c is not None else "-")
    steps_ = [f"{r[f'{k}_s'] * 1e3:.2f}" if f"{k}_s" in r else "-" for k, _ in cols]
    print(
      f"{r['depth']:>5} | "
      + " | ".join(f"{c:>22}" for c in cells)
      + " | "
      + " | ".join(f"{s:>16}" for s in steps_)
    )
  last = rows[-1]
  print(
    f"\nnnx.scan compile, depth {last['depth']} / depth {base['depth']}:"
    f" {last['scan_c'] / base['scan_c']:.2f}x (target <= 1.2x)"
  )
  if "unr_c" in last:
    print(
      f"unrolled / nnx.scan compile at depth {last['depth']}: {last['unr_c'] / last['scan_c']:.2f}x"
    )
  print(
    f"nnx.scan / lax.scan compile at depth {last['depth']}: {last['scan_c'] / last['lax_c']:.2f}x"
  )
  print(f"nnx.scan / lax.scan step at depth {last['depth']}: {last['scan_s'] / last['lax_s']:.2f}x")
  if "flax_s" in last:
    print(
      f"flax.scan / nnx.scan step at depth {last['depth']}: {last['flax_s'] / last['scan_s']:.2f}x"
    )


def temp_mib(jitted, *args) -> float:
  return jitted.lower(*args).compile().memory_analysis().temp_size_in_bytes / 2**20


def remat_tables(depth, width, batch):
  x = jnp.ones((batch, width))
  plain = temp_mib(unrolled_step(), Unrolled(depth, width, False, blocks=True), x)
  remat = temp_mib(unrolled_step(), Unrolled(depth, width, True, blocks=True), x)
  print(
    f"\nCompiled temp memory of a train step, {depth} residual MLP blocks"
    f" (width {width}, hidden {4 * width}, batch {batch}):"
  )
  print(
    f"  unrolled: no remat {plain:8.2f} MiB | nnx.remat {remat:8.2f} MiB | {remat / plain:.2f}x"
  )
  model = stacked(nnx, depth, width, blocks=True)
  graphdef, params = nnx.split(model)
  ours = temp_mib(scan_step(nnx, True, block_body), model, x)
  ours_plain = temp_mib(scan_step(nnx, False, block_body), model, x)
  ref = temp_mib(lax_scan_step(graphdef, True, block_body), params, x)
  print(
    f"  in scan:  no remat {ours_plain:8.2f} MiB | nnx.remat {ours:8.2f} MiB | hand-written"
    f" jax.checkpoint in lax.scan {ref:8.2f} MiB | nnx / hand-written {ours / ref:.2f}x"
    " (target 1.00x)"
  )
  if fnnx is not None:
    fl = temp_mib(scan_step(fnnx, True, block_body), stacked(fnnx, depth, width, True), x)
    print(f"  flax.nnx remat in scan {fl:8.2f} MiB | flax / hand-written {fl / ref:.2f}x")


NAMES = {"lax": "jax.lax.scan (by hand)", "scan": "nnx.scan", "unr": "unrolled loop"}
NAMES["flax"] = "flax.nnx.scan"


def depth_rows(raw: list[dict]) -> tuple[list[dict], list[dict]]:
  """The depth table as compile-time and step-time rows."""
  compile_rows, step_rows = [], []
  for r in raw:
    for k, impl in NAMES.items():
      if f"{k}_c" in r:
        compile_rows.append({"case": f"{r['depth']} layers", "impl": impl, "s": r[f"{k}_c"]})
        step_rows.append({"case": f"{r['depth']} layers", "impl": impl, "ms": r[f"{k}_s"] * 1e3})
  return compile_rows, step_rows


def remat_rows(depth: int, width: int, batch: int) -> list[dict]:
  """Compiled temp memory of remat in scan: nnx_eqx, by hand, flax.nnx."""
  x = jnp.ones((batch, width))
  model = stacked(nnx, depth, width, blocks=True)
  graphdef, params = nnx.split(model)
  case = f"remat in scan, {depth} MLP blocks, width {width}, batch {batch}"
  rows = [
    {
      "case": case,
      "impl": "jax.checkpoint in lax.scan (by hand)",
      "baseline": True,
      "MiB": temp_mib(lax_scan_step(graphdef, True, block_body), params, x),
    },
    {
      "case": case,
      "impl": "nnx.remat in nnx.scan",
      "MiB": temp_mib(scan_step(nnx, True, block_body), model, x),
    },
    {
      "case": case,
      "impl": "nnx.scan without remat",
      "MiB": temp_mib(scan_step(nnx, False, block_body), model, x),
    },
  ]
  if fnnx is not None:
    fmodel = stacked(fnnx, depth, width, True)
    rows.append(
      {
        "case": case,
        "impl": "flax.nnx.remat in flax.nnx.scan",
        "MiB": temp_mib(scan_step(fnnx, True, block_body), fmodel, x),
      }
    )
  return rows


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="small sizes, few repeats (smoke test)")
  p.add_argument("--depths", type=int, nargs="+", default=[4, 16, 64])
  p.add_argument("--width", type=int, default=128)
  p.add_argument("--batch", type=int, default=64)
  p.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
  p.add_argument("--unrolled-max", type=int, default=64, help="skip unrolled above this depth")
  p.add_argument("--remat-depth", type=int, default=32)
  p.add_argument("--remat-width", type=int, default=512)
  p.add_argument("--remat-batch", type=int, default=256)
  p.add_argument("--eqx-depths", type=int, nargs="+", default=[2, 8, 32])
  p.add_argument("--eqx-width", type=int, default=32, help="d of the Equinox blocks")
  p.add_argument("--eqx-remat-depth", type=int, default=8, help="blocks in the memory table")
  p.add_argument(
    "--eqx-repeats", type=int, default=2, help="compiles per measurement (32 unrolled blocks: slow)"
  )
  args = p.parse_args(argv)
  if args.quick:
    args.depths, args.width, args.batch, args.steps = [2, 8], 32, 8, 3
    args.remat_depth, args.remat_width, args.remat_batch = 4, 64, 16
    args.eqx_depths, args.eqx_remat_depth, args.eqx_repeats = [2, 4], 4, 1
  print(
    f"jax {jax.__version__} on {jax.devices()[0].platform}; flax.nnx columns: "
    f"{'yes' if fnnx is not None else 'no (flax not importable)'}"
  )
  depth_table(args.depths[:1], args.width, args.batch, 2, args.unrolled_max)  # warm-up
  raw = depth_table(args.depths, args.width, args.batch, args.steps, args.unrolled_max)
  print_depth_table(raw)
  remat_tables(args.remat_depth, args.remat_width, args.remat_batch)
  out: dict[str, list[dict]] = {}
  out["compile_time"], out["step_time"] = depth_rows(raw)
  out["remat_memory"] = remat_rows(args.remat_depth, args.remat_width, args.remat_batch)
  eqx_sizes = dict(d=args.eqx_width, batch=4 if args.quick else 8, seq=8 if args.quick else 32)
  n, rounds = (2, 2) if args.quick else (5, 5)
  comp, step = _eqx_scan.depth_rows(
    args.eqx_depths, **eqx_sizes, n=n, rounds=rounds, repeats=args.eqx_repeats
  )
  out["eqx_compile_time"], out["eqx_step_time"] = comp, step
  print_table("Converted Equinox transformer: train step compile time (s)", comp)
  _eqx_scan.summary(comp)
  print_table("Converted Equinox transformer: train step time (ms)", step)
  mem = out["eqx_remat_memory"] = _eqx_scan.memory_rows(args.eqx_remat_depth, **eqx_sizes)
  print_table("Converted Equinox transformer: compiled temp memory of a train step (MiB)", mem)
  return out


if __name__ == "__main__":
  main()

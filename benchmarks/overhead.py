"""Per-call overhead of a jitted train step, and split/merge cost vs model size.

Side by side in one process (interleaved rounds, medians): nnx_eqx, hand-written
``jax.jit``, ``eqx.filter_jit`` and ``flax.nnx`` (when importable). Four tables:

* ``train_step``: one SGD step of a 4x64 MLP (batch 32), timed two ways:
  *pipelined* (back-to-back calls, only the last one blocked on: throughput,
  Python work overlaps the device) and *blocked* (``block_until_ready`` after
  every call: latency, where every microsecond of Python work shows).
* ``call_overhead``: blocked latency of the same step for MLPs of 4, 64 and 512
  ``Linear(16, 16)`` layers (8, 128 and 1024 Variables) — little compute, so
  the fixed and per-Variable Python cost of each framework shows. The baseline
  is a hand-written ``jax.jit`` over the ``nnx.split`` state of the same model
  and optimizer (a flat list of arrays in and out, ``nnx.merge`` inside), so it
  runs the same computation with the least possible dispatch work.
* ``split_merge``: ``nnx.merge(*nnx.split(m))`` of the 4x64 MLP and of modules
  holding 10 to 100,000 Variables, next to ``jax.tree`` flatten + unflatten of
  the split State (the same Variables and leaves; the baseline).
* ``ref_state``: blocked latency of a training-mode forward pass of a small
  ``Linear``/``BatchNorm`` stack under ``jax.jit``, ``eqx.filter_jit`` and
  ``nnx.jit``, with plain ``BatchStat`` Variables (under ``jax.jit`` and
  ``eqx.filter_jit`` the statistics are returned and applied with
  ``nnx.update``, as Equinox threads ``eqx.nn.State``) and with Ref-backed ones
  (``nnx.with_vars(model, ref=True, only=nnx.Not(nnx.Param))``: the transforms
  update them in place). The ``LostUpdateError`` message and the Equinox
  migration page point to this table for the extra cost of the Ref-backed calls.

    python benchmarks/overhead.py            # full run
    python benchmarks/overhead.py --quick    # fewer repeats, smaller sizes
    python benchmarks/overhead.py --only call_overhead

Prints tables of times and ratios (lower is better); ``main`` returns the rows.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import flax_nnx, interleaved, print_table  # noqa: E402

fnnx = flax_nnx()

WIDTH, DEPTH, BATCH, LR = 64, 4, 32, 1e-2
OVERHEAD_WIDTH = 16
"""Layer width of the ``call_overhead`` models (small: the step's compute stays
cheap, so the per-call cost of each framework is what is measured)."""

SPLIT_STATE = "jax.jit over split state"
TABLES = ("train_step", "call_overhead", "split_merge", "ref_state")


def _loss(y_pred, y):
  return jnp.mean((y_pred - y) ** 2)


# -- train steps --------------------------------------------------------------
class MLP(nnx.Module):
  def __init__(self, rngs, depth: int = DEPTH, width: int = WIDTH):
    self.layers = [nnx.Linear(width, width, rngs=rngs) for _ in range(depth)]

  def __call__(self, x):
    for layer in self.layers[:-1]:
      x = jax.nn.relu(layer(x))
    return self.layers[-1](x)


def _boxed(step: Callable, state: tuple, *args: Any) -> Callable[[], Any]:
  """A no-argument call of ``step(*state, *args) -> (*new_state, loss)`` that
  keeps the new state for the next call and returns the loss."""
  box = list(state)

  def run():
    *box[:], loss = step(*box, *args)
    return loss

  return run


def _plain_jax_step(tx, depth: int, width: int, x, y) -> Callable[[], Any]:
  """Hand-written ``jax.jit`` over a plain params pytree (a list of dicts)."""
  keys = jax.random.split(jax.random.key(0), depth)
  params = [
    {"w": jax.random.normal(k, (width, width)) / width**0.5, "b": jnp.zeros(width)} for k in keys
  ]

  def forward(params, x):
    for p in params[:-1]:
      x = jax.nn.relu(x @ p["w"] + p["b"])
    return x @ params[-1]["w"] + params[-1]["b"]

  @jax.jit
  def step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(lambda p: _loss(forward(p, x), y))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return _boxed(step, (params, tx.init(params)), x, y)


def _nnx_steps(tx, depth: int, width: int, x, y) -> dict[str, Callable[[], Any]]:
  """``nnx.jit`` with ``nnx.Optimizer``, and the same step written by hand as
  ``jax.jit`` over the split state (flat list of arrays, ``nnx.merge`` inside)."""
  model = MLP(nnx.Rngs(0), depth, width)
  opt = nnx.Optimizer(model, tx, wrt=nnx.Param)

  def train(model, opt, x, y):
    loss, grads = nnx.value_and_grad(lambda m: _loss(m(x), y))(model)
    opt.update(model, grads)
    return loss

  nnx_step = nnx.jit(train)

  model2 = MLP(nnx.Rngs(0), depth, width)
  opt2 = nnx.Optimizer(model2, tx, wrt=nnx.Param)
  graphdef, state = nnx.split((model2, opt2))
  leaves, treedef = jax.tree.flatten(state)

  @jax.jit
  def split_step(leaves, x, y):
    model, opt = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
    loss = train(model, opt, x, y)
    return jax.tree.leaves(nnx.state((model, opt))), loss

  return {
    SPLIT_STATE: _boxed(split_step, (leaves,), x, y),
    "nnx_eqx.jit": lambda: nnx_step(model, opt, x, y),
  }


def _eqx_step(tx, depth: int, width: int, x, y) -> Callable[[], Any]:
  emodel = [eqx.nn.Linear(width, width, key=k) for k in jax.random.split(jax.random.key(0), depth)]

  def forward(m, x):
    for layer in m[:-1]:
      x = jax.nn.relu(jax.vmap(layer)(x))
    return jax.vmap(m[-1])(x)

  @eqx.filter_jit
  def step(m, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(lambda m: _loss(forward(m, x), y))(m)
    updates, opt_state = tx.update(grads, opt_state, eqx.filter(m, eqx.is_array))
    return eqx.apply_updates(m, updates), opt_state, loss

  return _boxed(step, (emodel, tx.init(eqx.filter(emodel, eqx.is_array))), x, y)


def _flax_steps(tx, depth: int, width: int, x, y, best_path: bool):
  """``flax.nnx.jit`` (and flax's documented fast path, split + ``jax.jit``)."""
  if fnnx is None:
    return {}

  class FMLP(fnnx.Module):
    def __init__(self, rngs):
      self.layers = fnnx.List([fnnx.Linear(width, width, rngs=rngs) for _ in range(depth)])

    def __call__(self, x):
      for layer in self.layers[:-1]:
        x = jax.nn.relu(layer(x))
      return self.layers[-1](x)

  def train(model, opt, x, y):
    loss, grads = fnnx.value_and_grad(lambda m: _loss(m(x), y))(model)
    opt.update(model, grads)
    return loss

  fmodel = FMLP(fnnx.Rngs(0))
  fopt = fnnx.Optimizer(fmodel, tx, wrt=fnnx.Param)
  flax_step = fnnx.jit(train)
  steps = {"flax.nnx.jit": lambda: flax_step(fmodel, fopt, x, y)}
  if best_path:
    fgraphdef, fstate = fnnx.split((fmodel, fopt))

    @jax.jit
    def split_step(state, x, y):
      model, opt = fnnx.merge(fgraphdef, state)
      loss = train(model, opt, x, y)
      return fnnx.state((model, opt)), loss

    steps["flax.nnx split+jax.jit"] = _boxed(split_step, (fstate,), x, y)
  return steps


def make_steps(x, y, depth: int = DEPTH, width: int = WIDTH, best_path: bool = True):
  """The same SGD train step written with each framework: ``{impl: call}``."""
  tx = optax.sgd(LR)
  steps: dict[str, Callable[[], Any]] = {"jax.jit": _plain_jax_step(tx, depth, width, x, y)}
  steps.update(_nnx_steps(tx, depth, width, x, y))
  steps["eqx.filter_jit"] = _eqx_step(tx, depth, width, x, y)
  steps.update(_flax_steps(tx, depth, width, x, y, best_path))
  return steps


def _data(width: int):
  x = jax.random.normal(jax.random.key(1), (BATCH, width))
  y = jax.random.normal(jax.random.key(2), (BATCH, width))
  return x, y


def train_step_rows(n: int, rounds: int) -> list[dict]:
  """The 4x64 MLP step, pipelined and blocked; baseline: hand-written ``jax.jit``."""
  steps = make_steps(*_data(WIDTH))
  rows = []
  for mode, block in (("pipelined", False), ("blocked", True)):
    for k, t in interleaved(steps, n, rounds, block=block).items():
      rows.append({"case": f"train step, {mode}", "impl": k, "us": t * 1e6})
  return rows


def call_overhead_rows(depths: tuple, n: int, rounds: int) -> list[dict]:
  """Blocked latency vs number of Variables; baseline: ``jax.jit`` over split state."""
  rows = []
  x, y = _data(OVERHEAD_WIDTH)
  for depth in depths:
    steps = make_steps(x, y, depth, OVERHEAD_WIDTH, best_path=False)
    steps = {SPLIT_STATE: steps.pop(SPLIT_STATE), **steps}
    reps = max(5, n * DEPTH // depth)
    case = f"{2 * depth} Variables, blocked"
    for k, t in interleaved(steps, reps, rounds, block=True).items():
      rows.append({"case": case, "impl": k, "us": t * 1e6, "baseline": k == SPLIT_STATE})
  return rows


# -- split / merge ------------------------------------------------------------
class Wide(nnx.Module):
  def __init__(self, n):
    self.params = [nnx.Param(jnp.zeros(())) for _ in range(n)]


def _tree_roundtrip(tree) -> Callable[[], Any]:
  treedef = jax.tree.structure(tree)
  return lambda: jax.tree.unflatten(treedef, jax.tree.leaves(tree))


def split_merge_rows(sizes, n, rounds, flax_max: int = 10_000) -> list[dict]:
  """split + merge vs ``jax.tree`` flatten + unflatten of the split State."""
  rows = []
  mlp = MLP(nnx.Rngs(0))
  fns: dict[str, Callable[[], Any]] = {
    "jax.tree flatten+unflatten": _tree_roundtrip(nnx.state(mlp)),
    "nnx_eqx split+merge": lambda: nnx.merge(*nnx.split(mlp)),
  }
  emodel = [eqx.nn.Linear(WIDTH, WIDTH, key=k) for k in jax.random.split(jax.random.key(0), DEPTH)]
  fns["eqx partition+combine"] = lambda: eqx.combine(*eqx.partition(emodel, eqx.is_array))
  if fnnx is not None:
    fm = fnnx.List([fnnx.Linear(WIDTH, WIDTH, rngs=fnnx.Rngs(0)) for _ in range(DEPTH)])
    fns["flax.nnx split+merge"] = lambda: fnnx.merge(*fnnx.split(fm))
  for k, t in interleaved(fns, n, rounds).items():
    rows.append({"case": f"MLP {DEPTH}x{WIDTH}", "impl": k, "us": t * 1e6})
  for size in sizes:
    model = Wide(size)
    cases: dict[str, Callable[[], Any]] = {
      "jax.tree flatten+unflatten": _tree_roundtrip(nnx.state(model)),
      "nnx_eqx split+merge": lambda m=model: nnx.merge(*nnx.split(m)),
    }
    if fnnx is not None and size <= flax_max:

      class FWide(fnnx.Module):
        def __init__(self, n):
          self.params = fnnx.List([fnnx.Param(jnp.zeros(())) for _ in range(n)])

      fw = FWide(size)
      cases["flax.nnx split+merge"] = lambda m=fw: fnnx.merge(*fnnx.split(m))
    reps = max(3, n // max(1, size // 10))
    for k, t in interleaved(cases, reps, rounds, warmup=2).items():
      rows.append({"case": f"{size} Variables", "impl": k, "us": t * 1e6})
  return rows


# -- Ref-backed state ----------------------------------------------------------
REF_WIDTH, REF_BLOCKS = 16, 2


def _bn_stack(rngs) -> nnx.Sequential:
  layers = []
  for _ in range(REF_BLOCKS):
    layers += [nnx.Linear(REF_WIDTH, REF_WIDTH, rngs=rngs), nnx.BatchNorm(REF_WIDTH, rngs=rngs)]
  return nnx.Sequential(*layers)


def _carried(jit: Callable, model: Any, x: Any) -> Callable[[], Any]:
  """``jit`` over a forward pass that returns the statistics, applied after the call."""

  @jit
  def forward(m, x):
    return m(x), nnx.state(m, nnx.BatchStat)

  def run():
    y, stats = forward(model, x)
    nnx.update(model, stats)
    return y

  return run


def _in_place(jit: Callable, model: Any, x: Any) -> Callable[[], Any]:
  """``jit`` over a forward pass whose updates reach the model by themselves."""
  forward = jit(lambda m, x: m(x))
  return lambda: forward(model, x)


def ref_state_rows(n: int, rounds: int) -> list[dict]:
  """Plain vs Ref-backed ``BatchStat`` under each jit; baseline: ``jax.jit``, plain."""
  x = jax.random.normal(jax.random.key(1), (BATCH, REF_WIDTH))

  def refs():
    return nnx.with_vars(_bn_stack(nnx.Rngs(0)), ref=True, only=nnx.Not(nnx.Param))

  fns: dict[str, Callable[[], Any]] = {
    "jax.jit, plain (state returned)": _carried(jax.jit, _bn_stack(nnx.Rngs(0)), x),
    "jax.jit, Ref-backed": _in_place(jax.jit, refs(), x),
    "eqx.filter_jit, plain (state returned)": _carried(eqx.filter_jit, _bn_stack(nnx.Rngs(0)), x),
    "eqx.filter_jit, Ref-backed": _in_place(eqx.filter_jit, refs(), x),
    "nnx.jit, plain": _in_place(nnx.jit, _bn_stack(nnx.Rngs(0)), x),
    "nnx.jit, Ref-backed": _in_place(nnx.jit, refs(), x),
  }
  case = f"{REF_BLOCKS}x (Linear + BatchNorm({REF_WIDTH})), blocked"
  return [
    {"case": case, "impl": k, "us": t * 1e6, "baseline": k.startswith("jax.jit, plain")}
    for k, t in interleaved(fns, n, rounds, block=True).items()
  ]


def deep_nesting_ok(depth: int = 1000) -> bool:
  root = cur = nnx.Module()
  for _ in range(depth):
    cur.child = nnx.Module()
    cur = cur.child
  cur.w = nnx.Param(jnp.ones(1))
  return nnx.merge(*nnx.split(root)) is not None


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes (smoke test)")
  p.add_argument("--rounds", type=int, default=7)
  p.add_argument("--only", nargs="*", choices=TABLES, help="run only these tables")
  args = p.parse_args(argv)
  only = set(args.only or TABLES)
  n, rounds = (50, 3) if args.quick else (500, args.rounds)
  print(f"jax {jax.__version__}, devices {jax.devices()}, flax: {fnnx is not None}")
  out: dict[str, list[dict]] = {}
  if "train_step" in only:
    out["train_step"] = train_step_rows(n, rounds)
    print_table(f"Train step, {DEPTH}x{WIDTH} MLP, batch {BATCH}, SGD", out["train_step"])
  if "call_overhead" in only:
    depths = (4, 64) if args.quick else (4, 64, 512)
    out["call_overhead"] = call_overhead_rows(depths, n // 2, rounds)
    print_table(
      f"Blocked latency per call, MLP of Linear({OVERHEAD_WIDTH}, {OVERHEAD_WIDTH}) layers,"
      f" batch {BATCH}, SGD",
      out["call_overhead"],
    )
  if "split_merge" in only:
    sizes = (10, 100, 1000) if args.quick else (10, 100, 1000, 10_000, 100_000)
    out["split_merge"] = split_merge_rows(sizes, n, rounds)
    print_table("split + merge", out["split_merge"])
    print(f"\nnesting depth 1000 split/merge: {'ok' if deep_nesting_ok() else 'FAILED'}")
  if "ref_state" in only:
    out["ref_state"] = ref_state_rows(n, rounds)
    print_table(
      f"Ref-backed state: blocked latency of a training-mode forward pass, batch {BATCH}",
      out["ref_state"],
    )
  return out


if __name__ == "__main__":
  main(sys.argv[1:])

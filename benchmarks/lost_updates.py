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
* ``end_to_end``: the watch on against off (``nnx.set_lost_update_watch``) in
  this process, in interleaved rounds (each round times both settings, in
  alternating order), as the median of the per-round ratios with their quartiles:
  a training step of an MLP with two ``BatchNorm`` layers (optax Adam) under a
  plain ``jax.jit`` step that returns the module, and under an Equinox-style
  ``eqx.filter_jit`` step, next to the bare flatten of 100 ``BatchNorm`` layers
  (what ``jax.jit`` does with its arguments at every call). Each setting trains
  its own model with steps compiled under it, as a process that keeps one
  setting does: no model or compiled program passes from one setting to the other.
* ``before`` (only with ``--before DIR``, a checkout of the package from before
  the watch, e.g. ``git worktree add DIR <commit>``): the same measurements run
  in fresh processes over this tree and over ``DIR``, alternately, with the
  ratio of their medians: rebuilding and flattening a fresh model of 100
  ``Linear`` layers, of 100 ``BatchNorm`` layers (state Variables, which the
  watch links), flattening each model as it is held (what ``jax.jit`` does with
  its arguments at every call), and the Equinox-style step; this tree also with the watch
  turned off (``NNX_EQX_LOST_UPDATE_WATCH=0``, see ``nnx.set_lost_update_watch``).

    python benchmarks/lost_updates.py            # full run
    python benchmarks/lost_updates.py --quick    # fewer repeats
    python benchmarks/lost_updates.py --before /path/to/older/checkout

    python benchmarks/lost_updates.py --only end_to_end --rounds 25

``main`` returns ``{"watch": rows, "eqx_step": rows, "end_to_end": rows}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nnx_eqx as nnx

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
  from nnx_eqx.graph.tracing import _lost_updates  # (not in a tree from before the watch)

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
  from nnx_eqx.graph.tracing import _lost_updates

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


class BnStack(nnx.Module):
  def __init__(self, n: int, rngs: nnx.Rngs):
    self.layers = nnx.List([nnx.BatchNorm(4, rngs=rngs) for _ in range(n)])


def _measure_once(n: int) -> dict[str, float]:
  """Microseconds of each ``before`` case in this process: the best of 5 rounds
  for the rebuilds, the median of 9 rounds for the step (each call blocked on)."""
  out = {}
  for name, model in (
    (f"rebuild + flatten, {LAYERS} Linear", Stack(LAYERS, nnx.Rngs(0))),
    (f"rebuild + flatten, {LAYERS} BatchNorm", BnStack(LAYERS, nnx.Rngs(0))),
  ):
    leaves, tree = jax.tree.flatten(model)
    fn = lambda tree=tree, leaves=leaves: jax.tree.flatten(jax.tree.unflatten(tree, leaves))  # noqa: E731
    out[name] = min(_time(fn, n) for _ in range(5))
    held = lambda model=model: jax.tree.flatten(model)  # noqa: E731
    out[name.replace("rebuild + flatten", "flatten (as jax.jit does)")] = min(
      _time(held, n) for _ in range(5)
    )
  for batched in (True, False):
    _, m, forward = models("from_eqx", DEPTH, batched)
    run = step_fns(m, forward, batched)
    case = f"Equinox-style step, depth {DEPTH}, {'batched' if batched else 'per example'}"
    out[case] = statistics.median(_time(run, max(n // 2, 20), block=True) for _ in range(9))
  return out


class BnMlp(nnx.Module):
  """Linear -> BatchNorm -> relu, twice, then a Linear head."""

  def __init__(self, rngs: nnx.Rngs):
    self.l1 = nnx.Linear(16, 64, rngs=rngs)
    self.bn1 = nnx.BatchNorm(64, rngs=rngs)
    self.l2 = nnx.Linear(64, 64, rngs=rngs)
    self.bn2 = nnx.BatchNorm(64, rngs=rngs)
    self.head = nnx.Linear(64, 4, rngs=rngs)

  def __call__(self, x):
    x = jax.nn.relu(self.bn1(self.l1(x)))
    return self.head(jax.nn.relu(self.bn2(self.l2(x))))


def _training_steps(steps: int) -> dict[str, object]:
  """``name -> run`` of ``steps`` training steps of a ``BnMlp`` (optax Adam),
  each run carrying its model and optimizer state on (the statistics move)."""
  x = jax.random.normal(jax.random.key(0), (32, 16))
  y = jax.random.normal(jax.random.key(1), (32, 4))
  tx = optax.adam(1e-3)

  @jax.jit
  def jax_step(model, opt_state):  # plain jax.jit: the module goes out again
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(params):
      m = nnx.merge(graphdef, params, rest)
      return jnp.mean((m(x) - y) ** 2), nnx.state(m, nnx.Not(nnx.Param))

    (_, rest), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return nnx.merge(graphdef, optax.apply_updates(params, updates), rest), opt_state

  @eqx.filter_jit
  def eqx_step(model, opt_state):  # Equinox's style: the state carried out as aux
    def loss(m):
      return jnp.mean((m(x) - y) ** 2), nnx.state(m, nnx.Not(nnx.Param))

    (_, state), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model)
    updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    model = eqx.apply_updates(model, updates)
    nnx.update(model, state)
    return model, opt_state

  def runner(step, params_of):
    model = BnMlp(nnx.Rngs(0))
    carry = [model, tx.init(params_of(model))]

    def run():
      m, o = carry
      for _ in range(steps):
        m, o = step(m, o)
      carry[:] = [m, o]
      return m.bn2.mean[...]

    return run

  return {
    "training step, BnMlp, jax.jit returning the module": runner(
      jax_step, lambda m: nnx.state(m, nnx.Param)
    ),
    "training step, BnMlp, eqx.filter_jit (Equinox style)": runner(
      eqx_step, lambda m: eqx.filter(m, eqx.is_inexact_array)
    ),
  }


BLOCKS = 3  # blocks of steps per setting and round: a round keeps each setting's best


def end_to_end_rows(steps: int, rounds: int) -> list[dict]:
  """The watch on against off, interleaved: per round, each case runs ``BLOCKS``
  blocks of ``steps`` calls with the watch on and as many off, alternating (the
  order flips between rounds), and keeps each setting's best block; the ratio of
  a round is on / off, and the row gives the median over rounds with the
  quartiles. Times are CPU seconds of this process (all its threads, XLA's
  included), which the other work of a shared machine does not inflate."""
  bn = BnStack(LAYERS, nnx.Rngs(0))

  def flatten():
    for _ in range(steps):
      jax.tree.flatten(bn)

  # each setting runs steps compiled under it: a process with the watch off
  # never holds a VariableRef in a compiled program's cache, so its calls
  # compare plain metadata only
  runs: dict[bool, dict[str, object]] = {}
  previous = nnx.set_lost_update_watch(True)
  try:
    for on in (True, False):  # compile and warm up under each setting
      nnx.set_lost_update_watch(on)
      runs[on] = {f"flatten (as jax.jit does), {LAYERS} BatchNorm": flatten}
      runs[on].update(_training_steps(steps))
      for fn in runs[on].values():
        for _ in range(3):
          jax.block_until_ready(fn())
    seconds: dict[str, dict[bool, list]] = {k: {True: [], False: []} for k in runs[True]}
    for r in range(rounds):
      for k in seconds:
        best = {True: float("inf"), False: float("inf")}
        for on in ((True, False) if r % 2 == 0 else (False, True)) * BLOCKS:
          nnx.set_lost_update_watch(on)
          fn = runs[on][k]
          gc.collect()
          t0 = time.process_time()
          jax.block_until_ready(fn())
          best[on] = min(best[on], (time.process_time() - t0) / steps)
        for on, sec in best.items():  # (a shared machine only ever adds time)
          seconds[k][on].append(sec)
  finally:
    nnx.set_lost_update_watch(previous)
  rows = []
  for k, by in seconds.items():
    ratios = np.array(by[True]) / np.array(by[False])
    q1, med, q3 = (float(q) for q in np.percentile(ratios, [25, 50, 75]))
    times = {
      "off CPU us": statistics.median(by[False]) * 1e6,
      "on CPU us": statistics.median(by[True]) * 1e6,
      "quartiles": f"{q1:.3f}-{q3:.3f}x",
      "rounds": rounds,
    }
    rows.append({"case": k, "impl": "watch off", "x": 1.0, "baseline": True, **times})
    rows.append({"case": k, "impl": "watch on (median of per-round ratios)", "x": med, **times})
  return rows


def _print_end_to_end(rows: list[dict]) -> None:
  print("\nThe watch on against off, interleaved (CPU time; median of per-round ratios)")
  print("| case | watch off | watch on | on / off | quartiles | rounds |")
  print("|---|---:|---:|---:|---:|---:|")
  for r in rows:
    if not r.get("baseline"):
      print(
        f"| {r['case']} | {r['off CPU us']:.1f} us | {r['on CPU us']:.1f} us | {r['x']:.3f}x"
        f" | {r['quartiles']} | {r['rounds']} |"
      )


def _time(fn, n: int, block: bool = False) -> float:
  for _ in range(3):
    jax.block_until_ready(fn())
  gc.collect()
  t0 = time.perf_counter()
  for _ in range(n):
    r = fn()
    if block:
      jax.block_until_ready(r)
  return (time.perf_counter() - t0) / n * 1e6


def before_rows(before: str, n: int, rounds: int) -> list[dict]:
  here = str(pathlib.Path(__file__).resolve().parents[1])
  runs = (
    ("this tree", here, "1"),
    ("this tree, watch off", here, "0"),
    ("before the watch", before, "1"),
  )
  samples: dict[str, dict[str, list]] = {label: {} for label, _, _ in runs}
  for _ in range(rounds):
    for label, root, watch in runs:
      env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([root, str(pathlib.Path(__file__).parent)]),
        "NNX_EQX_LOST_UPDATE_WATCH": watch,  # (a tree from before the watch ignores it)
      }
      cmd = [sys.executable, __file__, "--measure-once", str(n)]
      res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=root)
      for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items():
        samples[label].setdefault(k, []).append(v)
  rows = []
  for case in samples["this tree"]:
    for label in ("before the watch", "this tree", "this tree, watch off"):
      us = statistics.median(samples[label][case])
      rows.append({"case": case, "impl": label, "us": us, "baseline": label == "before the watch"})
  return rows


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats")
  p.add_argument("--only", choices=("watch", "eqx_step", "end_to_end"), help="one table")
  p.add_argument("--rounds", type=int, help="interleaved rounds of the end_to_end table")
  p.add_argument("--before", help="a checkout of the package before the watch: compare with it")
  p.add_argument("--measure-once", type=int, help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.measure_once:
    import nnx_eqx  # (the tree PYTHONPATH names)

    assert pathlib.Path(nnx_eqx.__file__).resolve().parents[1] == pathlib.Path.cwd().resolve()
    print(json.dumps(_measure_once(args.measure_once)))
    return {}
  n, rounds = (20, 5) if args.quick else (100, 9)
  out: dict[str, list[dict]] = {}
  if args.before:
    out["before"] = before_rows(args.before, n, max(rounds // 2, 3))
    print_table("This tree against the tree before the watch (fresh processes)", out["before"])
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
  if args.only in (None, "end_to_end"):
    e2e_rounds = args.rounds or (20 if args.quick else 30)
    out["end_to_end"] = end_to_end_rows(max(n // 5, 10), e2e_rounds)
    _print_end_to_end(out["end_to_end"])
  return out


if __name__ == "__main__":
  main()

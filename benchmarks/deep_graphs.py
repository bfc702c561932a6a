"""Graph work vs depth: split, merge, state, update, clone, GraphDef hashing and
``nnx.jit`` calls on deep graphs.

Two shapes at depth 100 / 1,000 / 10,000, under Python's default recursion
limit: a chain of Modules (``m.next.next...``, a Param every 100 levels) and a
Module holding lists/dicts nested that deep. Each case reports every graph
operation (median of a few runs; the first ``nnx.jit`` call, which walks,
traces and compiles, once), with ``jax.tree`` flatten + unflatten of the same
State as the baseline; then ``nnx.to_eqx`` and ``nnx.from_eqx`` of the model and an
orbax checkpoint save + restore into a fresh model (once; a State this deep is
stored flat).

Then the curve: per operation, its time at each depth and the *per-level
ratio* ``(t(10k) / 10k) / (t(1k) / 1k)``: about 1 when time is linear in depth,
about 10 when quadratic. What is linear in what: every operation costs O(1)
per node plus O(len(path)) per leaf whose path it names (a State's keys are
full paths), so the chain's Param every 100 levels keeps the keys' total
length (depth**2 / 200) small beside the nodes; a Param at every level would
make any State of the chain quadratic in depth by definition.

    python benchmarks/deep_graphs.py            # depths 100, 1000, 10000
    python benchmarks/deep_graphs.py --quick    # depths 100, 1000
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import nnx_eqx as nnx
from nnx_eqx.graph import _version

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import print_table  # noqa: E402


class Link(nnx.Module):
  pass


def chain(depth: int) -> Link:
  root = cur = Link()
  for i in range(depth):
    if i % 100 == 0:
      cur.w = nnx.Param(jnp.ones(()))
    cur.next = cur = Link()
  cur.w = nnx.Param(jnp.ones(()))
  return root


def nested(depth: int) -> Link:
  x: Any = [nnx.Param(jnp.ones(2))]
  for i in range(depth):
    x = [x] if i % 2 else {"a": x}
  m = Link()
  m.deep = x
  return m


def _median(fn: Callable[[], Any], runs: int) -> float:
  times = []
  for _ in range(runs):
    t = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t)
  return statistics.median(times)


def _total(m):
  return sum(jnp.sum(v.value) for v in nnx.state(m, nnx.Param).flat_state().leaves)


def _fresh(g: Any) -> Any:
  """A copy of GraphDef ``g`` without its cached hash."""
  return type(g)(g.defn, g.paths, g.n_nodes, depth=g.depth)


def _graph_ops(make: Callable[[int], Link], depth: int) -> dict[str, tuple[Callable, int]]:
  """The graph operations timed on ``make(depth)``: ``name -> (fn, runs)`` (runs 1:
  the operation itself is a first call)."""
  m = make(depth)
  graphdef, state = nnx.split(m)
  flat = state.flat_state()
  twin = nnx.graphdef(make(depth))
  cached = nnx.jit(_total)
  jax.block_until_ready(cached(m))

  def flat_round_trip():  # the baseline: the same Variables through a flat pytree
    leaves, treedef = jax.tree.flatten(list(flat.leaves))
    jax.tree.unflatten(treedef, leaves)

  def split_uncached():
    _version.bump()  # as after a structural change: the walk of ``m`` starts afresh
    nnx.split(m)

  def first_jit_call():
    jax.block_until_ready(nnx.jit(_total)(m))

  eqx_model = nnx.to_eqx(m)
  target = make(depth)

  def checkpoint():
    with tempfile.TemporaryDirectory() as tmp:
      path = nnx.checkpoint.save(pathlib.Path(tmp) / "ckpt", m)
      nnx.checkpoint.restore(path, target)

  return {
    "jax.tree flatten+unflatten": (flat_round_trip, 0),
    "nnx_eqx split+merge": (lambda: nnx.merge(*nnx.split(m)), 0),
    "split (uncached walk)": (split_uncached, 0),
    "merge": (lambda: nnx.merge(graphdef, state), 0),
    "state": (lambda: nnx.state(m), 0),
    "update": (lambda: nnx.update(m, state), 0),
    "graphdef": (lambda: nnx.graphdef(m), 0),
    "clone": (lambda: nnx.clone(m), 0),
    "GraphDef hash + ==": (lambda: _fresh(twin) == _fresh(graphdef), 0),
    "nnx.jit first call": (first_jit_call, 1),
    "nnx.jit cached call": (lambda: jax.block_until_ready(cached(m)), 0),
    "nnx.to_eqx": (lambda: nnx.to_eqx(m), 0),
    "nnx.from_eqx": (lambda: nnx.from_eqx(eqx_model), 0),
    "checkpoint save+restore": (checkpoint, 1),
  }


def _case(make: Callable[[int], Link], depth: int, runs: int) -> list[dict]:
  case = f"{make.__name__} {depth}"
  return [
    {"case": case, "impl": name, "us": 1e6 * _median(fn, n or runs)}
    for name, (fn, n) in _graph_ops(make, depth).items()
  ]


def per_level_ratio(t_small: float, small: int, t_large: float, large: int) -> float:
  """``(t_large / large) / (t_small / small)``: 1 for time linear in depth."""
  return (t_large / large) / (t_small / small)


def print_curve(rows: list[dict], depths: tuple[int, ...]) -> None:
  """Per shape and operation: its time at each depth and the per-level ratio
  between the two largest depths."""
  print(f"\nCurve (ms; per-level ratio {depths[-2]:,} -> {depths[-1]:,}: ~1 linear, ~10 quadratic)")
  at = {
    (r["case"].rsplit(" ", 1)[0], r["impl"], int(r["case"].rsplit(" ", 1)[1])): r["us"]
    for r in rows
  }
  for shape, impl in dict.fromkeys((k[0], k[1]) for k in at):
    if any((shape, impl, d) not in at for d in depths):
      continue
    ts = [at[shape, impl, d] for d in depths]
    cols = " ".join(f"{t / 1e3:10.2f}" for t in ts)
    ratio = per_level_ratio(ts[-2], depths[-2], ts[-1], depths[-1])
    print(f"  {shape:>7} | {impl:<30} {cols}   {ratio:6.2f}")


def main(argv: list[str] | None = None) -> list[dict]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="depths 100 and 1000 only, fewer runs")
  args = p.parse_args(argv)
  depths = (100, 1_000) if args.quick else (100, 1_000, 10_000)
  runs = 3 if args.quick else 5
  rows: list[dict] = []
  for make in (chain, nested):
    for depth in depths:
      rows += _case(make, depth, runs)
  print_table(f"Deep graphs (recursion limit {sys.getrecursionlimit()})", rows)
  print_curve(rows, depths)
  return rows


if __name__ == "__main__":
  main()

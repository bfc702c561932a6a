"""Graph work vs depth: split + merge, ``nnx.jit``'s first call, the Equinox bridge
and checkpoints on deep graphs.

Two shapes at depth 100 / 1,000 / 10,000, under Python's default recursion
limit: a chain of Modules (``m.next.next...``, a Param every 100 levels) and a
Module holding lists/dicts nested that deep. Each case reports split + merge
(median of a few runs) and the first call of an ``nnx.jit`` function (walk,
trace, compile), with ``jax.tree`` flatten + unflatten of the same State as
the baseline of split + merge; then ``nnx.to_eqx`` and ``nnx.from_eqx`` of the
model (median of a few runs) and an orbax checkpoint save + restore into a
fresh model (one run; a State this deep is stored flat). Time should grow
linearly with depth (the paths of leaves are tuples, so a leaf ``d`` levels
deep costs O(d) to name).

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


def _case(make: Callable[[int], Link], depth: int, runs: int) -> list[dict]:
  m = make(depth)
  case = f"{make.__name__} {depth}"
  graphdef, state = nnx.split(m)
  flat = state.flat_state()

  def split_merge():
    nnx.merge(*nnx.split(m))

  def flat_round_trip():  # the baseline: the same Variables through a flat pytree
    leaves, treedef = jax.tree.flatten(list(flat.leaves))
    jax.tree.unflatten(treedef, leaves)

  def first_jit_call():
    @nnx.jit
    def f(m):
      return sum(jnp.sum(v.value) for v in nnx.state(m, nnx.Param).flat_state().leaves)

    jax.block_until_ready(f(m))

  eqx_model = nnx.to_eqx(m)

  def checkpoint():
    with tempfile.TemporaryDirectory() as tmp:
      path = nnx.checkpoint.save(pathlib.Path(tmp) / "ckpt", m)
      nnx.checkpoint.restore(path, target)

  target = make(depth)
  rows = [
    {
      "case": case,
      "impl": "jax.tree flatten+unflatten",
      "us": 1e6 * _median(flat_round_trip, runs),
    },
    {"case": case, "impl": "nnx_eqx split+merge", "us": 1e6 * _median(split_merge, runs)},
    {"case": case, "impl": "nnx.jit first call", "us": 1e6 * _median(first_jit_call, 1)},
    {"case": case, "impl": "nnx.to_eqx", "us": 1e6 * _median(lambda: nnx.to_eqx(m), runs)},
    {
      "case": case,
      "impl": "nnx.from_eqx",
      "us": 1e6 * _median(lambda: nnx.from_eqx(eqx_model), runs),
    },
    {"case": case, "impl": "checkpoint save+restore", "us": 1e6 * _median(checkpoint, 1)},
  ]
  return rows


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
  return rows


if __name__ == "__main__":
  main()

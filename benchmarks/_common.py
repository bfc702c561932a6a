"""Shared helpers for the benchmark scripts: side-by-side timing, compile time,
compiled memory, the machine description, and the row format of the suite.

Every benchmark script exposes ``main(argv) -> rows`` where ``rows`` is either
a list of dicts or a ``{table_name: list_of_dicts}`` mapping. A row is
``{"case": str, "impl": str, <metric>: float, ...}``; the metric's key is its
unit (``"us"``, ``"ms"``, ``"s"``, ``"MiB"``, ``"bytes"``, ``"x"``). Within a
case, ratios are taken against the row with ``"baseline": True``, else the
first implementation whose name starts with ``jax``/``lax``/``hand``, else the
first row. ``run_all.py`` collects every script's rows into one report.
"""

from __future__ import annotations

import gc
import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax

METRICS = ("us", "ms", "s", "MiB", "KiB", "bytes", "x")
"""Recognised metric keys (units), in order of preference."""

IMPLS = ("nnx_eqx", "jax", "equinox", "flax.nnx")


def flax_nnx() -> Any:
  """``flax.nnx`` when flax is installed (the ``bench`` extra), else None."""
  try:
    from flax import nnx
  except ImportError:
    return None
  return nnx


def cpu_model() -> str:
  """The CPU model name (from /proc/cpuinfo on Linux)."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.lower().startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
  """What the numbers were measured on: CPU, cores, accelerator, Python and library versions."""
  import equinox

  info = {
    "cpu": cpu_model(),
    "cores": str(os.cpu_count()),
    "platform": platform.platform(),
    "python": platform.python_version(),
    "jax": jax.__version__,
    "backend": f"{jax.default_backend()} x{jax.device_count()}",
    "device": jax.devices()[0].device_kind,  # e.g. "NVIDIA H100 80GB HBM3" on a GPU
    "equinox": equinox.__version__,
    "load": "n/a",
  }
  if hasattr(os, "getloadavg"):  # other work on the machine skews absolute times
    info["load"] = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
  fnnx = flax_nnx()
  if fnnx is not None:
    import flax

    info["flax"] = flax.__version__
  else:
    info["flax"] = "not installed (flax.nnx columns omitted)"
  return info


def _time_per_call(fn: Callable[[], Any], n: int) -> float:
  t0 = time.perf_counter()
  out = None
  for _ in range(n):
    out = fn()
  jax.block_until_ready(out)
  return (time.perf_counter() - t0) / n


def _blocked_samples(fn: Callable[[], Any], n: int, out: list) -> None:
  """Appends the seconds of ``n`` calls of ``fn``, each blocked on and timed alone."""
  clock, block = time.perf_counter, jax.block_until_ready
  for _ in range(n):
    t0 = clock()
    block(fn())
    out.append(clock() - t0)


def interleaved(
  fns: dict[str, Callable[[], Any]], n: int, rounds: int, warmup: int = 10, block: bool = False
) -> dict[str, float]:
  """Median seconds per call of each function, timed side by side.

  Each round runs ``n`` back-to-back calls of every function in turn, so slow
  drifts of the machine hit every implementation alike. Python's garbage
  collector runs (``gc.collect()``) before each function's share of a round:
  the collections its own allocations trigger are timed with it, but none
  that another function's garbage made due. *Pipelined* (default:
  throughput; Python work overlaps the computation): only the last result of a
  round is blocked on, and the median of the rounds' means is returned.
  *Blocked* (``block=True``: per-call latency, as in a training loop that
  reads every loss): every call is blocked on and timed alone, and the median
  over all ``n * rounds`` calls is returned, which discards the calls that the
  machine's other work preempted.
  """
  for fn in fns.values():
    out = None
    for _ in range(warmup):
      out = fn()
    jax.block_until_ready(out)
  samples: dict[str, list[float]] = {k: [] for k in fns}
  for _ in range(rounds):
    for k, fn in fns.items():
      gc.collect()
      if block:
        _blocked_samples(fn, n, samples[k])
      else:
        samples[k].append(_time_per_call(fn, n))
  return {k: statistics.median(v) for k, v in samples.items()}


def compile_seconds(make: Callable[[], Any], *args: Any, repeats: int = 1) -> float:
  """Median seconds to lower and compile ``make()`` (a fresh jitted function
  per repeat, so no cache is hit) on ``args``."""
  times = []
  for _ in range(repeats):
    fn = make()
    t0 = time.perf_counter()
    fn.lower(*args).compile()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def temp_bytes(jitted: Any, *args: Any) -> int:
  """Temporary (scratch) bytes of the compiled program, from XLA's memory analysis."""
  analysis = jitted.lower(*args).compile().memory_analysis()
  return int(analysis.temp_size_in_bytes)


_DUNDER = re.compile(r"(?<![\w`])(__\w+__)(?![\w`])")


def table_cell(text: object) -> str:
  """``text`` as the cell of a Markdown table, shown as written.

  A dunder name (``__setattr__``) goes in backticks, which Markdown would otherwise
  render as bold ("setattr"), and a ``|`` is escaped so it does not end the cell.

  >>> print(table_cell("+ Variables with a __setattr__ of their own | x"))
  + Variables with a `__setattr__` of their own \\| x
  """
  return _DUNDER.sub(r"`\1`", str(text)).replace("|", "\\|")


def metric_of(row: dict) -> tuple[str, float]:
  """``(unit, value)`` of a row's metric.

  Raises:
    KeyError: the row has none of :data:`METRICS`.
  """
  for k in METRICS:
    if k in row and isinstance(row[k], (int, float)):
      return k, float(row[k])
  raise KeyError(f"row {row} has no metric; expected one of {METRICS}")


def baseline_of(rows: list[dict]) -> dict:
  """The row the others in one case are compared with (see the module doc)."""
  for r in rows:
    if r.get("baseline"):
      return r
  for r in rows:
    if str(r["impl"]).lower().startswith(("jax", "lax", "hand")):
      return r
  return rows[0]


def with_ratios(rows: list[dict]) -> list[dict]:
  """Copies of ``rows`` with ``ratio`` (value / baseline value in the same
  case) and ``vs`` (the baseline's impl) added."""
  by_case: dict[str, list[dict]] = {}
  for r in rows:
    by_case.setdefault(str(r["case"]), []).append(r)
  out = []
  for case_rows in by_case.values():
    base = baseline_of(case_rows)
    _, b = metric_of(base)
    for r in case_rows:
      _, v = metric_of(r)
      out.append({**r, "ratio": v / b if b else float("nan"), "vs": base["impl"]})
  return out


def print_table(title: str, rows: list[dict]) -> None:
  """Prints rows grouped by case, with each ratio against the case's baseline."""
  print(f"\n{title}")
  for r in with_ratios(rows):
    unit, v = metric_of(r)
    print(
      f"  {r['case']:>22} | {r['impl']:<30} {v:12.2f} {unit:<5} {r['ratio']:7.2f}x vs {r['vs']}"
    )

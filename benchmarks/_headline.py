"""The headline table of the performance page, rendered from one ``results.json``.

The ``benchmark-headline`` section of ``docs/guides/performance.md`` is
:func:`render` of ``benchmarks/results/results.json`` (written by ``run_all.py``),
and its ``benchmark-watch`` section :func:`render_watch` of the same report,
written into the page by ``python docs/_hooks/regenerate.py`` (generator in
``docs/_hooks/mkdocs_hooks.py``), so every figure on the page comes from one run,
printed with its machine, load and date. A
report that carries tables over from an earlier run (``run_all.py --only ...
--keep``) mixes runs and is refused.
"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
  sys.path.insert(0, str(HERE))

import _common  # noqa: E402

HEADLINE = (
  ("overhead/train_step", "jit train step, MLP (`overhead.py`)", ""),
  ("overhead/call_overhead", "blocked call latency (`overhead.py`)", r"^1024 Variables"),
  ("overhead/split_merge", "split + merge (`overhead.py`)", r"^(MLP 4x64|10000 Variables)$"),
  (
    "pytree",
    "`jax.tree` flatten / unflatten of a Module (`pytree.py`)",
    r"^(flatten|unflatten), 1000 Variables \(native\)$",
  ),
  ("scan_depth/compile_time", "scan compile time (`scan_depth.py`)", r"^64 layers$"),
  ("scan_depth/remat_memory", "remat in scan, compiled temp memory (`scan_depth.py`)", ""),
  ("bridge/filter_jit", "`eqx.filter_jit` call (`bridge.py`)", ""),
  ("bridge/conversion", "Equinox conversion (`bridge.py`)", r"^1000 Variables \(user Module\)$"),
  (
    "bridge/eqx_training",
    "Equinox-style train step (`bridge.py`)",
    r"^train step, (from|to)_eqx, batched, depth 32$",
  ),
)
"""``(table of results.json, title, pattern)`` of each headline group, in page
order: the cases whose name the pattern finds (``re.search``) are shown, a few per
table; the full report below the headline has every case."""


def row_name(title: str, case: object) -> str:
  """The first cell of a headline row: the group's title, then the case."""
  return f"{title}: {_common.table_cell(case)}"


def in_headline(pattern: str, case: str) -> bool:
  """Whether the headline shows ``case`` of a table whose pattern is ``pattern``."""
  return re.search(pattern, case) is not None


COLUMNS = ("nnx_eqx", "equinox", "flax.nnx", "other")


class MixedRunsError(ValueError):
  """The report holds tables measured in more than one run."""


def column_of(impl: str) -> str:
  """The headline column of an implementation's name.

  >>> [column_of(s) for s in ("nnx.scan", "eqx.filter_jit", "flax.nnx.jit", "unrolled loop")]
  ['nnx_eqx', 'equinox', 'flax.nnx', 'other']
  """
  low = impl.lower()
  if "flax" in low:
    return "flax.nnx"
  if low.startswith(("nnx", "from_eqx", "to_eqx")):
    return "nnx_eqx"
  if low.startswith(("eqx", "equinox")):
    return "equinox"
  return "other"


def _value(r: dict) -> str:
  unit, v = _common.metric_of(r)
  for small, big in (("us", "ms"), ("ms", "s")):
    if unit == small and v >= 1000:
      unit, v = big, v / 1000
  unit = {"us": "µs"}.get(unit, unit)
  return f"{v:.3g} {unit}" if v < 1000 else f"{v:,.0f} {unit}"


def _cell(rows: list[dict], named: bool) -> str:
  if not rows:
    return "–"
  if len(rows) == 1 and not named:
    return f"{rows[0]['ratio']:.2f}×"
  return "<br>".join(f"{r['ratio']:.2f}× {_common.table_cell(r['impl'])}" for r in rows)


def machine_line(report: dict) -> str:
  """One sentence naming the run: mode, date, machine, versions and load."""
  m = report["machine"]
  mode = "quick run (`--quick`: fewer repeats, smaller sizes; indicative only)"
  mode = mode if report["quick"] else "full run"
  return (
    f"One {mode} of `python benchmarks/run_all.py` on {report['date']}:"
    f" {m['cpu']}, {m['cores']} cores, {m['backend']} ({m.get('device', 'n/a')});"
    f" Python {m['python']}, jax {m['jax']}, equinox {m['equinox']}, flax {m['flax']};"
    f" load average at start {m.get('load', 'n/a')}."
  )


def render(report: dict[str, Any]) -> str:
  """The headline table (markdown) of one ``run_all.py`` report.

  Each row is one case of a table: the ratio of every implementation to the
  case's baseline, by column (several implementations in a column are listed
  with their names), and the baseline with its measured value.

  Raises:
    MixedRunsError: the report kept tables from an earlier run.
  """
  _check_one_run(report)
  lines = [
    machine_line(report),
    "",
    "| measurement: case | nnx_eqx | equinox | flax.nnx | other | baseline (1.00×) |",
    "|---|---:|---:|---:|---:|---|",
  ]
  absent = []
  for table, title, only in HEADLINE:
    if table not in report["tables"]:
      absent.append(f"`{table}`")
      continue
    rows = _common.with_ratios(report["tables"][table])
    for case in dict.fromkeys(str(r["case"]) for r in rows if in_headline(only, str(r["case"]))):
      in_case = [r for r in rows if r["case"] == case]
      base = _common.baseline_of(in_case)
      others = [r for r in in_case if r is not base]
      cells = [
        _cell([r for r in others if column_of(str(r["impl"])) == c], c == "other") for c in COLUMNS
      ]
      lines.append(
        f"| {row_name(title, case)} | {' | '.join(cells)}"
        f" | {_common.table_cell(base['impl'])} ({_value(base)}) |"
      )
  if absent:
    lines += ["", f"Not in this run: {', '.join(absent)}."]
  if report.get("errors"):
    lines += ["", f"Scripts that failed in this run: {', '.join(report['errors'])}."]
  return "\n".join(lines)


WATCH = "lost_updates/end_to_end"
"""The table of ``results.json`` that :func:`render_watch` shows."""


def _check_one_run(report: dict[str, Any]) -> None:
  if report.get("kept"):
    raise MixedRunsError(
      "benchmarks/results/results.json mixes runs (tables kept with --keep: "
      f"{', '.join(report['kept'])}); run `python benchmarks/run_all.py` without --keep"
    )


def render_watch(report: dict[str, Any]) -> str:
  """The dropped-update watch on against off (the :data:`WATCH` table of one
  ``run_all.py`` report, ``benchmarks/lost_updates.py``): per case, the CPU time
  per call with the watch off and on (medians over the interleaved rounds), the
  median of the per-round ratios on / off, and their quartiles.

  Raises:
    MixedRunsError: the report kept tables from an earlier run.
    KeyError: the report has no :data:`WATCH` table (``lost_updates.py`` did not run).
  """
  _check_one_run(report)
  if WATCH not in report["tables"]:
    raise KeyError(f"results.json has no {WATCH} table; run `python benchmarks/run_all.py`")
  lines = [
    machine_line(report),
    "",
    "| case | watch off | watch on | on / off | quartiles of on / off | rounds |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for r in report["tables"][WATCH]:
    if r.get("baseline"):
      continue
    q1, q3 = (float(q) for q in str(r["quartiles"]).rstrip("x").split("-"))
    lines.append(
      f"| {_common.table_cell(r['case'])} | {r['off CPU us']:.1f} µs | {r['on CPU us']:.1f} µs"
      f" | {r['x']:.3f}× | {q1:.3f}–{q3:.3f}× | {r['rounds']} |"
    )
  return "\n".join(lines)

"""Runs every benchmark script and writes one report: a markdown table and PNG plots.

    python benchmarks/run_all.py            # full run (a few minutes on 2 cores)
    python benchmarks/run_all.py --quick    # smoke test: fewer repeats, smaller sizes
    python benchmarks/run_all.py --plot-only  # redraw RESULTS.md and plots from results.json
    python benchmarks/run_all.py --only overhead --keep  # re-run one script, keep the rest

Each script ``benchmarks/<name>.py`` exposes ``main(argv)`` returning rows (see
``_common.py`` for the row format); every number in a row was measured side by
side with the others of its case in this one process, so ratios compare like
with like. Outputs go to ``benchmarks/results/``: ``RESULTS.md`` (with the
machine it ran on, its load and date), ``results.json``, and one
``<script>_<table>.png`` per table. Each run replaces the whole report: tables of
scripts not run are dropped, unless ``--keep`` is given, which mixes runs (the
report lists each kept table with the date it was measured, and the performance
page refuses to render a mixed report).
Install the ``bench`` extra (flax, matplotlib) for the flax.nnx columns.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import pathlib
import re
import sys
import time
import traceback
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
  sys.path.insert(0, str(HERE))

import _common  # noqa: E402

SCRIPTS = ("overhead", "scan_depth", "bridge", "flax_interop", "lost_updates")
"""Scripts run first, in this order; any other ``benchmarks/*.py`` with a
``main`` (not starting with ``_``) runs after them."""

_NUMBERED = re.compile(r"^\D*?(\d+(?:\.\d+)?)")


def discover(only: list[str] | None) -> list[str]:
  """Benchmark script names to run, known ones first."""
  found = sorted(
    p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_") and p.stem != "run_all"
  )
  names = [s for s in SCRIPTS if s in found] + [s for s in found if s not in SCRIPTS]
  if only:
    names = [n for n in names if n in only]
  return names


def _load(name: str) -> Any:
  spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
  assert spec is not None and spec.loader is not None
  mod = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = mod  # dataclasses (eqx.Module) look their module up here
  spec.loader.exec_module(mod)
  return mod


def normalize(name: str, result: Any) -> dict[str, list[dict]]:
  """A script's return value as ``{"<script>/<table>": rows}``.

  Raises:
    TypeError: the script returned neither rows nor a mapping of rows.
  """
  if isinstance(result, dict):
    tables = {f"{name}/{k}": list(v) for k, v in result.items()}
  elif isinstance(result, (list, tuple)):
    tables = {name: list(result)}
  else:
    raise TypeError(f"{name}.main returned {type(result).__name__}; expected rows or a dict")
  for table, rows in tables.items():
    for r in rows:
      if "case" not in r or "impl" not in r:
        raise TypeError(f"{table}: row {r} lacks 'case' or 'impl'")
      _common.metric_of(r)
  return tables


def run_one(name: str, quick: bool) -> dict[str, list[dict]]:
  """Runs one script and returns its tables.

  Raises:
    AttributeError: the script has no ``main``.
    TypeError: it returned no rows and there is no adapter for it.
  """
  mod = _load(name)
  if not hasattr(mod, "main"):
    raise AttributeError(f"benchmarks/{name}.py has no main(argv)")
  return normalize(name, mod.main(["--quick"] if quick else []))


def run_scripts(names: list[str], quick: bool) -> tuple[dict, dict, dict]:
  """Runs the scripts; returns (tables, errors, seconds per script)."""
  tables: dict[str, list[dict]] = {}
  errors: dict[str, str] = {}
  seconds: dict[str, float] = {}
  for name in names:
    print(f"\n=== {name} {'(quick)' if quick else ''}", flush=True)
    t0 = time.perf_counter()
    try:
      tables.update(run_one(name, quick))
    except Exception:  # a failing script must not hide the others' results
      errors[name] = traceback.format_exc(limit=3)
      print(errors[name], file=sys.stderr)
    seconds[name] = time.perf_counter() - t0
  return tables, errors, seconds


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def _fmt_value(unit: str, v: float) -> str:
  if unit == "bytes":
    return f"{v:,.0f} B"
  return f"{v:,.3g} {unit}" if v < 100 else f"{v:,.0f} {unit}"


def markdown(report: dict) -> str:
  m = report["machine"]
  lines = [
    "# Benchmark results",
    "",
    f"Measured {report['date']}{' (quick mode: indicative only)' if report['quick'] else ''}"
    f" on **{m['cpu']}**, {m['cores']} cores, {m['platform']}; Python {m['python']},"
    f" jax {m['jax']} ({m['backend']}, {m.get('device', 'n/a')}), equinox {m['equinox']},"
    f" flax {m['flax']};"
    f" load average at start {m.get('load', 'n/a')}.",
    "",
    "Every ratio compares implementations measured side by side in the same"
    " process, against the case's baseline (hand-written JAX where there is one)."
    " Lower is better.",
  ]
  if report.get("kept"):
    lines += ["", "Carried over from an earlier run (`--keep`; not re-measured in this one):"]
    lines += [f"- `{k}`: measured {v}" for k, v in report["kept"].items()]
  for table, rows in report["tables"].items():
    lines += [
      "",
      f"## {table}"
      + (
        f" (measured {report['kept'][table]}, an earlier run)"
        if table in report.get("kept", {})
        else ""
      ),
      "",
      "| case | implementation | value | ratio | vs |",
      "|---|---|---:|---:|---|",
    ]
    for r in _common.with_ratios(rows):
      unit, v = _common.metric_of(r)
      lines.append(
        f"| {_common.table_cell(r['case'])} | {_common.table_cell(r['impl'])}"
        f" | {_fmt_value(unit, v)} | {r['ratio']:.2f}x | {_common.table_cell(r['vs'])} |"
      )
    lines.append(f"\n![{table}]({_png_name(table)})")
  if report["errors"]:
    lines += ["", "## Scripts that failed", ""]
    lines += [f"- `{k}`: `{v.strip().splitlines()[-1]}`" for k, v in report["errors"].items()]
  if report["missing"]:
    lines += ["", "Not run (script absent): " + ", ".join(f"`{s}.py`" for s in report["missing"])]
  return "\n".join(lines) + "\n"


def _kept_tables(out: pathlib.Path, names: list[str]) -> dict:
  """Tables of scripts not in ``names`` from the last report in ``out``, and
  ``{"from": {table: date measured}}`` to say so in the report."""
  path = out / "results.json"
  if not path.exists():
    return {}
  old = json.loads(path.read_text())
  tables = {k: v for k, v in old["tables"].items() if k.split("/")[0] not in names}
  dates = old.get("kept", {})
  return {"tables": tables, "from": {k: dates.get(k, old["date"]) for k in tables}}


def _png_name(table: str) -> str:
  return table.replace("/", "_") + ".png"


def _series(cases: list[str]) -> tuple[list[str], dict[str, list[tuple[float, str]]]]:
  """Splits cases into plain ones and numbered series: ``"100 Variables"`` goes
  to series ``"Variables"`` at x=100 when at least two cases share that suffix."""
  series: dict[str, list[tuple[float, str]]] = {}
  for c in cases:
    m = _NUMBERED.match(c)
    if m:
      series.setdefault(c[m.end() :].strip() or "size", []).append((float(m.group(1)), c))
  series = {k: v for k, v in series.items() if len(v) > 1}
  numbered = {c for v in series.values() for _, c in v}
  return [c for c in cases if c not in numbered], series


def _bars(ax: Any, rows: list[dict], cases: list[str], impls: list[str]) -> None:
  width = 0.8 / max(1, len(impls))
  for j, impl in enumerate(impls):
    ys = [
      next((r["ratio"] for r in rows if r["case"] == c and r["impl"] == impl), float("nan"))
      for c in cases
    ]
    ax.bar([i + j * width for i in range(len(cases))], ys, width, label=impl)
  ax.set_xticks([i + width * (len(impls) - 1) / 2 for i in range(len(cases))])
  ax.set_xticklabels(cases, rotation=15, ha="right", fontsize=8)
  ax.axhline(1.0, color="black", linewidth=0.8)
  vs = sorted({str(r["vs"]) for r in rows if r["case"] in cases})
  ax.set_ylabel(f"ratio vs {' / '.join(vs)}\n(lower is better)", fontsize=8)


def _lines(ax: Any, rows: list[dict], points: list[tuple[float, str]], label: str) -> None:
  unit = _common.metric_of(rows[0])[0]
  for impl in dict.fromkeys(str(r["impl"]) for r in rows):
    pts = [
      (x, _common.metric_of(r)[1])
      for x, c in points
      for r in rows
      if r["case"] == c and r["impl"] == impl
    ]
    if pts:
      ax.plot(*zip(*sorted(pts)), marker="o", label=impl)
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel(label)
  ax.set_ylabel(unit)


def plot(report: dict, out: pathlib.Path) -> list[pathlib.Path]:
  """One PNG per table: grouped bars of ratios for plain cases, and a log-log
  line plot for each numbered series of cases (e.g. ``"100 Variables"``)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  m = report["machine"]
  footer = f"{m['cpu']}, {m['cores']} cores, jax {m['jax']}"
  paths = []
  for table, rows in report["tables"].items():
    rows = _common.with_ratios(rows)
    cases = list(dict.fromkeys(str(r["case"]) for r in rows))
    plain, series = _series(cases)
    n = int(bool(plain)) + len(series)
    fig, axes = plt.subplots(1, n, figsize=(6 * n, 4), squeeze=False)
    panels = iter(axes[0])
    if plain:
      ax = next(panels)
      impls = list(dict.fromkeys(str(r["impl"]) for r in rows if r["case"] in plain))
      _bars(ax, rows, plain, impls)
      ax.legend(fontsize=7)
    for label, points in series.items():
      ax = next(panels)
      _lines(ax, [r for r in rows if r["case"] in {c for _, c in points}], points, label)
      ax.legend(fontsize=7)
    fig.suptitle(table)
    fig.text(0.01, 0.01, footer, fontsize=6, color="gray")
    fig.tight_layout()
    path = out / _png_name(table)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
  return paths


def write(report: dict, out: pathlib.Path) -> None:
  out.mkdir(parents=True, exist_ok=True)
  (out / "results.json").write_text(json.dumps(report, indent=1, default=str))
  (out / "RESULTS.md").write_text(markdown(report))
  try:
    paths = plot(report, out)
  except ImportError:
    print("matplotlib is not installed: no plots (pip install 'nnx_eqx[bench]').")
  else:
    for stale in set(out.glob("*.png")) - set(paths):  # plots of tables not in this run
      stale.unlink()
    print(f"plots: {', '.join(p.name for p in paths)}")
  print(f"wrote {out / 'RESULTS.md'}")
  if out.resolve() == (HERE / "results").resolve():
    print("the performance page quotes this report: run `python docs/_hooks/regenerate.py`")


def main(argv: list[str] | None = None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="smoke test: fewer repeats, small sizes")
  p.add_argument("--only", nargs="*", help="run only these scripts (names without .py)")
  p.add_argument("--out", type=pathlib.Path, default=HERE / "results", help="output folder")
  p.add_argument("--plot-only", action="store_true", help="redraw from <out>/results.json")
  p.add_argument(
    "--keep",
    action="store_true",
    help="with --only: keep the other tables of <out>/results.json (mixes runs)",
  )
  args = p.parse_args(argv)
  if args.plot_only:
    report = json.loads((args.out / "results.json").read_text())
    write(report, args.out)
    return report
  names = discover(args.only)
  started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
  machine = _common.machine()  # before the run: its load average is the other work's
  tables, errors, seconds = run_scripts(names, args.quick)
  kept = _kept_tables(args.out, names) if args.keep and args.only else {}
  report = {
    "date": started,
    "quick": args.quick,
    "machine": machine,
    "tables": {**kept.get("tables", {}), **tables},
    "kept": kept.get("from", {}),
    "errors": errors,
    "seconds": seconds,
    "missing": [s for s in SCRIPTS if s not in discover(None)],
  }
  for table, rows in tables.items():
    _common.print_table(table, rows)
  write(report, args.out)
  if errors:
    print(f"\n{len(errors)} script(s) failed: {', '.join(errors)}", file=sys.stderr)
  return report


if __name__ == "__main__":
  sys.exit(1 if main(sys.argv[1:])["errors"] else 0)

"""The performance page shows one benchmark run, generated, and no figure typed by hand.

``docs/guides/performance.md`` holds only prose and generated sections; its
headline table is ``benchmarks/_headline.py`` rendered from
``benchmarks/results/results.json`` and its full results are
``benchmarks/results/RESULTS.md``, both written by one ``python benchmarks/run_all.py``
(``tests/test_docs.py`` checks that the committed sections are current).
"""

import importlib.util
import json
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"
PAGE = ROOT / "docs" / "guides" / "performance.md"

FIGURE = re.compile(
  r"\d[\d,.]*\s*(?:×|x\b|µs|us\b|ms\b|s\b|MiB|KiB|%)"  # a measured time, ratio or size
  r"|\b20\d\d-\d\d-\d\d\b"  # a run's date
  r"|load average (?:at start )?(?:of |about )?\d",
  re.I,
)


def _load(name: str, path: pathlib.Path):
  if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
  spec = importlib.util.spec_from_file_location(name, path)
  assert spec is not None and spec.loader is not None
  mod = importlib.util.module_from_spec(spec)
  sys.modules[name] = mod
  spec.loader.exec_module(mod)
  return mod


headline = _load("bench_headline", BENCH / "_headline.py")
generated = _load("docs_generated", ROOT / "docs" / "_hooks" / "generated.py")
common = sys.modules["_common"]


def _report() -> dict:
  return json.loads((RESULTS / "results.json").read_text())


def _synthetic(**overrides) -> dict:
  report = {
    "date": "2000-01-02 03:04 UTC",
    "quick": False,
    "machine": {
      "cpu": "Test CPU",
      "cores": "3",
      "platform": "Test OS",
      "backend": "cpu x1",
      "device": "cpu",
      "python": "3.0",
      "jax": "0.0.1",
      "equinox": "0.0.2",
      "flax": "0.0.3",
      "load": "0.5 0.6 0.7",
    },
    "tables": {
      "overhead/train_step": [
        {"case": "step", "impl": "jax.jit", "us": 100.0},
        {"case": "step", "impl": "nnx_eqx.jit", "us": 125.0},
        {"case": "step", "impl": "eqx.filter_jit", "us": 300.0},
        {"case": "step", "impl": "flax.nnx.jit", "us": 800.0},
        {"case": "step", "impl": "flax.nnx split+jax.jit", "us": 150.0},
      ]
    },
    "kept": {},
    "errors": {},
    "missing": [],
  }
  return {**report, **overrides}


def test_the_page_has_no_figure_outside_its_generated_blocks():
  text = PAGE.read_text()
  blocks = {s.name: s for s in generated.sections(text)}
  assert set(blocks) == {"benchmark-headline", "benchmark-watch", "benchmark-results"}
  for s in sorted(blocks.values(), key=lambda s: -s.start):  # the prose around them
    text = text[: s.start] + text[s.end :]
  figures = [m.group(0) for m in FIGURE.finditer(text)]
  assert not figures, f"measured figures typed into {PAGE.name}: {figures}"


def test_the_figure_pattern_finds_typed_figures():
  typed = "1.08× faster, 118 µs, 29.5 MiB, 0.16 s, measured 2026-11-22 at load average 1.1"
  assert [m.group(0) for m in FIGURE.finditer(typed)] == [
    "1.08×",
    "118 µs",
    "29.5 MiB",
    "0.16 s",
    "2026-11-22",
    "load average 1",
  ]


def test_the_headline_renders_the_run_it_reads():
  out = headline.render(_synthetic())
  first = out.splitlines()[0]
  for text in ("full run", "2000-01-02 03:04 UTC", "Test CPU", "3 cores", "0.5 0.6 0.7"):
    assert text in first
  for text in ("Python 3.0", "jax 0.0.1", "equinox 0.0.2", "flax 0.0.3"):
    assert text in first
  row = next(line for line in out.splitlines() if ": step |" in line)
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert cells[1:] == [
    "1.25×",
    "3.00×",
    "8.00× flax.nnx.jit<br>1.50× flax.nnx split+jax.jit",
    "–",
    "jax.jit (100 µs)",
  ]
  assert "Not in this run:" in out and "`pytree`" in out
  assert "quick run" in headline.render(_synthetic(quick=True)).splitlines()[0]


def test_a_report_that_mixes_runs_is_refused():
  with pytest.raises(headline.MixedRunsError, match="--keep"):
    headline.render(_synthetic(kept={"overhead/train_step": "1999-12-31 00:00 UTC"}))
  with pytest.raises(headline.MixedRunsError, match="--keep"):
    headline.render_watch(_synthetic(kept={"overhead/train_step": "1999-12-31 00:00 UTC"}))


def _watch_rows(case: str, off: float, on: float, x: float, quartiles: str) -> list[dict]:
  times = {"off CPU us": off, "on CPU us": on, "quartiles": quartiles, "rounds": 7}
  return [
    {"case": case, "impl": "watch off", "x": 1.0, "baseline": True, **times},
    {"case": case, "impl": "watch on (median of per-round ratios)", "x": x, **times},
  ]


def test_the_watch_table_renders_the_run_it_reads():
  report = _synthetic()
  report["tables"] = {headline.WATCH: _watch_rows("a step", 100.0, 102.5, 1.0213, "0.991-1.052x")}
  out = headline.render_watch(report)
  assert out.splitlines()[0] == headline.machine_line(report)
  assert "| a step | 100.0 µs | 102.5 µs | 1.021× | 0.991–1.052× | 7 |" in out.splitlines()
  with pytest.raises(KeyError, match="lost_updates/end_to_end"):
    headline.render_watch(_synthetic())


def test_the_committed_watch_table_matches_results_json():
  report = _report()
  out = headline.render_watch(report).splitlines()
  rows = [r for r in report["tables"][headline.WATCH] if not r.get("baseline")]
  assert rows
  for r in rows:
    line = next(x for x in out if x.startswith(f"| {r['case']} |"))
    assert f"| {r['x']:.3f}× |" in line and f"{r['off CPU us']:.1f} µs" in line


def test_the_committed_headline_matches_results_json():
  report = _report()
  assert not report["kept"], "results.json mixes runs; rerun benchmarks/run_all.py"
  out = headline.render(report)
  m = report["machine"]
  first = out.splitlines()[0]
  for text in (report["date"], m["cpu"], m["load"], m["jax"], m["equinox"], m["flax"]):
    assert str(text) in first
  rows = out.splitlines()
  checked = 0
  for table, title, only in headline.HEADLINE:
    for r in report["tables"].get(table, []):
      if not headline.in_headline(only, r["case"]):
        assert f"| {headline.row_name(title, r['case'])} |" not in out
        continue
      case = [x for x in report["tables"][table] if x["case"] == r["case"]]
      base = common.baseline_of(case)
      if r is base:
        continue
      ratio = common.metric_of(r)[1] / common.metric_of(base)[1]
      line = next(x for x in rows if x.startswith(f"| {headline.row_name(title, r['case'])} |"))
      assert f"{ratio:.2f}×" in line, (table, r)
      checked += 1
  assert checked > 0


def test_results_md_is_the_same_run_as_results_json():
  run_all = _load("bench_run_all", BENCH / "run_all.py")
  report = _report()
  text = (RESULTS / "RESULTS.md").read_text()
  assert text == run_all.markdown(report)
  assert report["date"] in text and f"load average at start {report['machine']['load']}" in text
  plots = {run_all._png_name(table) for table in report["tables"]}
  assert {p.name for p in RESULTS.glob("*.png")} == plots


def test_a_run_keeps_nothing_from_an_earlier_one_unless_told(tmp_path):
  run_all = _load("bench_run_all", BENCH / "run_all.py")
  old = _synthetic()
  run_all.write(old, tmp_path)
  assert (tmp_path / "overhead_train_step.png").exists()
  new = run_all.main(["--only", "no_such_script", "--out", str(tmp_path)])
  assert new["tables"] == {} and new["kept"] == {}
  assert not list(tmp_path.glob("*.png"))  # the earlier run's plots are gone
  run_all.write(old, tmp_path)
  mixed = run_all.main(["--only", "no_such_script", "--keep", "--out", str(tmp_path)])
  assert mixed["kept"] == {"overhead/train_step": old["date"]}
  md = (tmp_path / "RESULTS.md").read_text()
  assert f"## overhead/train_step (measured {old['date']}, an earlier run)" in md
  with pytest.raises(headline.MixedRunsError):
    headline.render(mixed)


def test_case_names_keep_their_underscores_in_the_tables():
  """A dunder in a case name is code in RESULTS.md and the headline, not bold text."""
  run_all = _load("bench_run_all", BENCH / "run_all.py")
  rows = [
    {"case": "+ Variables with a __setattr__", "impl": "a", "us": 1.0, "baseline": True},
    {"case": "+ Variables with a __setattr__", "impl": "nnx_eqx | b", "us": 2.0},
  ]
  report = _synthetic()
  report["tables"] = {"demo/dunder": rows}
  md = run_all.markdown(report)
  assert "| + Variables with a `__setattr__` | nnx_eqx \\| b | 2 us | 2.00x | a |" in md
  assert " __setattr__ " not in md

"""Run flax.nnx's own guides and toy examples on flax and on nnx_eqx, cell by cell, and compare.

A flax.nnx user switches by changing only ``from flax import nnx`` into ``import nnx_eqx as nnx``.
This script does exactly that to the code cells of flax's NNX guides (``docs_nnx/guides/*.md``,
myst ``{code-cell}`` blocks or jupytext ``python`` blocks) and toy examples
(``examples/nnx_toy_examples/*.py``, ``# %%`` cells), runs every cell of one source in one process
(cumulatively, as a notebook runs; a failing cell does not stop the next ones) once under flax's
Python and once under this checkout, and compares what each cell printed or displayed: the text
exactly, the numbers to a relative 1e-5 (float printing and reduction order may differ in the last
digit). It needs flax installed in another environment, so it is not part of the pytest suite::

  PYTHONPATH=$PWD .venv/bin/python tests/parity/guides.py \\
      --flax-src <extracted flax-0.12.8 sdist> --flax-python <python with flax> \\
      [--only transforms] [--out /tmp/guides] [--show-diffs]

Every run uses ``JAX_PLATFORMS=cpu`` and 8 fake host devices (the sharding guides need a mesh),
seeds NumPy's global generator (the toy examples draw data from it) and replaces matplotlib by a
no-op module (plots are not compared). Cells that need a network, a dataset or a library absent from
either environment, and IPython magics, are skipped and counted as such. Writes ``guides.json``
(per cell: status and output on both sides) into ``--out`` and prints a table of cells run and
matched per source.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

SKIP_SOURCES = {
  # The Linen bridge is out of scope; blog.md is prose with fragments, not a notebook.
  "bridge_guide": "Linen bridge is out of scope",
  "blog": "prose fragments, not a runnable notebook",
}
# A cell mentioning one of these needs something neither environment has (network, datasets).
UNAVAILABLE = (
  "tensorflow_datasets",
  "tfds.",
  "import grain",
  "load_dataset",
  "datasets import",
  "import tensorflow",
  "from flax import linen",
  "flax.training",
  "from flax import nnx, struct",
)
SWAP = ("from flax import nnx", "import nnx_eqx as nnx")
# ``import flax``/``import flax.traverse_util`` lines whose module no cell uses: a user drops them.
FLAX_IMPORT = re.compile(r"^import flax(?:\.\w+)*[ \t]*\n", flags=re.M)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
NOISE = [(re.compile(r" at 0x[0-9a-fA-F]+"), " at 0x?"), (re.compile(r'/tmp/[^\s\'")]+'), "/tmp/?")]


def cells_of(path: Path) -> list[str]:
  """The code cells of a guide (myst or jupytext markdown) or a ``# %%`` toy example."""
  text = path.read_text()
  if path.suffix == ".py":
    parts = re.split(r"^# %%.*$", text, flags=re.M)
    return [p.strip("\n") for p in parts if p.strip()]
  if "```{code-cell}" in text:
    pattern = r"^```\{code-cell\}[^\n]*\n(.*?)^```"
  else:
    pattern = r"^```python\n(.*?)^```"
  cells = []
  for body in re.findall(pattern, text, flags=re.M | re.S):
    if body.startswith("---\n"):  # myst cell options, long form
      body = body.split("---\n", 2)[2]
    body = re.sub(r"\A(?::[\w-]+:.*\n)+", "", body)  # short form
    cells.append(body.strip("\n"))
  return cells


def swap(cell: str, cells: list[str]) -> str:
  """The cell as a user switching to nnx_eqx writes it."""
  cell = cell.replace(*SWAP)
  if not any("flax." in FLAX_IMPORT.sub("", c) for c in cells):
    cell = FLAX_IMPORT.sub("", cell)
  return cell


def skip_reason(cell: str) -> str | None:
  for needle in UNAVAILABLE:
    if needle in cell:
      return f"needs {needle!r}"
  if cell.lstrip().startswith("%%"):
    return "cell magic"
  return None


# ---------------------------------------------------------------------------------------------
# Worker: runs in the environment under test.


def _fake_matplotlib() -> None:
  class _Anything:
    def __getattr__(self, name):
      return _Anything()

    def __call__(self, *args, **kwargs):
      return _Anything()

    def __iter__(self):
      return iter([_Anything(), _Anything()])

    def __getitem__(self, item):
      return _Anything()

  for name in ("matplotlib", "matplotlib.pyplot"):
    module = types.ModuleType(name)
    module.__getattr__ = lambda attr: _Anything()  # type: ignore[method-assign]
    sys.modules[name] = module
  sys.modules["matplotlib"].pyplot = sys.modules["matplotlib.pyplot"]  # type: ignore[attr-defined]


def run_cell(source: str, namespace: dict) -> tuple[str, str | None]:
  """Execute one cell as IPython would (the last expression is displayed); output and error."""
  lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
  try:
    tree = ast.parse("\n".join(lines))
  except SyntaxError as e:
    return "", f"SyntaxError: {e}"
  last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
  silent = source.rstrip().endswith(";")
  out = io.StringIO()
  error = None
  with contextlib.redirect_stdout(out):
    try:
      exec(compile(tree, "<cell>", "exec"), namespace)
      if last is not None:
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
        if value is not None and not silent:
          print(repr(value))
    except BaseException as e:  # noqa: BLE001 - a cell may raise anything, SystemExit included
      frames = traceback.extract_tb(e.__traceback__)
      error = f"{type(e).__name__}: {e}".splitlines()[0][:400]
      error += f"  [at {frames[-1].filename}:{frames[-1].lineno}]" if frames else ""
  return out.getvalue(), error


def _cell_timeout(signum, frame):
  raise TimeoutError("cell ran past --cell-timeout")


def worker(cells_file: str, result_file: str, cell_timeout: int) -> None:
  import numpy as np

  signal.signal(signal.SIGALRM, _cell_timeout)
  _fake_matplotlib()
  np.random.seed(0)
  cells = json.loads(Path(cells_file).read_text())
  namespace: dict = {"__name__": "__main__"}
  results = []
  with tempfile.TemporaryDirectory() as work:
    os.chdir(work)
    for cell in cells:
      if cell is None:
        results.append(None)
        continue
      signal.alarm(cell_timeout)
      start = time.perf_counter()
      stdout, error = run_cell(cell, namespace)
      seconds = round(time.perf_counter() - start, 2)
      signal.alarm(0)
      results.append({"stdout": stdout[-20000:], "error": error, "seconds": seconds})
  Path(result_file).write_text(json.dumps(results))


# ---------------------------------------------------------------------------------------------
# Driver.


def same_output(a: str, b: str) -> bool:
  """Equal text after NOISE, with every printed number equal within the float32
  tolerance of the project's policy (``nnx_eqx.testing.TOLERANCES``; printed
  numbers are at most float32-precise)."""
  from nnx_eqx.testing._tolerance import TOLERANCES  # the driver runs in nnx_eqx's env

  rtol, atol = TOLERANCES["float32"]
  for pattern, repl in NOISE:
    a, b = pattern.sub(repl, a), pattern.sub(repl, b)
  if NUMBER.sub("#", a) != NUMBER.sub("#", b):
    return False
  for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
    fx, fy = float(x), float(y)
    if not (abs(fx - fy) <= atol + rtol * abs(fy) or (math.isnan(fx) and math.isnan(fy))):
      return False
  return True


def run_source(python: str, cells: list, env: dict, timeout: int, cell_timeout: int) -> list:
  with tempfile.TemporaryDirectory() as tmp:
    cells_file, result_file = Path(tmp, "cells.json"), Path(tmp, "result.json")
    cells_file.write_text(json.dumps(cells))
    cmd = [
      python,
      str(Path(__file__).resolve()),
      "--worker",
      str(cells_file),
      str(result_file),
      str(cell_timeout),
    ]
    try:
      proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
      return [{"stdout": "", "error": f"timeout after {timeout}s"} for _ in cells]
    if not result_file.exists():
      crash = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
      return [{"stdout": "", "error": f"process died: {crash[0]}"} for _ in cells]
    return json.loads(result_file.read_text())


def main() -> None:
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawTextHelpFormatter
  )
  parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
  parser.add_argument(
    "--flax-src",
    default=os.environ.get("NNX_EQX_FLAX_SRC"),
    help="an extracted flax source tree (default: $NNX_EQX_FLAX_SRC)",
  )
  parser.add_argument(
    "--flax-python",
    default=os.environ.get("NNX_EQX_FLAX_PYTHON"),
    help="a python with flax installed (default: $NNX_EQX_FLAX_PYTHON)",
  )
  parser.add_argument("--only", action="append", help="source name substring (repeatable)")
  parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "guides"))
  parser.add_argument("--timeout", type=int, default=900, help="seconds per source and side")
  parser.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
  parser.add_argument("--show-diffs", action="store_true", help="print every differing cell")
  args = parser.parse_args()
  if args.worker:
    worker(args.worker[0], args.worker[1], int(args.worker[2]))
    return
  for value, flag, env in (
    (args.flax_src, "--flax-src", "NNX_EQX_FLAX_SRC"),
    (args.flax_python, "--flax-python", "NNX_EQX_FLAX_PYTHON"),
  ):
    if not value:
      parser.error(f"{flag} is required: pass it or set ${env}.")

  root = Path(args.flax_src)
  sources = sorted((root / "docs_nnx/guides").glob("*.md"))
  sources += sorted((root / "examples/nnx_toy_examples").glob("*.py"))
  if args.only:
    sources = [s for s in sources if any(o in s.stem for o in args.only)]
  repo = Path(__file__).resolve().parents[2]
  base_env = dict(
    os.environ,
    JAX_PLATFORMS="cpu",
    MPLBACKEND="Agg",
    PYTHONWARNINGS="ignore",
    XLA_FLAGS="--xla_force_host_platform_device_count=8",
  )
  flax_env = {k: v for k, v in base_env.items() if k != "PYTHONPATH"}
  ours_env = dict(base_env, PYTHONPATH=str(repo))
  report = {}
  limits = (args.timeout, args.cell_timeout)
  print(f"{'source':32} {'cells':>5} {'skip':>4} {'flax ok':>7} {'ran':>4} {'matched':>7}")
  for path in sources:
    if path.stem in SKIP_SOURCES:
      continue
    cells = cells_of(path)
    if not cells:
      continue
    reasons = [skip_reason(c) for c in cells]
    flax_cells = [None if r else c for c, r in zip(cells, reasons)]
    ours_cells = [None if r else swap(c, cells) for c, r in zip(cells, reasons)]
    flax_res = run_source(args.flax_python, flax_cells, flax_env, *limits)
    ours_res = run_source(sys.executable, ours_cells, ours_env, *limits)
    rows = []
    for i, (cell, reason, f, o) in enumerate(zip(cells, reasons, flax_res, ours_res)):
      if reason:
        rows.append({"cell": i, "skipped": reason})
        continue
      matched = f["error"] is None and o["error"] is None and same_output(f["stdout"], o["stdout"])
      matched |= (
        f["error"] is not None
        and o["error"] is not None
        and not f["error"].startswith(("process died", "timeout", "TimeoutError: cell ran past"))
        and f["error"].split(":")[0] == o["error"].split(":")[0]
      )
      rows.append({"cell": i, "matched": matched, "flax": f, "ours": o, "source": cell})
    run = [r for r in rows if "skipped" not in r]
    counts = {
      "cells": len(cells),
      "skipped": len(cells) - len(run),
      "flax_ok": sum(r["flax"]["error"] is None for r in run),
      "ran": sum(r["ours"]["error"] is None for r in run),
      "matched": sum(r["matched"] for r in run),
    }
    report[path.stem] = {"counts": counts, "cells": rows}
    c = counts
    print(
      f"{path.stem:32} {c['cells']:5} {c['skipped']:4} {c['flax_ok']:7} {c['ran']:4} "
      f"{c['matched']:7}",
      flush=True,
    )
    if args.show_diffs:
      for r in run:
        if not r["matched"]:
          print(f"--- {path.stem} cell {r['cell']}:\n{r['source'][:600]}")
          for side in ("flax", "ours"):
            print(f"  [{side}] error={r[side]['error']}\n{r[side]['stdout'][:1500]}")
  Path(args.out).mkdir(parents=True, exist_ok=True)
  Path(args.out, "guides.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
  main()

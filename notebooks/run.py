"""Executes the notebooks (jupytext percent-format ``.py`` files) in a fresh kernel.

    python notebooks/run.py                 # all notebooks; figures -> notebooks/figures/
    python notebooks/run.py 01_getting_started --ipynb /tmp/out   # also save executed .ipynb

The figures each notebook saves go to ``$NNX_EQX_FIGURES`` (default
``notebooks/figures/``, the committed copies). ``tests/test_notebooks.py`` uses
:func:`execute` with a temporary folder instead.

Cells that only serve the build (saving figures as files) are tagged
``remove_cell`` (``# %% tags=["remove_cell"]``), which the site leaves out; the
execution counts of an executed notebook number its other code cells from 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import sys
import time

import jupytext
import nbclient
import nbformat

HERE = pathlib.Path(__file__).resolve().parent


def notebooks() -> list[pathlib.Path]:
  return sorted(p for p in HERE.glob("[0-9]*.py"))


@contextlib.contextmanager
def _figures_to(figures: pathlib.Path):
  saved = {k: os.environ.pop(k, None) for k in ("NNX_EQX_FIGURES", "MPLBACKEND")}
  os.environ["NNX_EQX_FIGURES"] = str(figures)  # MPLBACKEND unset: the kernel's inline plots
  try:
    yield
  finally:
    os.environ.pop("NNX_EQX_FIGURES", None)
    os.environ.update({k: v for k, v in saved.items() if v is not None})


def _run(nb, timeout: int, allow_errors: bool) -> None:
  nbclient.NotebookClient(
    nb,
    kernel_name="python3",
    timeout=timeout,
    allow_errors=allow_errors,
    resources={"metadata": {"path": str(HERE)}},
  ).execute()


HIDDEN = "remove_cell"  # the tag of cells the site leaves out


def renumber(nb) -> None:
  """Numbers the code cells of an executed notebook 1, 2, ... as a page shows them.

  Several notebooks run in one kernel (:func:`execute_all`), whose count runs on
  from one notebook to the next; and cells tagged :data:`HIDDEN` are not shown,
  so they get no number.
  """
  count = 0
  for cell in nb.cells:
    if cell.cell_type != "code":
      continue
    shown = HIDDEN not in cell.get("metadata", {}).get("tags", [])
    count += shown
    cell.execution_count = count if shown else None
    for out in cell.get("outputs", []):
      if "execution_count" in out:
        out["execution_count"] = cell.execution_count


def execute(path: pathlib.Path, figures: pathlib.Path, timeout: int = 120):
  """Runs one notebook top to bottom with figures written to ``figures``.

  Returns the executed ``nbformat`` notebook; raises ``nbclient``'s
  ``CellExecutionError`` on the first failing cell.
  """
  nb = jupytext.read(path)
  with _figures_to(figures):
    _run(nb, timeout, allow_errors=False)
  renumber(nb)
  return nb


# Between notebooks run in one kernel: forget every name the previous one defined
# and close its figures (imported modules stay loaded: that is the time saved).
_RESET = "%reset -f\nimport matplotlib.pyplot as _plt\n_plt.close('all')\ndel _plt"


def execute_all(paths: list[pathlib.Path], figures: pathlib.Path, timeout: int = 120) -> list:
  """Runs several notebooks one after the other in a single kernel.

  Each notebook starts from an empty namespace (``%reset -f``) and its execution
  counts from 1 (:func:`renumber`); a failing cell
  is recorded as an ``error`` output and the run goes on, so one broken
  notebook does not hide the others. Returns the executed notebooks, in order.
  """
  nbs = [jupytext.read(p) for p in paths]
  combined = nbformat.v4.new_notebook(metadata=nbs[0].metadata)
  for nb in nbs:
    combined.cells.append(nbformat.v4.new_code_cell(_RESET))
    combined.cells.extend(nb.cells)
  with _figures_to(figures):
    _run(combined, timeout, allow_errors=True)
  start = 0
  for nb in nbs:
    start += 1  # the reset cell
    nb.cells = combined.cells[start : start + len(nb.cells)]
    start += len(nb.cells)
    renumber(nb)
  return nbs


def main(argv: list[str]) -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("names", nargs="*", help="notebook names (default: all)")
  p.add_argument("--ipynb", type=pathlib.Path, help="also write executed .ipynb files here")
  args = p.parse_args(argv)
  figures = pathlib.Path(os.environ.get("NNX_EQX_FIGURES", HERE / "figures"))
  for path in notebooks():
    if args.names and path.stem not in args.names:
      continue
    t0 = time.perf_counter()
    nb = execute(path, figures)
    print(f"{path.name}: ok in {time.perf_counter() - t0:.1f} s")
    if args.ipynb:
      args.ipynb.mkdir(parents=True, exist_ok=True)
      nbformat.write(nb, args.ipynb / f"{path.stem}.ipynb")


if __name__ == "__main__":
  main(sys.argv[1:])

"""Executes the notebooks (jupytext percent-format ``.py`` files) in a fresh kernel.

    python notebooks/run.py                 # all notebooks; figures -> notebooks/figures/
    python notebooks/run.py 01_getting_started --ipynb /tmp/out   # also save executed .ipynb

The figures each notebook saves go to ``$NNX_EQX_FIGURES`` (default
``notebooks/figures/``, the committed copies). ``tests/test_notebooks.py`` uses
:func:`execute` with a temporary folder instead.
"""

from __future__ import annotations

import argparse
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


def execute(path: pathlib.Path, figures: pathlib.Path, timeout: int = 120):
  """Runs one notebook top to bottom with figures written to ``figures``.

  Returns the executed ``nbformat`` notebook; raises ``nbclient``'s
  ``CellExecutionError`` on the first failing cell.
  """
  nb = jupytext.read(path)
  saved = {k: os.environ.pop(k, None) for k in ("NNX_EQX_FIGURES", "MPLBACKEND")}
  os.environ["NNX_EQX_FIGURES"] = str(figures)  # MPLBACKEND unset: the kernel's inline plots
  try:
    nbclient.NotebookClient(
      nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(HERE)}}
    ).execute()
  finally:
    os.environ.pop("NNX_EQX_FIGURES", None)
    os.environ.update({k: v for k, v in saved.items() if v is not None})
  return nb


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

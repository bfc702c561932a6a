"""Executes every notebook in ``notebooks/`` (jupytext percent-format ``.py``).

All notebooks run top to bottom in one ``python3`` kernel of this environment
(``notebooks/run.py:execute_all``), each from an empty namespace, so the kernel
start and the imports are paid once; any cell error fails that notebook's test.
Figures are written to a temporary folder so running the tests never rewrites
the committed ones in ``notebooks/figures/``; the test checks that each notebook
regenerated the figures it saves and that the committed copies exist.
"""

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("notebooks_run", ROOT / "notebooks" / "run.py")
assert _spec is not None and _spec.loader is not None
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

NOTEBOOKS = run.notebooks()
_SAVED = re.compile(r"""savefig\(\s*FIGURES\s*/\s*["']([\w.-]+\.png)["']""")


def test_every_topic_has_a_notebook():
  names = {p.stem for p in NOTEBOOKS}
  assert {
    "01_getting_started",
    "02_equinox_bridge",
    "03_scan_and_remat",
    "04_performance",
  } <= names


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
  figures = tmp_path_factory.mktemp("figures")
  return dict(zip(NOTEBOOKS, run.execute_all(NOTEBOOKS, figures))), figures


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_draws_its_figures(path, executed):
  notebooks, tmp_path = executed
  nb = notebooks[path]
  outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
  errors = [o for o in outputs if o.get("output_type") == "error"]
  assert not errors, "\n".join(f"{e['ename']}: {e['evalue']}" for e in errors)
  images = [o for o in outputs if "image/png" in o.get("data", {})]
  assert images, f"{path.name} shows no plot"
  figures = _SAVED.findall(path.read_text())
  assert figures, f"{path.name} saves no figure"
  for name in figures:
    assert (tmp_path / name).stat().st_size > 5000, f"{name} was not regenerated"
    assert (path.parent / "figures" / name).exists(), f"commit notebooks/figures/{name}"


_PLUMBING = re.compile(r"FIGURES|savefig|noqa")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_build_plumbing_is_in_hidden_cells(path):
  """What only the build needs (saving figures as files) is in cells tagged
  ``remove_cell``, which the site leaves out; the shown cells are the lesson."""
  import jupytext

  nb = jupytext.read(path)
  shown = [c for c in nb.cells if run.HIDDEN not in c.metadata.get("tags", [])]
  leaks = [c.source.splitlines()[0] for c in shown if _PLUMBING.search(c.source)]
  assert not leaks, f"{path.name}: build plumbing in shown cells: {leaks}"
  assert any(run.HIDDEN in c.metadata.get("tags", []) for c in nb.cells)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_execution_counts_start_at_one_in_every_notebook(path, executed):
  """The notebooks run in one kernel, but each page counts its own cells."""
  notebooks, _ = executed
  code = [c for c in notebooks[path].cells if c.cell_type == "code"]
  shown = [c.execution_count for c in code if run.HIDDEN not in c.metadata.get("tags", [])]
  assert shown == list(range(1, len(shown) + 1))
  assert all(c.execution_count is None for c in code if run.HIDDEN in c.metadata.get("tags", []))

"""Developer tooling: jaxtyping checks at test time, the benchmark report, and
the package's import discipline.

``conftest.py`` installs ``jaxtyping.install_import_hook("nnx_eqx.nn",
"beartype.beartype")`` before nnx_eqx is imported; the first tests show that a
call violating a layer's annotation fails with jaxtyping's error, before the
layer's own code runs. The last ones check ``benchmarks/run_all.py``'s report
(ratios, markdown, plots) on synthetic rows. The layering itself is checked by
``lint-imports`` (contracts in ``pyproject.toml``); the test here keeps imports at
module level, where import-linter and readers see them.
"""

import ast
import pathlib

import jax.numpy as jnp
import jaxtyping
import pytest

import nnx_eqx as nnx


def test_layers_are_typechecked():
  layer = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
  assert layer(jnp.ones((2, 3))).shape == (2, 4)  # a correct call passes the check
  with pytest.raises(jaxtyping.TypeCheckError, match=r"Float\[.*'\*batch in'\]"):
    layer(jnp.ones(()))  # a scalar has no feature axis: wrong shape for "*batch in"


def test_wrong_dtype_is_caught_by_the_annotation():
  layer = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
  with pytest.raises(jaxtyping.TypeCheckError, match=r"Actual value: i32\[2,3\]"):
    layer(jnp.ones((2, 3), jnp.int32))  # Float[Array, ...] rejects integer inputs


def test_norm_layers_are_typechecked_too():
  norm = nnx.LayerNorm(4, rngs=nnx.Rngs(0))
  assert norm(jnp.ones((2, 4))).shape == (2, 4)
  with pytest.raises(jaxtyping.TypeCheckError):
    norm(jnp.ones((2, 4), jnp.int32))


# --------------------------------------------------------------------------
# The benchmark suite's report (no timing here: synthetic rows)
# --------------------------------------------------------------------------
def _load_run_all():
  import importlib.util
  import pathlib

  bench = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
  spec = importlib.util.spec_from_file_location("run_all", bench / "run_all.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def test_benchmark_report_ratios_table_and_plots(tmp_path):
  run_all = _load_run_all()
  rows = run_all.normalize(
    "demo",
    {
      "step": [
        {"case": "train step", "impl": "nnx_eqx.jit", "us": 110.0},
        {"case": "train step", "impl": "jax.jit", "us": 100.0},
      ],
      "sizes": [
        {"case": "10 Variables", "impl": "a", "us": 2.0, "baseline": True},
        {"case": "10 Variables", "impl": "b", "us": 5.0},
        {"case": "100 Variables", "impl": "a", "us": 20.0, "baseline": True},
        {"case": "100 Variables", "impl": "b", "us": 30.0},
      ],
    },
  )
  report = {
    "date": "today",
    "quick": True,
    "machine": {
      "cpu": "CPU X",
      "cores": "2",
      "platform": "p",
      "python": "3",
      "jax": "0",
      "backend": "cpu",
      "equinox": "0",
      "flax": "none",
    },
    "tables": rows,
    "errors": {"broken": "Traceback...\nValueError: boom"},
    "missing": ["bridge"],
  }
  run_all.write(report, tmp_path)
  md = (tmp_path / "RESULTS.md").read_text()
  assert "on **CPU X**, 2 cores" in md
  assert "| train step | nnx_eqx.jit | 110 us | 1.10x | jax.jit |" in md
  assert "| 100 Variables | b | 30 us | 1.50x | a |" in md
  assert "`broken`: `ValueError: boom`" in md and "`bridge.py`" in md
  for name in ("demo_step.png", "demo_sizes.png"):
    assert (tmp_path / name).stat().st_size > 5000
  again = run_all.main(["--plot-only", "--out", str(tmp_path)])
  assert again["tables"] == rows


def test_benchmark_rows_are_validated():
  run_all = _load_run_all()
  with pytest.raises(TypeError, match="lacks 'case' or 'impl'"):
    run_all.normalize("x", [{"impl": "a", "us": 1.0}])
  with pytest.raises(KeyError, match="has no metric"):
    run_all.normalize("x", [{"case": "c", "impl": "a", "speed": 1.0}])
  assert run_all.discover(None)[0] == "overhead"


# --------------------------------------------------------------------------
# Imports live at module level (optional dependencies excepted)
# --------------------------------------------------------------------------
OPTIONAL_IMPORTS = {"treescope", "orbax", "sklearn", "tqdm", "matplotlib", "flax"}
"""Third-party packages that may be imported inside a function, each with a
comment saying why: extras (``demo``, ``checkpoint``) or notebook-only renderers."""


def _local_imports(source: str) -> list[tuple[int, str]]:
  """``(line, module)`` of each import inside a function body that is not an
  optional dependency on a line carrying (or following) a comment."""
  lines = source.splitlines()
  found = []
  for fn in ast.walk(ast.parse(source)):
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    for node in ast.walk(fn):
      if isinstance(node, ast.ImportFrom):
        names = ["." * node.level + (node.module or "")]
      elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      else:
        continue
      commented = "#" in lines[node.lineno - 1] or "#" in lines[node.lineno - 2]
      for name in names:
        if not (name.split(".")[0] in OPTIONAL_IMPORTS and commented):
          found.append((node.lineno, name))
  return found


def test_no_function_local_imports_in_the_package():
  package = pathlib.Path(nnx.__file__).parent
  offenders = [
    f"{path.relative_to(package.parent)}:{line}: {name}"
    for path in sorted(package.rglob("*.py"))
    for line, name in _local_imports(path.read_text())
  ]
  assert offenders == [], "import at module level instead (or register from above):\n" + (
    "\n".join(offenders)
  )


def test_the_local_import_check_flags_what_it_should():
  source = (
    "def f():\n"
    "  from ._graph import merge\n"
    "  import orbax.checkpoint  # optional: the checkpoint extra\n"
    "  x = 1\n"
    "  import matplotlib\n"
  )
  assert _local_imports(source) == [(2, "._graph"), (5, "matplotlib")]


# --------------------------------------------------------------------------
# The tolerance policy (tests/README.md) stays applied
# --------------------------------------------------------------------------
# Comparisons that bypass nnx_eqx.testing's assert helpers; ``not np.array_equal(...)``
# ("these differ") stays allowed, it compares nothing within a tolerance.
_BANNED_CALLS = {
  "np.testing.assert_allclose",
  "np.testing.assert_array_equal",
  "np.testing.assert_array_almost_equal",
  "np.testing.assert_almost_equal",
  "np.testing.assert_equal",
  "numpy.testing.assert_allclose",
  "numpy.testing.assert_array_equal",
  "tree_allclose",
  "nnx.testing.tree_allclose",
  "np.allclose",
  "jnp.allclose",
  "np.array_equal",
  "jnp.array_equal",
  "np.isclose",
  "jnp.isclose",
  "math.isclose",
  "pytest.approx",
}
# (file, line text) pairs that may break the rules, each with its reason.
_ALLOWED: dict[tuple[str, str], str] = {}


def _dotted(node) -> str:
  import ast

  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _policy_violations(source: str, filename: str) -> list[str]:
  """Raw comparisons and tolerance literals below the float32 policy in ``source``."""
  import ast

  from nnx_eqx.testing import TOLERANCES

  min_rtol, min_atol = TOLERANCES["float32"]  # the float32-matmul (CPU) policy
  tree = ast.parse(source)
  negated = {
    id(n.operand)
    for n in ast.walk(tree)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
  }
  lines = source.splitlines()
  out = []
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    text = lines[node.lineno - 1].strip()
    if (filename, text) in _ALLOWED:
      continue
    name = _dotted(node.func)
    if name in _BANNED_CALLS and id(node) not in negated:
      out.append(f"{filename}:{node.lineno}: {name} (use assert_trees_close/assert_trees_equal)")
    for kw in node.keywords:
      if kw.arg not in ("rtol", "atol") or not isinstance(kw.value, ast.Constant):
        continue
      floor = min_rtol if kw.arg == "rtol" else min_atol
      if isinstance(kw.value.value, (int, float)) and kw.value.value < floor:
        out.append(f"{filename}:{node.lineno}: {kw.arg}={kw.value.value} is below the policy")
  return out


def test_every_numeric_comparison_uses_the_tolerance_policy():
  import pathlib

  here = pathlib.Path(__file__).resolve().parent
  found = []
  for path in sorted(here.rglob("*.py")):
    if path.name != "test_tooling.py":
      found += _policy_violations(path.read_text(), str(path.relative_to(here)))
  assert not found, "comparisons outside the tolerance policy (tests/README.md):\n" + "\n".join(
    found
  )


@pytest.mark.parametrize(
  "line",
  [
    "np.testing.assert_allclose(a, b, rtol=1e-5)",
    "np.testing.assert_array_equal(a, b)",
    "assert tree_allclose(a, b)",
    "assert np.allclose(a, b)",
    "assert_trees_close(a, b, rtol=1e-7)",
    "assert_trees_close(a, b, atol=0)",
  ],
)
def test_the_policy_check_catches_raw_comparisons(line):
  assert _policy_violations(line, "t.py"), line


def test_the_policy_check_allows_the_helpers_and_looser_tolerances():
  ok = (
    "assert_trees_close(a, b)\nassert_trees_close(a, b, rtol=1e-4)\nassert not np.array_equal(a, b)"
  )
  assert _policy_violations(ok, "t.py") == []

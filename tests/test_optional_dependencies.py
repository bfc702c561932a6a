"""Each optional dependency, missing, is named at use with the extra that installs it.

Every check runs in a fresh Python process whose imports of the packages under test
are refused by a finder put first on ``sys.meta_path``, as if they were not installed
(``BLOCK``). The process prints what it saw as JSON; the assertions are made here.
"""

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import nnx_eqx.testing
from nnx_eqx._extras import OPTIONAL, missing_extra, require

# Refuses the top-level packages named in argv[1] (comma-separated), as an
# environment without them does: ModuleNotFoundError with the package's name.
BLOCK = """
import sys

class _NotInstalled:
  def __init__(self, names):
    self.names = names

  def find_spec(self, name, path=None, target=None):
    if name.partition(".")[0] in self.names:
      raise ModuleNotFoundError(f"No module named {name!r}", name=name.partition(".")[0])
    return None

sys.meta_path.insert(0, _NotInstalled(set(sys.argv[1].split(","))))
"""


def run_without(packages: str, code: str, *args: str) -> subprocess.CompletedProcess:
  """Runs ``code`` in a new process where ``packages`` cannot be imported."""
  return subprocess.run(
    [sys.executable, "-c", BLOCK + textwrap.dedent(code), packages, *args],
    capture_output=True,
    text=True,
    timeout=300,
  )


def seen(proc: subprocess.CompletedProcess) -> dict:
  assert proc.returncode == 0, proc.stderr
  return json.loads(proc.stdout.strip().splitlines()[-1])


# What the child processes use to record an ImportError's message.
RECORD = """
import json

def error_of(fn):
  try:
    fn()
  except ImportError as e:
    return f"{type(e).__name__}: {e}"
  return None
"""


def test_the_blocker_refuses_what_it_names_and_nothing_else():
  out = seen(
    run_without(
      "tqdm",
      RECORD
      + """
import numpy
print(json.dumps({"tqdm": error_of(lambda: __import__("tqdm")), "numpy": numpy.__name__}))
""",
    )
  )
  assert out == {"tqdm": "ModuleNotFoundError: No module named 'tqdm'", "numpy": "numpy"}


def test_testing_comparisons_import_without_hypothesis():
  out = seen(
    run_without(
      "hypothesis",
      RECORD
      + """
import sys
import jax.numpy as jnp
import nnx_eqx as nnx
from nnx_eqx.testing import (
  EQX_ARCHITECTURES, REDUCED_PRECISION_TOLERANCES, TOLERANCES, VARIABLE_TYPES, EqxCase,
  TraceCounter, all_paths, assert_no_retrace, assert_same_program, assert_trees_close,
  assert_trees_equal, hlo_equal, matmul_precision, same_graph, sharing_classes,
  stablehlo_text, tolerance, tree_allclose,
)

x = jnp.linspace(0.0, 1.0, 5)
assert_trees_close({"a": x}, {"a": x + 1e-7})
assert_trees_equal({"a": x}, {"a": x})
model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
try:
  assert_trees_close(x, x + 1.0)
  close_failed = False
except AssertionError:
  close_failed = True
print(json.dumps({
  "hypothesis_imported": "hypothesis" in sys.modules,
  "close_failed_on_far_values": close_failed,
  "same_graph": same_graph(model, nnx.merge(*nnx.split(model))),
  "paths": sorted(str(p) for p, _ in all_paths(model) if p),
  "architectures": len(EQX_ARCHITECTURES),
}))
""",
    )
  )
  assert out["hypothesis_imported"] is False
  assert out["close_failed_on_far_values"] is True
  assert out["same_graph"] is True
  assert out["paths"] == ["('bias',)", "('kernel',)"]
  assert out["architectures"] > 0


def test_introspecting_nnx_eqx_testing_works_without_hypothesis():
  """help() and inspect.getmembers read every name dir() lists: the strategies are
  listed only where hypothesis can be imported."""
  out = seen(
    run_without(
      "hypothesis",
      RECORD
      + """
import inspect, pydoc
import nnx_eqx.testing as testing
names = [n for n, _ in inspect.getmembers(testing)]
print(json.dumps({
  "listed": sorted(set(names) & {"graphs", "arrays", "eqx_models", "eqx_inputs"}),
  "has_assert_trees_close": "assert_trees_close" in names,
  "help_renders": "Testing utilities" in pydoc.render_doc(testing, renderer=pydoc.plaintext),
}))
""",
    )
  )
  assert out == {"listed": [], "has_assert_trees_close": True, "help_renders": True}
  # here hypothesis is installed: the strategies are listed
  assert {"graphs", "arrays", "eqx_models", "eqx_inputs"} <= set(dir(nnx_eqx.testing))


@pytest.mark.parametrize("name", ["graphs", "arrays", "eqx_models", "eqx_inputs"])
def test_a_strategy_without_hypothesis_names_the_testing_extra(name):
  out = seen(
    run_without(
      "hypothesis",
      RECORD
      + f"""
import nnx_eqx.testing as testing

def from_import():
  from nnx_eqx.testing import {name}

print(json.dumps({{
  "from_import": error_of(from_import),
  "attribute": error_of(lambda: testing.{name}),
}}))
""",
    )
  )
  expected = (
    f"ImportError: nnx_eqx.testing.{name} (a hypothesis strategy) needs hypothesis, which is"
    " not installed. Fix: pip install 'nnx_eqx[testing]' (from a clone of the repository:"
    " pip install -e '.[testing]')."
  )
  assert out == {"from_import": expected, "attribute": expected}


def test_demo_functions_name_the_demo_extra():
  out = seen(
    run_without(
      "sklearn,tqdm,matplotlib",
      RECORD
      + """
import tempfile
from nnx_eqx import demo
from nnx_eqx.demo import Data, build_model, load_data, save_outputs, train

print(json.dumps({
  "load_data": error_of(lambda: load_data(0)),
  "train": error_of(lambda: train(build_model(0), None, epochs=1)),
  "save_outputs": error_of(lambda: save_outputs(tempfile.mkdtemp(), [], {})),
}))
""",
    )
  )
  for function, package in [
    ("load_data", "scikit-learn"),
    ("train", "tqdm"),
    ("save_outputs", "matplotlib"),
  ]:
    assert out[function] == (
      f"ImportError: nnx_eqx.demo.{function} needs {package}, which is not installed. Fix:"
      " pip install 'nnx_eqx[demo]' (from a clone of the repository: pip install -e '.[demo]')."
    )


# `python -m nnx_eqx.demo` run as the command line does (runpy, as `-m` does).
CLI = """
import runpy
sys.argv = ["python -m nnx_eqx.demo", *sys.argv[2:]]
runpy.run_module("nnx_eqx.demo", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
  "blocked, args, package, extra, command",
  [
    ("sklearn", [], "scikit-learn", "demo", "python -m nnx_eqx.demo"),
    ("tqdm", [], "tqdm", "demo", "python -m nnx_eqx.demo"),
    ("matplotlib", ["--output", "out"], "matplotlib", "demo", "python -m nnx_eqx.demo"),
    (
      "orbax",
      ["--checkpoint", "ck"],
      "orbax-checkpoint",
      "checkpoint",
      "python -m nnx_eqx.demo --checkpoint",
    ),
  ],
)
def test_the_demo_command_exits_before_training_naming_the_extra(
  tmp_path, blocked, args, package, extra, command
):
  args = [str(tmp_path / a) if a in ("out", "ck") else a for a in args]
  proc = run_without(blocked, CLI, "--epochs", "1", "--no-progress", *args)
  assert proc.returncode == 1, (proc.stdout, proc.stderr)
  assert proc.stderr.strip() == (
    f"{command} needs {package}, which is not installed. Fix: pip install"
    f" 'nnx_eqx[{extra}]' (from a clone of the repository: pip install -e '.[{extra}]')."
  )
  assert "Traceback" not in proc.stderr
  assert "epoch" not in proc.stdout  # it stopped before any work
  assert not any(tmp_path.iterdir())


def test_checkpoint_without_orbax_names_the_checkpoint_extra(tmp_path):
  out = seen(
    run_without(
      "orbax",
      RECORD
      + """
import nnx_eqx as nnx
model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
print(json.dumps({
  "save": error_of(lambda: nnx.checkpoint.save(sys.argv[2], model)),
  "restore": error_of(lambda: nnx.checkpoint.restore(sys.argv[2], model)),
}))
""",
      str(tmp_path / "ckpt"),
    )
  )
  expected = (
    "ImportError: nnx_eqx.checkpoint needs orbax-checkpoint, which is not installed. Fix: pip"
    " install 'nnx_eqx[checkpoint]' (from a clone of the repository: pip install -e"
    " '.[checkpoint]')."
  )
  assert out == {"save": expected, "restore": expected}


def test_every_named_extra_exists_and_installs_its_package():
  pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
  extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
  for module, (package, extra) in OPTIONAL.items():
    names = [r.split(">")[0].split("=")[0].split("[")[0] for r in extras[extra]]
    assert package in names, (module, extra, extras[extra])


def test_a_package_that_is_there_but_breaks_is_not_reported_as_missing():
  with pytest.raises(ModuleNotFoundError, match="tqdm.no_such_module") as info:
    require("tqdm.no_such_module", "a caller")
  assert "nnx_eqx[" not in str(info.value)
  assert "nnx_eqx[demo]" in str(missing_extra("a caller", "tqdm", "demo"))


def test_an_installed_but_broken_package_shows_what_it_lacks():
  """scikit-learn is installed but cannot import scipy: that is not a missing extra,
  and the traceback names scipy."""
  proc = run_without("scipy", CLI, "--epochs", "1", "--no-progress")
  assert proc.returncode == 1
  assert "ModuleNotFoundError: No module named 'scipy'" in proc.stderr
  assert "nnx_eqx[" not in proc.stderr

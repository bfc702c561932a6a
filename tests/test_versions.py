"""Declared dependency ranges: pyproject's lower bounds are plain ``name>=version``
pins (.ci/run installs exactly those), and a jax older than the lower bound fails at
import with one error naming the version needed."""

import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

from nnx_eqx._jax_version import MIN_JAX, check_jax_version

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def lower_bounds() -> dict[str, str]:
  out = {}
  for dep in PYPROJECT["project"]["dependencies"]:
    found = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)", dep)
    assert found, f"{dep!r}: .ci/run pins each runtime dependency from a plain 'name>=version'"
    out[found[1]] = found[2]
  return out


def test_the_jax_lower_bound_is_the_import_check_and_jaxlib_matches():
  bounds = lower_bounds()
  need = ".".join(map(str, MIN_JAX))
  assert bounds["jax"] == bounds["jaxlib"] == need
  assert {"jax", "jaxlib", "equinox", "optax", "jaxtyping", "numpy"} <= set(bounds)


def test_python_versions_declared_are_the_tested_ones():
  assert PYPROJECT["project"]["requires-python"] == ">=3.11"
  listed = {c.rsplit(" :: ", 1)[1] for c in PYPROJECT["project"]["classifiers"] if "3." in c}
  assert listed == {"3.11", "3.12", "3.13"}


@pytest.mark.parametrize("version", ["0.7.2", "0.10.2", "0.12.0.1", "1.0", "0.8.0.dev20250101"])
def test_supported_versions_pass(version):
  check_jax_version(version)


@pytest.mark.parametrize("version", ["0.7.1", "0.6.2", "0.4.38", "0.7.0rc1"])
def test_older_versions_raise_naming_the_version_needed(version):
  with pytest.raises(ImportError, match=rf"needs jax>=0\.7\.2 .*but jax {re.escape(version)} is"):
    check_jax_version(version)


def test_importing_with_an_old_jax_gives_that_one_error():
  code = "import jax; jax.__version__ = '0.6.2'; import nnx_eqx"
  run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
  assert run.returncode == 1
  last = run.stderr.strip().splitlines()[-1]
  assert last.startswith("ImportError: nnx_eqx needs jax>=0.7.2"), run.stderr
  assert run.stderr.count("Traceback") == 1 and "During handling" not in run.stderr

"""flax stays optional: importing nnx_eqx never imports it, and without it the flax.nnx
bridge says which extra to install. Runs with and without flax installed."""

import pathlib
import subprocess
import sys
import textwrap


def run(code: str) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
  )


def test_import_nnx_eqx_does_not_import_flax():
  r = run(
    """
    import sys
    import nnx_eqx as nnx
    nnx.bridge.FlaxModule, nnx.from_flax, nnx.to_flax  # public names, still no flax
    loaded = sorted(m for m in sys.modules if m == "flax" or m.startswith("flax."))
    assert not loaded, loaded
    print("ok")
    """
  )
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "ok"


_BLOCK_FLAX = """
import importlib.abc, sys

class NoFlax(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name == "flax" or name.startswith("flax."):
      raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return None

sys.meta_path.insert(0, NoFlax())
"""


def test_without_flax_the_bridge_names_the_extra():
  r = run(
    _BLOCK_FLAX
    + """
import jax.numpy as jnp
import nnx_eqx as nnx

m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
for call in (lambda: nnx.to_flax(m), lambda: nnx.to_flax(nnx.state(m)),
             lambda: nnx.to_flax(m.kernel)):
  try:
    call()
  except nnx.bridge.FlaxNotInstalledError as e:
    assert isinstance(e, ImportError) and isinstance(e, nnx.NnxError)
    assert "pip install 'nnx_eqx[flax]'" in str(e), str(e)
  else:
    raise AssertionError("no error")
# an object that is not flax's gets the bridge's own error, not an import error
try:
  nnx.from_flax(jnp.ones(2))
except nnx.bridge.FlaxConversionError as e:
  assert "flax.nnx Module" in str(e)
print("ok")
"""
  )
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "ok"


def test_without_flax_the_flax_doctest_examples_are_skipped():
  """conftest.py skips a doctest's examples from its first flax import on (the rest run),
  and does not import the bridge's flax side."""
  root = pathlib.Path(__file__).resolve().parents[1]
  # _flax_side.py (flax at its top) is not collected; the docstrings of FlaxModule and
  # EqxFlaxModule are collected from the bridge's namespace, the module their classes name
  files = ["nnx_eqx/bridge/flax_nnx", "nnx_eqx/bridge/__init__.py", "-k", "flax"]
  r = subprocess.run(
    [
      sys.executable,
      "-c",
      _BLOCK_FLAX
      + "import pytest\n"
      + "args = ['-p', 'no:xdist', '-q', '-o', 'addopts=--doctest-modules']\n"
      + f"sys.exit(pytest.main([*args, *{files!r}]))",
    ],
    capture_output=True,
    text=True,
    timeout=300,
    cwd=root,
  )
  assert r.returncode == 0, r.stdout + r.stderr
  # from_flax, to_flax, FlaxModule, EqxFlaxModule: each its lines before the flax import
  assert "4 passed" in r.stdout, r.stdout

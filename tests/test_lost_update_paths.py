"""The dropped-update watch tells JAX's, Equinox's and the package's code from the
user's by identity (resolved package folders, code objects), never by names or
substrings of paths: a user's script behaves the same whatever its folder is called."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import pytest

import nnx_eqx as nnx
from nnx_eqx.graph.tracing import _frames

SCRIPT = textwrap.dedent(
  """
  import equinox as eqx
  import jax
  import jax.numpy as jnp
  import nnx_eqx as nnx

  x = jnp.ones((4, 3))
  bn = nnx.BatchNorm(3, rngs=nnx.Rngs(0))
  jax.eval_shape(lambda m, x: m(x), bn, x)
  eqx.filter_eval_shape(lambda m, x: m(x), bn, x)
  jax.jit(lambda m, x: m(x)).eval_shape(bn, x)
  bn(x)  # shape evaluation discards every value: a correct program, nothing to report
  print("shape evaluation: nothing reported")


  def eval_shape(f, *args):  # the user's own function of that name evaluates no shapes
    return jax.jit(f)(*args)


  runs = {
    "jax.jit": jax.jit(lambda m, x: m(x)),
    "eqx.filter_jit": eqx.filter_jit(lambda m, x: m(x)),
    "eval_shape of the user's": lambda m, x: eval_shape(lambda m, x: m(x), m, x),
  }
  for name, run in runs.items():
    m = nnx.BatchNorm(3, rngs=nnx.Rngs(0))
    run(m, x)  # the statistics' update is dropped with the copy
    try:
      m.mean[...]
    except nnx.LostUpdateError as e:
      print(f"{name}: reported, written from this script: {__file__ in str(e)}")
    else:
      print(f"{name}: not reported")
  """
)

EXPECTED = [
  "shape evaluation: nothing reported",
  "jax.jit: reported, written from this script: True",
  "eqx.filter_jit: reported, written from this script: True",
  "eval_shape of the user's: reported, written from this script: True",
]


def _package_parent() -> str:
  return str(pathlib.Path(nnx.__file__).resolve().parents[1])


def _run(script: pathlib.Path, *path: str) -> subprocess.CompletedProcess:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in (*path, env.get("PYTHONPATH")) if p)
  env["JAX_PLATFORMS"] = "cpu"
  return subprocess.run(
    [sys.executable, "-W", "error", str(script)],
    cwd=script.parent,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.mark.parametrize("folder", ["nnx_eqx", "jax", "equinox", "jaxlib"])
def test_a_script_in_a_folder_named_after_a_library_is_the_users(tmp_path, folder):
  script = tmp_path / folder / "train.py"
  script.parent.mkdir()
  script.write_text(SCRIPT)
  done = _run(script, _package_parent())
  assert done.returncode == 0, done.stderr
  assert done.stdout.splitlines() == EXPECTED, done.stdout + done.stderr


def test_jax_installed_inside_a_folder_named_after_the_package_is_jax(tmp_path):
  """The layout of a clone named after the package with its virtual environment
  inside: JAX, Equinox and the rest are imported from a path through that folder
  (a link to the packages installed here)."""
  site = tmp_path / "nnx_eqx" / ".venv" / "site-packages"
  site.parent.mkdir(parents=True)
  site.symlink_to(pathlib.Path(jax.__file__).resolve().parents[1], target_is_directory=True)
  script = tmp_path / "nnx_eqx" / "train.py"
  script.write_text(f"import jax\nassert jax.__file__.startswith({str(site)!r})\n" + SCRIPT)
  done = _run(script, _package_parent(), str(site))
  assert done.returncode == 0, done.stderr
  assert done.stdout.splitlines() == EXPECTED, done.stdout + done.stderr


def _frame_of(code_file: str, globals_file: str | None = None):
  """The frame of a function whose code says it lies in ``code_file`` (and whose
  module's globals name ``globals_file``), as it runs."""
  scope: dict = {"sys": sys} if globals_file is None else {"sys": sys, "__file__": globals_file}
  exec(compile("def here():\n  return sys._getframe()\n", code_file, "exec"), scope)
  return scope["here"]()


def test_code_is_told_by_the_folder_of_the_package_as_imported(tmp_path):
  _frames.refresh()
  jax_root = pathlib.Path(jax.__file__).resolve().parent
  own_root = pathlib.Path(nnx.__file__).resolve().parent
  assert _frames.kind(_frame_of(str(jax_root / "_src" / "any.py"))) == _frames.LIBRARY
  assert _frames.kind(_frame_of(str(own_root / "nn" / "any.py"))) == _frames.PACKAGE
  # Folders named after them, anywhere else, are the user's; so is a sibling folder whose
  # name starts with the package's.
  for folder in ("jax", "jaxlib", "equinox", "nnx_eqx", "site-packages/jax", f"{own_root}_x"):
    assert _frames.kind(_frame_of(str(tmp_path / folder / "train.py"))) == 0, folder
  # Code made at run time without a file of its own belongs where its module lies.
  made = _frame_of("<generated wrapper>", str(own_root / "nn" / "linear.py"))
  assert _frames.kind(made) == _frames.PACKAGE
  assert _frames.kind(_frame_of("<generated wrapper>", str(tmp_path / "jax" / "m.py"))) == 0


def test_a_users_function_named_eval_shape_is_no_shape_evaluation():
  def eval_shape():
    return _frames.under_shape_evaluation(sys._getframe())

  assert not eval_shape()
  seen: list = []
  jax.eval_shape(lambda: seen.append(_frames.under_shape_evaluation(sys._getframe())))
  assert seen == [True]

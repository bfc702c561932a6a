"""Pickles written by an earlier release load with the current tree and compute the same.

``tests/fixtures/pickles-0.1.0.pkl`` was written by nnx_eqx 0.1.0 (its private module paths:
``nnx_eqx.graph._variables``, ``nnx_eqx.graph._graphdef``, ``nnx_eqx.bridge._layers``, ...)
with ``tests/fixtures/make_pickles.py``. Every object in it must load and give the arrays
recorded when it was written, within the tolerance policy: those came from the machine that
wrote the fixture, and another CPU may generate other code for the same program (1 ulp apart
on an Intel Xeon against the AMD EPYC that wrote it).
"""

import io
import pathlib
import pickle

import jax
import pytest
from fixtures.make_pickles import as_numpy, build

from nnx_eqx.testing import assert_trees_close

FIXTURES = sorted(pathlib.Path(__file__).parent.joinpath("fixtures").glob("pickles-*.pkl"))


def _load(path):
  with open(path, "rb") as f:
    return pickle.load(f)


class _Recorder(pickle.Unpickler):
  """Unpickles as usual, recording each ``(module, name)`` the pickle names."""

  def __init__(self, data):
    super().__init__(io.BytesIO(data))
    self.names = []

  def find_class(self, module, name):
    self.names.append((module, name))
    return super().find_class(module, name)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_saved_objects_load_and_compute_the_same(path):
  saved = _load(path)
  runs = {name: run for name, (_, run) in build().items()}
  assert set(saved["objects"]) == set(runs), "make_pickles.build() and the fixture disagree"
  for name, blob in saved["objects"].items():
    got = as_numpy(runs[name](pickle.loads(blob)))
    # the same program on the same values, but compiled for another CPU when the
    # fixture was written: equal within the policy, not bitwise
    assert_trees_close(got, saved["expected"][name])


def _names_in(blobs):
  """Every ``(module, name)`` the pickled ``blobs`` name."""
  names = set()
  for blob in blobs:
    r = _Recorder(blob)
    r.load()
    names.update(r.names)
  return names


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_names_the_private_modules_of_each_layer(path):
  # what makes the fixture worth keeping: it names the modules a move would change
  modules = {m for m, _ in _names_in(_load(path)["objects"].values())}
  for layer in ("graph", "module", "nn", "training", "bridge"):
    assert any(m.startswith(f"nnx_eqx.{layer}.") for m in modules), layer


def test_pickles_name_only_public_or_stable_paths():
  # a later move of a private file must not break what is saved today
  import equinox as eqx
  import jax.numpy as jnp

  import nnx_eqx as nnx

  objects = [obj for obj, _ in build().values()]
  bn = nnx.Sequential(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), nnx.BatchNorm(3, rngs=nnx.Rngs(0)))
  objects += list(nnx.to_eqx_with_state(bn))
  objects.append(nnx.from_eqx(eqx.nn.Embedding(5, 2, key=jax.random.key(0))))
  objects.append(nnx.Dict(a=nnx.BatchStat(jnp.zeros(2)), b=nnx.Cache(jnp.ones(1))))
  objects.append(nnx.graphdef(nnx.Rngs(1)))
  names = {(m, n) for m, n in _names_in(map(pickle.dumps, objects)) if m.split(".")[0] == "nnx_eqx"}
  private = sorted(
    f"{m}.{n}"
    for m, n in names
    if m != "nnx_eqx._pickle_names" and any(p.startswith("_") for p in m.split("."))
  )
  assert not private, f"pickles name private modules (see nnx_eqx/_pickle_names.py): {private}"
  assert ("nnx_eqx", "Param") in names and ("nnx_eqx._pickle_names", "current_trace") in names


def test_old_private_paths_import_as_the_modules_that_replaced_them():
  import importlib
  import warnings

  from nnx_eqx._pickle_names import MOVED

  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for old, new in MOVED.items():
      module = importlib.import_module(old)
      assert module is importlib.import_module(new), old
      assert module.__spec__.name == new, old  # the module keeps its own spec
      assert module.__name__ == new, old


def test_public_classes_resolve_from_the_path_they_name():
  import sys

  import nnx_eqx as nnx

  checked = 0
  for name in dir(nnx):
    obj = getattr(nnx, name)
    if isinstance(obj, type) and obj.__module__.split(".")[0] == "nnx_eqx":
      home = sys.modules[obj.__module__]
      assert getattr(home, obj.__qualname__, None) is obj, f"{name}: {obj.__module__}"
      checked += 1
  assert checked > 50


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_a_fresh_process_loads_old_pickles_with_pickle_alone(path):
  # nothing imported beforehand: the old module paths are found through the package
  import os
  import subprocess
  import sys

  code = (
    "import pickle, sys\n"
    f"with open({str(path)!r}, 'rb') as f:\n"
    "  saved = pickle.load(f)\n"
    "for name, blob in saved['objects'].items():\n"
    "  pickle.loads(blob)\n"
    "print(sorted(m for m in sys.modules if m.startswith('nnx_eqx.graph._')))\n"
  )
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  out = subprocess.run(
    [sys.executable, "-W", "error", "-c", code],
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 0, out.stderr
  assert "nnx_eqx.graph._variables" in out.stdout  # loaded through an old path

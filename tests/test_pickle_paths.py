"""Pickles written by an earlier release load with the current tree and compute the same.

``tests/fixtures/pickles-0.1.0.pkl`` was written by nnx_eqx 0.1.0 (its private module paths:
``nnx_eqx.graph._variables``, ``nnx_eqx.graph._graphdef``, ``nnx_eqx.bridge._layers``, ...)
with ``tests/fixtures/make_pickles.py``. Every object in it must load and give the arrays
recorded when it was written.
"""

import io
import pathlib
import pickle

import jax
import numpy as np
import pytest
from fixtures.make_pickles import as_numpy, build

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
    want = saved["expected"][name]
    assert jax.tree.structure(got) == jax.tree.structure(want), name
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
      # the same operations on the same values, on the same backend: bitwise
      np.testing.assert_array_equal(a, b, err_msg=f"{path.name}: {name}")


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_names_the_private_modules_of_each_layer(path):
  # what makes the fixture worth keeping: it names the modules a move would change
  names = set()
  for blob in _load(path)["objects"].values():
    r = _Recorder(blob)
    r.load()
    names.update(m for m, _ in r.names)
  for layer in ("graph", "module", "nn", "training", "bridge"):
    assert any(m.startswith(f"nnx_eqx.{layer}.") for m in names), layer

"""Behaviour parity with flax.nnx on the module system.

``tests/parity/scenarios.py`` is written once against the flax.nnx API; its
results under flax.nnx 0.12 are recorded in ``flax_reference.json`` (regenerate
with ``tests/parity/generate.py`` where flax is installed). Here the same code
runs on nnx_eqx and must give the same paths, leaf counts per filter, sharing,
merge identity, Rngs counts and jit/grad propagation.
"""

import json
import pathlib
import sys

import pytest

import nnx_eqx as nnx

HERE = pathlib.Path(__file__).parent / "parity"
sys.path.insert(0, str(HERE))
from scenarios import run  # noqa: E402

REFERENCE = json.loads((HERE / "flax_reference.json").read_text())
OURS = run(nnx)


@pytest.mark.parametrize("key", sorted(k for k in REFERENCE if not k.startswith("_")))
def test_same_as_flax(key):
  assert OURS[key] == REFERENCE[key]


def test_every_scenario_is_compared():
  assert set(OURS) == {k for k in REFERENCE if not k.startswith("_")}

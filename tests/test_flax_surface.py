"""flax.nnx 0.12's public import surface, checked against nnx_eqx (without importing flax).

tests/parity/flax_surface_<version>.json lists every public module path and name of
flax.nnx of that version (0.12.8 and 0.12.12; regenerate with
``python tests/parity/flax_surface.py`` run by a Python with flax);
nnx_eqx._flax_missing lists, with reasons, the ones nnx_eqx does not provide
(asking for one raises nnx.OutOfScopeError with its reason).
"""

import importlib
import json
import pathlib

import pytest

import nnx_eqx as nnx
from nnx_eqx._flax_missing import MISSING

PARITY = pathlib.Path(__file__).parent / "parity"
VERSIONS = {
  json.loads(p.read_text())["_flax_version"]: json.loads(p.read_text())["modules"]
  for p in sorted(PARITY.glob("flax_surface_*.json"))
}
# The union over the measured versions: a name either version exports must be here.
SURFACE: dict[str, list[str]] = {}
for _modules in VERSIONS.values():
  for _path, _names in _modules.items():
    SURFACE[_path] = sorted({*SURFACE.get(_path, []), *_names})
MISSING_NAMES = {n for _, names in MISSING for n in names if ":" in n}
MISSING_MODULES = {n for _, names in MISSING for n in names if ":" not in n}


def _import(path: str):
  try:
    return importlib.import_module(path)
  except ModuleNotFoundError:
    return None


@pytest.mark.parametrize("path", sorted(SURFACE))
def test_module_path_and_names_import(path):
  module = _import(path)
  if path in MISSING_MODULES:
    assert module is None, f"{path} exists now: remove it from nnx_eqx/_flax_missing.py"
    return
  assert module is not None, f"no module {path}"
  absent = [n for n in SURFACE[path] if not hasattr(module, n)]
  unexpected = [n for n in absent if f"{path}:{n}" not in MISSING_NAMES]
  assert not unexpected, f"{path} lacks {unexpected}"
  provided = [n for n in SURFACE[path] if f"{path}:{n}" in MISSING_NAMES and hasattr(module, n)]
  assert not provided, f"{path} provides {provided}: remove them from nnx_eqx/_flax_missing.py"


@pytest.mark.parametrize("entry", sorted(MISSING_NAMES))
def test_each_name_not_provided_raises_out_of_scope_with_its_reason(entry):
  path, _, name = entry.partition(":")
  reason = next(r for r, names in MISSING if entry in names)
  with pytest.raises(nnx.OutOfScopeError, match="is not provided by nnx_eqx") as e:
    getattr(importlib.import_module(path), name)
  assert reason in str(e.value)


def test_missing_list_names_only_listed_entries():
  listed = {f"{path}:{n}" for path, names in SURFACE.items() for n in names}
  assert MISSING_NAMES <= listed, sorted(MISSING_NAMES - listed)
  assert MISSING_MODULES <= set(SURFACE), sorted(MISSING_MODULES - set(SURFACE))


def test_surface_counts():
  names = sum(len(v) for v in SURFACE.values())
  absent = len(MISSING_NAMES) + sum(len(SURFACE[m]) for m in MISSING_MODULES)
  assert {"0.12.8", "0.12.12"} <= set(VERSIONS)
  assert names > 700 and len(SURFACE) > 40
  assert (names - absent) / names > 0.6


def test_names_from_the_issue():
  """The imports issue 19 names, written as a flax user writes them."""
  from nnx_eqx.filterlib import to_predicate
  from nnx_eqx.graph import Key
  from nnx_eqx.nn.linear import default_embed_init
  from nnx_eqx.traversals import flatten_mapping, unflatten_mapping

  assert callable(to_predicate) and callable(default_embed_init) and Key is not None
  assert unflatten_mapping(flatten_mapping({"a": {"b": 1}})) == {"a": {"b": 1}}

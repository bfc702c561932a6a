"""flax.nnx 0.12's public import surface, checked against nnx_eqx (without importing flax).

tests/parity/flax_surface.json lists every public module path and name of flax.nnx
(regenerate with ``/work/flaxenv/bin/python tests/parity/flax_surface.py`` or any Python
with flax); tests/parity/flax_surface_missing.toml lists, with reasons, the ones nnx_eqx
does not provide.
"""

import importlib
import json
import pathlib
import tomllib

import pytest

PARITY = pathlib.Path(__file__).parent / "parity"
SURFACE = json.loads((PARITY / "flax_surface.json").read_text())["modules"]
MISSING = tomllib.loads((PARITY / "flax_surface_missing.toml").read_text())["missing"]
MISSING_NAMES = {n for group in MISSING for n in group.get("names", [])}
MISSING_MODULES = {m for group in MISSING for m in group.get("modules", [])}


def _import(path: str):
  try:
    return importlib.import_module(path)
  except ModuleNotFoundError:
    return None


@pytest.mark.parametrize("path", sorted(SURFACE))
def test_module_path_and_names_import(path):
  module = _import(path)
  if path in MISSING_MODULES:
    assert module is None, f"{path} exists now: remove it from flax_surface_missing.toml"
    return
  assert module is not None, f"no module {path}"
  absent = [n for n in SURFACE[path] if not hasattr(module, n)]
  unexpected = [n for n in absent if f"{path}:{n}" not in MISSING_NAMES]
  assert not unexpected, f"{path} lacks {unexpected}"
  provided = [n for n in SURFACE[path] if f"{path}:{n}" in MISSING_NAMES and hasattr(module, n)]
  assert not provided, f"{path} provides {provided}: remove them from flax_surface_missing.toml"


def test_missing_list_names_only_listed_entries():
  listed = {f"{path}:{n}" for path, names in SURFACE.items() for n in names}
  assert MISSING_NAMES <= listed, sorted(MISSING_NAMES - listed)
  assert MISSING_MODULES <= set(SURFACE), sorted(MISSING_MODULES - set(SURFACE))


def test_surface_counts():
  names = sum(len(v) for v in SURFACE.values())
  absent = len(MISSING_NAMES) + sum(len(SURFACE[m]) for m in MISSING_MODULES)
  assert names > 700 and len(SURFACE) > 40  # the list was generated from flax 0.12.8
  assert (names - absent) / names > 0.6


def test_names_from_the_issue():
  """The imports issue 19 names, written as a flax user writes them."""
  from nnx_eqx.filterlib import to_predicate
  from nnx_eqx.graph import Key
  from nnx_eqx.nn.linear import default_embed_init
  from nnx_eqx.traversals import flatten_mapping, unflatten_mapping

  assert callable(to_predicate) and callable(default_embed_init) and Key is not None
  assert unflatten_mapping(flatten_mapping({"a": {"b": 1}})) == {"a": {"b": 1}}

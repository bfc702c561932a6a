"""flax.nnx 0.12's public import surface, checked against nnx_eqx (without importing flax).

tests/parity/flax_surface_<version>.json lists every public module path and name of
flax.nnx of that version (0.12.8 and 0.12.12; regenerate with
``python tests/parity/flax_surface.py`` run by a Python with flax);
nnx_eqx._flax_missing lists, with reasons, the ones nnx_eqx does not provide
(asking for one raises nnx.OutOfScopeError with its reason).
"""

import importlib
import inspect
import json
import pathlib

import pytest

import nnx_eqx as nnx
from nnx_eqx._flax_missing import KEYWORDS_VIA_KWARGS, MISSING, MISSING_KEYWORDS

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


# --- keyword arguments ------------------------------------------------------------------
# Each JSON file also records the parameters of every public callable of flax.nnx
# (functions, classes' ``__init__``, Modules' ``__call__``) as "name:KIND". A parameter
# flax accepts must be accepted by nnx_eqx's counterpart: a named one under its name (and
# positionally where flax takes it positionally), ``*args``/``**kwargs`` by ours, a
# positional-only one by a positional slot. Names nnx_eqx takes through its own
# ``**kwargs`` count only when listed in KEYWORDS_VIA_KWARGS (a ``**kwargs`` that would
# swallow any name proves nothing); the others are listed in MISSING_KEYWORDS.
P = inspect.Parameter
# The union over the versions, newest first: a parameter's kind and place are the newest
# version's; one only an older version has is added after them.
SIGNATURES: dict[str, dict[str, str]] = {}  # callable -> parameter name -> kind
SIGNATURE_ORDER: dict[str, list[str]] = {}
for _version in sorted(VERSIONS, key=lambda v: tuple(map(int, v.split("."))), reverse=True):
  for _key, _params in (
    json.loads((PARITY / f"flax_surface_{_version}.json").read_text()).get("signatures", {}).items()
  ):
    SIGNATURES.setdefault(_key, {})  # also a callable without parameters
    for _entry in _params:
      _name, _, _kind = _entry.partition(":")
      SIGNATURES[_key].setdefault(_name, _kind)
      if _name not in SIGNATURE_ORDER.setdefault(_key, []):
        SIGNATURE_ORDER[_key].append(_name)


def _our_parameters(key: str) -> list[inspect.Parameter] | None:
  """The parameters of nnx_eqx's counterpart of flax's ``key``; None when nnx_eqx does
  not provide the name (the import-surface tests above cover that)."""
  path, _, rest = key.partition(":")
  name, _, method = rest.partition(".")
  if path in MISSING_MODULES or f"{path}:{name}" in MISSING_NAMES:
    return None
  obj = getattr(importlib.import_module(path), name)
  if method and not inspect.isclass(obj):  # flax's class is a function here
    return _parameters(obj, method=False) if method == "__init__" else []
  if method:
    own = [vars(k)[method] for k in obj.__mro__ if method in vars(k)]
    if not own:
      return []  # no such method (not the metaclass's __call__)
    params = _parameters(own[0], method=True)
  else:
    params = _parameters(obj, method=False)
  if method == "__init__" and {p.kind for p in params} <= {P.VAR_POSITIONAL, P.VAR_KEYWORD}:
    params = _parameters(obj, method=False)  # a generic __init__ (a NamedTuple's __new__)
  return params


class _NoSignature(Exception):
  """``inspect.signature`` cannot read it on this Python/jax (a typing alias, a C function)."""


def _parameters(fn, method: bool) -> list[inspect.Parameter]:
  try:
    params = list(inspect.signature(fn).parameters.values())
  except (TypeError, ValueError) as e:
    raise _NoSignature(str(e)) from e
  return params[1:] if method and params and params[0].kind is not P.VAR_POSITIONAL else params


def _accepted(name: str, kind: str, index: int, ours: list[inspect.Parameter]) -> bool:
  kinds = {p.kind for p in ours}
  positional = [p for p in ours if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
  by_name = {p.name: p for p in ours}
  if kind == "VAR_POSITIONAL":
    return P.VAR_POSITIONAL in kinds
  if kind == "VAR_KEYWORD":
    return P.VAR_KEYWORD in kinds
  if kind == "POSITIONAL_ONLY":
    return P.VAR_POSITIONAL in kinds or len(positional) > index
  if name not in by_name:
    return False
  if kind == "POSITIONAL_OR_KEYWORD":
    return by_name[name].kind is P.POSITIONAL_OR_KEYWORD
  return by_name[name].kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)


def _not_accepted(key: str) -> list[str]:
  ours = _our_parameters(key)
  if ours is None:
    return []
  order = SIGNATURE_ORDER.get(key, [])
  return [n for i, n in enumerate(order) if not _accepted(n, SIGNATURES[key][n], i, ours)]


@pytest.mark.parametrize("key", sorted(SIGNATURES))
def test_flax_keyword_arguments_are_accepted_or_listed(key):
  try:
    absent = _not_accepted(key)
  except _NoSignature as e:
    pytest.skip(f"{key}: no signature to read here ({e})")
  listed = {**MISSING_KEYWORDS.get(key, {}), **KEYWORDS_VIA_KWARGS.get(key, {})}
  unexpected = [n for n in absent if n not in listed]
  assert not unexpected, (
    f"{key}: flax accepts {unexpected}, nnx_eqx does not: accept them or list them with a "
    "reason in nnx_eqx/_flax_missing.py (MISSING_KEYWORDS)"
  )
  stale = [n for n in listed if n not in absent]
  assert not stale, f"{key}: {stale} are accepted now: remove them from nnx_eqx/_flax_missing.py"


@pytest.mark.parametrize("key", sorted(KEYWORDS_VIA_KWARGS))
def test_keywords_via_kwargs_reach_a_var_keyword(key):
  """A name listed as taken through ``**kwargs`` needs a ``**kwargs`` to arrive in."""
  ours = _our_parameters(key)
  assert ours is not None and any(p.kind is P.VAR_KEYWORD for p in ours), key


def test_keyword_tables_name_only_recorded_parameters():
  for table in (MISSING_KEYWORDS, KEYWORDS_VIA_KWARGS):
    for key, names in table.items():
      assert key in SIGNATURES, key
      assert set(names) <= set(SIGNATURES[key]), (key, set(names) - set(SIGNATURES[key]))
      assert all(isinstance(r, str) and len(r) > 20 for r in names.values()), key
  both = {(k, n) for k, ns in MISSING_KEYWORDS.items() for n in ns}
  assert not both & {(k, n) for k, ns in KEYWORDS_VIA_KWARGS.items() for n in ns}


def _readable(key: str) -> bool:
  try:
    return _our_parameters(key) is not None
  except _NoSignature:
    return False


def test_keyword_counts():
  compared = [k for k in SIGNATURES if _readable(k)]
  params = sum(len(SIGNATURES[k]) for k in compared)
  missing = sum(len(v) for v in MISSING_KEYWORDS.values())
  assert len(compared) > 250 and params > 1000
  assert missing / params < 0.1

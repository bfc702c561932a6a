"""The package's rooms: every folder small, documented, and described on the
architecture page as it is."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parent.parent
PACKAGE = ROOT / "nnx_eqx"
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
# flax's layer files and the package's public module paths may stay flat
FLAT = {PACKAGE, PACKAGE / "nn"}
ROOMS = [p for p in sorted(PACKAGE.rglob("*")) if p.is_dir() and (p / "__init__.py").exists()]


@pytest.mark.parametrize("folder", ROOMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_folder_is_small_and_says_what_lives_there(folder):
  modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
  if folder not in FLAT:
    assert len(modules) <= 15, f"{folder.relative_to(ROOT)}: {len(modules)} modules"
  doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
  assert doc and len(doc) > 80, f"{folder.relative_to(ROOT)}/__init__.py needs a docstring"


def test_architecture_page_names_every_room_and_module():
  missing = []
  for sub in ("graph", "transforms", "bridge"):
    for p in sorted((PACKAGE / sub).rglob("*.py")):
      if p.name == "__init__.py":
        rel = p.parent.relative_to(PACKAGE)
        if f"{rel.name}/" not in ARCHITECTURE:
          missing.append(f"{rel}/")
      elif p.name not in ARCHITECTURE:
        missing.append(str(p.relative_to(PACKAGE)))
  assert not missing, f"docs/architecture.md does not name: {missing}"


def test_no_two_modules_share_a_name_for_unrelated_jobs():
  # in the engine, transforms and bridge a module's name is unique in the package
  # (``_errors.py`` is each layer's exception module, ``__init__.py`` each package's face)
  shared = {"__init__.py", "_errors.py"}
  everywhere = [p for p in PACKAGE.rglob("*.py") if p.name not in shared]
  clashes = []
  for sub in ("graph", "transforms", "bridge"):
    for p in sorted((PACKAGE / sub).rglob("*.py")):
      others = [q for q in everywhere if q.name == p.name and q != p]
      clashes += [f"{p.relative_to(PACKAGE)} and {q.relative_to(PACKAGE)}" for q in others]
  assert not clashes, clashes

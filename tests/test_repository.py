"""The repository works from a fresh clone on any machine.

* No tracked file names a path that exists only on one machine: a home directory
  or a work directory (the development machine's). Tools take such paths from
  their arguments or the environment. Paths under the temporary directory in
  examples (``/tmp/run``) are fine: they exist everywhere.
* The package ships its license and its type information (``py.typed``), and the
  Python versions are stated the same way wherever they are stated.
"""

import pathlib
import re
import shutil
import subprocess
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# A home or work directory of one machine: the top-level folders work, root, home and
# Users (macOS), or a Windows drive's Users folder. Not preceded by a name character,
# so URLs (https://host/home/...) and relative paths (docs/home/) pass.
MACHINE_PATH = re.compile(
  r"(?<![\w.~/-])(?:/(?:work|root|home|Users)/|[A-Za-z]:\\Users\\)[\w.$-]", re.I
)

# (path, text) pairs that are allowed to match, with the reason. Keep it short.
ALLOWED: dict[str, str] = {}


def _tracked_files() -> list[pathlib.Path]:
  if shutil.which("git") is None or not (ROOT / ".git").exists():
    pytest.skip("not a git checkout (the check reads `git ls-files`)")
  out = subprocess.run(
    ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
  ).stdout.decode()
  return [ROOT / p for p in out.split("\0") if p and (ROOT / p).is_file()]


def machine_paths(text: str) -> list[str]:
  """The machine-specific paths in ``text``, one line of context each."""
  found = []
  for m in MACHINE_PATH.finditer(text):
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    found.append(text[start : end if end >= 0 else len(text)].strip())
  return found


def test_no_tracked_file_names_a_machine_specific_path():
  bad = []
  for path in _tracked_files():
    try:
      text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # images and other binary files
      continue
    rel = str(path.relative_to(ROOT))
    bad += [f"{rel}: {line}" for line in machine_paths(text) if (rel, line) not in ALLOWED]
  assert not bad, (
    "machine-specific paths in tracked files (take them from an argument or an "
    "environment variable instead):\n  " + "\n  ".join(bad)
  )


def test_the_path_check_can_fail():
  home, work = "/" + "home", "/" + "work"
  for text in (
    f"run {work}/env/bin/python",
    f"{home}/me/x",
    "C:\\" + "Users\\me",
    "/" + "Users/me",
  ):
    assert machine_paths(text), text
  for text in (
    "/tmp/run",
    "https://example.org/home/page",
    "docs/home/x",
    "~" + work + "/x",
    "/workspace",
  ):
    assert not machine_paths(text), text


def _project() -> dict:
  return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_license_and_type_information_are_shipped():
  project = _project()
  assert project["license"] == "Apache-2.0"
  assert project["license-files"] == ["LICENSE"]
  text = (ROOT / "LICENSE").read_text()
  assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
  assert (ROOT / "nnx_eqx" / "py.typed").exists()
  data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
  assert "py.typed" in data["package-data"]["nnx_eqx"]


def test_the_python_versions_are_stated_alike():
  """``requires-python`` has no upper cap; the classifiers, the README and the
  install page name the tested range, 3.11 to 3.13."""
  project = _project()
  assert project["requires-python"] == ">=3.11"
  classifiers = {
    c.rsplit(":: ", 1)[1] for c in project["classifiers"] if c.count("::") == 2 and "3." in c
  }
  assert classifiers == {"3.11", "3.12", "3.13"}
  for page in (ROOT / "README.md", ROOT / "docs" / "guides" / "install.md"):
    text = " ".join(page.read_text().split())
    assert "Python 3.11 to 3.13" in text, page


def _lower_bounds() -> dict[str, str]:
  return dict(re.fullmatch(r"([\w.-]+)>=([\d.]+)", d).groups() for d in _project()["dependencies"])


def test_the_floor_is_the_lowest_declared_versions_wherever_it_is_named():
  """ "floor" means one stack: Python 3.11 with every dependency at the lower bound
  ``pyproject.toml`` declares (what ``.ci/run`` installs as its lowest versions)."""
  low = _lower_bounds()
  row = next(
    line
    for line in (ROOT / "docs" / "guides" / "install.md").read_text().splitlines()
    if line.startswith("| floor")
  )
  assert [c.strip() for c in row.strip("|").split("|")][1:] == [
    "3.11",
    low["jax"],
    low["equinox"],
    low["optax"],
  ]
  readme = " ".join((ROOT / "README.md").read_text().split())
  floor = re.search(r"\* floor: ([^*]*)", readme)
  assert floor, "README: no '* floor:' line"
  for package in ("jax", "equinox", "optax"):
    assert f"{package} {low[package]}" in floor.group(1), package
  for page in (ROOT / "README.md", ROOT / "docs" / "guides" / "install.md"):
    uses = re.findall(r"[^.\n]*\bfloors?\b[^.\n]*", page.read_text())
    assert all("floors" not in u for u in uses), (page, uses)  # one stack, never two


def test_citation_metadata_agree_with_pyproject():
  yaml = pytest.importorskip("yaml")
  cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
  project = _project()
  assert cff["cff-version"] == "1.2.0"
  assert {"cff-version", "message", "title", "authors"} <= set(cff)
  assert cff["title"] == project["name"]
  assert cff["version"] == project["version"]
  assert cff["license"] == project["license"]
  assert [a["name"] for a in cff["authors"]] == [a["name"] for a in project["authors"]]


def test_the_changelog_has_a_section_for_the_current_version():
  text = (ROOT / "CHANGELOG.md").read_text()
  first = re.search(r"^## (.+)$", text, re.M)
  assert first, "CHANGELOG.md has no version section"
  section = text[first.start() : text.find("\n## ", first.end())]
  version = _project()["version"]
  released = first.group(1).startswith(f"[{version}]")
  assert released or (first.group(1) == "[Unreleased]" and version in section), first.group(1)


def test_project_files_for_contributors_exist_and_link_what_they_name():
  contributing = (ROOT / "CONTRIBUTING.md").read_text()
  for command in ("pytest", "ruff check", "ruff format --check", "mypy", "lint-imports"):
    assert f"\n{command}" in contributing or f"`{command}" in contributing, command
  for path in ("benchmarks/run_all.py", "tests/parity/flax_suite.py", "docs/architecture.md"):
    assert path in contributing and (ROOT / path).exists(), path
  assert "Python 3.11" in contributing and "3.13" in contributing

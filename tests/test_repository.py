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

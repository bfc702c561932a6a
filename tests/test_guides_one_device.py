"""The guides that build a mesh run as written on a machine with one device.

The test run has 8 fake CPU devices (``XLA_FLAGS`` in ``conftest.py``), and pytest
runs every page's doctest there. A reader's machine often has one device and none
of the test set-up, so here the same pages run again with Python's own doctest in
a fresh process on JAX's CPU backend without ``XLA_FLAGS``: one device, JAX's default
dtype promotion, no jaxtyping hook.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ["docs/guides/scale_equinox.md", "docs/guides/sharding.md"]

DRIVER = """
import doctest, json, sys
import jax

flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
results = {"devices": jax.device_count()}
for path in sys.argv[1:]:
  failed, attempted = doctest.testfile(path, module_relative=False, optionflags=flags)
  results[path] = [failed, attempted]
print(json.dumps(results))
"""


def _builds_a_mesh(page: pathlib.Path) -> bool:
  """A doctest example of the page calls ``jax.make_mesh`` (``saving.md`` shows a
  script that does, which ``tests/test_multihost.py`` runs)."""
  return any(
    line.lstrip().startswith((">>>", "...")) and "make_mesh" in line
    for line in page.read_text().splitlines()
  )


def test_every_page_whose_examples_build_a_mesh_is_checked_here():
  pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)
  with_mesh = {str(p.relative_to(ROOT)) for p in pages if _builds_a_mesh(p)}
  assert with_mesh == set(PAGES)
  assert not _builds_a_mesh(ROOT / "docs" / "guides" / "saving.md")


@pytest.mark.slow
def test_guides_with_a_mesh_run_on_one_device(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env["JAX_PLATFORMS"] = "cpu"
  proc = subprocess.run(
    [sys.executable, "-c", DRIVER, *(str(ROOT / p) for p in PAGES)],
    cwd=tmp_path,  # as a reader runs it: not from the checkout
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr[-5000:]
  results = json.loads(proc.stdout.strip().splitlines()[-1])
  assert results.pop("devices") == 1
  for page in PAGES:
    failed, attempted = results[str(ROOT / page)]
    assert attempted > 10, page
    assert failed == 0, f"{page}: {failed} of {attempted} examples failed\n{proc.stdout[-8000:]}"

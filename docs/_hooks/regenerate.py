"""Rewrite the generated sections of ``docs/**/*.md`` from their generators.

Usage, from anywhere (the checkout's ``nnx_eqx`` is imported)::

    python docs/_hooks/regenerate.py           # rewrite the pages whose sections changed
    python docs/_hooks/regenerate.py --check   # only list them; exit status 1 if any

The generators are ``mkdocs_hooks._GENERATED`` (the ``docs`` extra provides mkdocs,
which that module imports); the markers are described in ``generated.py``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
for path in (str(HERE), str(ROOT)):
  if path not in sys.path:
    sys.path.insert(0, path)

import generated  # noqa: E402
import mkdocs_hooks  # noqa: E402


def changed_pages(write: bool) -> list[str]:
  """The pages (relative to the repository) whose generated sections are not current,
  with the stale sections' names; rewritten first when ``write``."""
  out = []
  for page in generated.pages(ROOT):
    text = page.read_text()
    if "<!-- generated: " not in text:
      continue
    rel = str(page.relative_to(ROOT))
    generate = generated.generator(mkdocs_hooks._GENERATED, rel)
    names = generated.stale(text, generate)
    if not names:
      continue
    out.append(f"{rel} ({', '.join(names)})")
    if write:
      page.write_text(generated.fill(text, generate))
  return out


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true", help="list stale pages, write nothing")
  args = parser.parse_args(argv)
  pages = changed_pages(write=not args.check)
  verb = "not current" if args.check else "rewritten"
  for page in pages:
    print(f"{verb}: {page}")
  if not pages:
    print("every generated section is current")
  return 1 if args.check and pages else 0


if __name__ == "__main__":
  sys.exit(main())

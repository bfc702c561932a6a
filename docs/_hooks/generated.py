"""Generated sections of the Markdown pages: committed text, kept current by a command.

A page holds a generated section as

    <!-- generated: NAME -->

    ...the text the generator NAME gives (``mkdocs_hooks._GENERATED``)...

    <!-- end generated: NAME -->

so the page reads complete in the repository (on a code host, in an editor) and
the site renders the same text. ``python docs/_hooks/regenerate.py`` rewrites
every section from its generator (and fills a new, bare ``<!-- generated: NAME -->``
marker); ``tests/test_docs.py`` and the site build fail while a committed section
differs from what its generator gives now. A section may be indented (its markers
and every line of its text alike) to sit inside a block, such as a folded
``??? details`` block. This module only parses and writes the
markers; it imports nothing from the documentation tools.
"""

from __future__ import annotations

import pathlib
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

COMMAND = "python docs/_hooks/regenerate.py"
_OPEN = re.compile(r"^([ ]*)<!-- generated: ([\w-]+) -->[ \t]*$", re.M)


def _close(name: str) -> str:
  return f"<!-- end generated: {name} -->"


class Section(NamedTuple):
  """One generated section of a page: its generator's name and where it lies.

  ``start``/``end`` delimit the whole section, markers included; ``body`` is the
  text between the markers, without the blank lines around it and the section's
  indentation (``None`` for an opening marker with no closing one: a section not
  generated yet); ``indent`` is the spaces before the opening marker.
  """

  name: str
  start: int
  end: int
  body: str | None
  indent: str = ""


def sections(text: str) -> list[Section]:
  """The generated sections of ``text``, in order.

  Raises:
    ValueError: a closing marker without its opening one, or a section that
      holds another marker.
  """
  found = []
  pos = 0
  for m in _OPEN.finditer(text):
    if m.start() < pos:
      raise ValueError(f"generated section {m.group(2)!r} starts inside another one")
    indent, name = m.group(1), m.group(2)
    close = text.find(_close(name), m.end())
    nxt = _OPEN.search(text, m.end())
    if close < 0 or (nxt is not None and nxt.start() < close):
      found.append(Section(name, m.start(), m.end(), None, indent))
      pos = m.end()
      continue
    end = close + len(_close(name))
    body = textwrap.dedent(text[m.end() : close - len(indent)]).strip("\n")
    found.append(Section(name, m.start(), end, body, indent))
    pos = end
  for m in re.finditer(r"<!-- end generated: ([\w-]+) -->", text):
    if not any(s.start <= m.start() < s.end for s in found):
      raise ValueError(f"'{m.group(0)}' without its opening '<!-- generated: {m.group(1)} -->'")
  return found


def render(name: str, body: str, indent: str = "") -> str:
  """The committed form of section ``name`` holding ``body``, indented by ``indent``."""
  body = textwrap.indent(body.strip("\n"), indent)
  return f"{indent}<!-- generated: {name} -->\n\n{body}\n\n{indent}{_close(name)}"


def fill(text: str, generate: Callable[[str], str]) -> str:
  """``text`` with every generated section (and bare marker) holding ``generate(name)``."""
  out, pos = [], 0
  for s in sections(text):
    out += [text[pos : s.start], render(s.name, generate(s.name), s.indent)]
    pos = s.end
  return "".join(out) + text[pos:]


def stale(text: str, generate: Callable[[str], str]) -> list[str]:
  """The names of the sections of ``text`` that differ from ``generate(name)``."""
  return [s.name for s in sections(text) if generate(s.name).strip("\n") != s.body]


def generator(generators: Mapping[str, Callable[[], str]], page: str) -> Callable[[str], str]:
  """``generators`` as a function of the section name, caching each result.

  Raises:
    KeyError: a section names no generator (the message names the page).
  """
  cache: dict[str, str] = {}

  def generate(name: str) -> str:
    if name not in generators:
      raise KeyError(
        f"{page}: '<!-- generated: {name} -->' names no generator; "
        f"known: {', '.join(sorted(generators))}"
      )
    if name not in cache:
      cache[name] = generators[name]()
    return cache[name]

  return generate


def pages(root: pathlib.Path) -> Iterable[pathlib.Path]:
  """The Markdown pages that may hold generated sections: ``docs/**/*.md``."""
  return sorted(p for p in (root / "docs").rglob("*.md") if "_hooks" not in p.parts)

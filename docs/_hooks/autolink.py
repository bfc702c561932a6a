"""Inline code naming a public object links to its API entry on the site.

The guides write public names as inline code (`` `nnx.split` ``, `` `nnx.Module.sow` ``,
`` `nnx.from_eqx(model)` ``), which reads well in the repository. For the site, the mkdocs hook
turns each such span (outside code blocks, headings and existing links) into a
cross-reference that mkdocs-autorefs resolves to the entry mkdocstrings rendered:
``nnx.`` is ``nnx_eqx.``, and a name the reference documents under another path (an
alias such as ``nnx.ModuleDef``, or a name re-exported from a namespace) points at that
entry. The reference is *optional*: a name without an entry (a member the reference does
not list) stays plain code rather than failing the build.
"""

from __future__ import annotations

import html
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import api_coverage

_FENCE = re.compile(r"^([ \t]*)(```|~~~).*?^\1\2[ \t]*$", re.M | re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_HEADING = re.compile(r"^#{1,6}[ \t].*$", re.M)
# [text](target), [text][ref], [text][] (a code span inside is already a link)
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\](?:\([^)]*\)|\[[^\]]*\])")
_CODE = re.compile(r"(?<!`)`(?P<name>nnx(?:_eqx)?(?:\.[A-Za-z_]\w*)+)(?P<call>\([^`]*\))?`(?!`)")


def entries(pages: list[pathlib.Path]) -> dict[str, str]:
  """``{public path: path of the entry that documents its object}`` for every name
  with an entry (``nnx_eqx.from_eqx`` -> ``nnx_eqx.from_eqx``; an alias -> its entry)."""
  rendered: dict[str, Any] = {}
  for page in pages:
    for path in api_coverage._DIRECTIVE.findall(page.read_text()):
      rendered[path] = api_coverage._resolve(path)
  by_id = {id(obj): path for path, obj in rendered.items()}
  out = dict(zip(rendered, rendered))
  for path, obj in api_coverage.public_names().items():
    entry = by_id.get(id(obj))
    if entry is not None:
      out.setdefault(path, entry)
  return out


def identifier(name: str, table: Mapping[str, str]) -> str | None:
  """The entry's identifier for ``nnx.X.y`` (the longest documented prefix, then members)."""
  parts = re.sub(r"^nnx\.", "nnx_eqx.", name).split(".")
  for i in range(len(parts), 1, -1):
    entry = table.get(".".join(parts[:i]))
    if entry is not None:
      return ".".join([entry, *parts[i:]])
  return None


def _skipped(markdown: str) -> list[tuple[int, int]]:
  spans = []
  for pattern in (_FENCE, _COMMENT, _HEADING, _LINK):
    spans += [m.span() for m in pattern.finditer(markdown)]
  return sorted(spans)


def link_names(markdown: str, table: Mapping[str, str]) -> str:
  """``markdown`` with each inline public name made an optional autorefs reference."""
  skipped = _skipped(markdown)

  def inside(pos: int) -> bool:
    return any(a <= pos < b for a, b in skipped)

  def replace(m: re.Match) -> str:
    ident = identifier(m["name"], table)
    if ident is None or inside(m.start()):
      return m.group(0)
    code = html.escape(m["name"] + (m["call"] or ""))
    return f'<autoref identifier="{ident}" optional><code>{code}</code></autoref>'

  return _CODE.sub(replace, markdown)

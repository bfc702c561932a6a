"""A griffe extension: reads the library's Google-style docstrings as written.

Four conventions of the library that griffe's Google parser reads otherwise:

* an ``Args:`` entry may document several parameters at once
  (``kernel_metadata, bias_metadata: metadata of the Params``); griffe expects
  one name per entry, so such an entry is repeated for each name;
* ``Example:`` (singular) holds doctests; griffe renders only ``Examples:`` as
  code, so the heading is read as ``Examples:``;
* Sphinx roles (``:class:`nnx.Rngs```) are shown as code (`` `nnx.Rngs` ``);
* a ``Raises:`` entry may be prose (``Whatever fn raises; the caller's modules
  are then unchanged.``); it is read as an ``Exception:`` entry.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?([^`]+)`")
_SECTIONS = ("Args:", "Arguments:", "Attributes:", "Keyword Args:", "Other Parameters:")
_WRAPPED = re.compile(r"^\s+\w+(?:, *\w+)*,\s*$")
_MULTI = re.compile(r"^(\s+)(\w+(?:, *\w+)+)( *\([^)]*\))?:(.*)$")


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip())


def split_multi_names(text: str) -> str:
  """Repeats an ``a, b: description`` entry (with its continuation) for each name."""
  lines = text.splitlines()
  out: list[str] = []
  section_indent = None
  i = 0
  while i < len(lines):
    line = lines[i]
    stripped = line.strip()
    indent = len(line) - len(line.lstrip())
    if stripped in _SECTIONS:
      section_indent = indent
    elif stripped and section_indent is not None and indent <= section_indent:
      section_indent = None
    m = _MULTI.match(line) if section_indent is not None else None
    if m is None and section_indent is not None and _WRAPPED.match(line):
      # the list of names wraps: ``a, b,`` / ``c: description``
      joined, j = line.rstrip(), i + 1
      while j < len(lines) and _WRAPPED.match(joined) and lines[j].strip():
        joined, j = joined + " " + lines[j].strip(), j + 1
      m = _MULTI.match(joined)
      if m is not None:
        lines[i:j] = [joined]
    if m is None:
      out.append(line)
      i += 1
      continue
    body = [m.group(4)]
    j = i + 1
    while j < len(lines) and lines[j].strip() and _indent(lines[j]) > len(m.group(1)):
      body.append(lines[j])
      j += 1
    for name in m.group(2).split(","):
      out.append(f"{m.group(1)}{name.strip()}{m.group(3) or ''}:{body[0]}")
      out.extend(body[1:])
    i = j
  return "\n".join(out)


def prose_raises(text: str) -> str:
  """A ``Raises:`` entry that does not start with ``Name:`` becomes ``Exception: ...``."""
  lines = text.splitlines()
  section_indent = None
  item_indent = None
  for i, line in enumerate(lines):
    stripped = line.strip()
    indent = len(line) - len(line.lstrip())
    if stripped == "Raises:":
      section_indent, item_indent = indent, None
      continue
    if section_indent is None or not stripped:
      continue
    if indent <= section_indent:
      section_indent = None
      continue
    item_indent = indent if item_indent is None else item_indent
    if indent == item_indent and not re.match(r"^[\w.]+:", stripped):
      lines[i] = f"{line[:indent]}Exception: {stripped}"
  return "\n".join(lines)


def rewrite(text: str) -> str:
  text = _ROLE.sub(r"`\1`", _EXAMPLE.sub(r"\1Examples:", text))
  return prose_raises(split_multi_names(text))


class MultiNameArgs(griffe.Extension):
  def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
    if obj.docstring is not None:
      obj.docstring.value = rewrite(obj.docstring.value)

"""The code on the documentation pages is shown whole and can be copied as it is.

* no line of a fenced code block in ``docs/**/*.md`` (or the README) is wider than
  88 characters, the width a page's code column shows without scrolling;
* every ``>>>`` example sits in a ``pycon`` fence (highlighted as a console
  session; ``docs/javascripts/pycon_copy.js`` makes the copy button copy only the
  code), so pytest's doctests (``--doctest-glob=*.md``, which read ``>>>`` wherever
  it is) run every example the site shows;
* the copy filter keeps the code lines of an example and drops the rest;
* no example shows ``<BLANKLINE>``: an example whose output has a blank line ends
  before it instead.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = sorted(
  [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)]
)
WIDTH = 88
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def fenced_blocks(text: str) -> list[tuple[int, str, list[str]]]:
  """The fenced code blocks of a Markdown text: (first line number, language, lines)."""
  blocks, open_fence, lang, start, body = [], None, "", 0, []
  for number, line in enumerate(text.splitlines(), 1):
    m = _FENCE.match(line)
    if open_fence is None:
      if m:
        open_fence, lang, start, body = m.group(2), m.group(3), number + 1, []
    elif m and m.group(2).startswith(open_fence) and not line[m.end() :].strip() and not m.group(3):
      blocks.append((start, lang, body))
      open_fence = None
    else:
      body.append(line)
  assert open_fence is None, f"a code fence opened at line {start - 1} is never closed"
  return blocks


def _ids(pages):
  return [str(p.relative_to(ROOT)) for p in pages]


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_code_lines_fit_the_page(page):
  wide = [
    f"{page.relative_to(ROOT)}:{start + i}: {len(line)} characters"
    for start, _, body in fenced_blocks(page.read_text())
    for i, line in enumerate(body)
    if len(line) > WIDTH
  ]
  assert not wide, f"code lines wider than {WIDTH} characters:\n  " + "\n  ".join(wide)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_examples_are_pycon_blocks_without_blanklines(page):
  text = page.read_text()
  for start, lang, body in fenced_blocks(text):
    if any(line.lstrip().startswith(">>>") for line in body):
      assert lang == "pycon", f"{page.name}:{start}: a >>> example fenced as {lang!r}, not pycon"
  assert "<BLANKLINE>" not in text, f"{page.name}: end the example before its blank output line"


def test_the_checks_can_fail():
  page = "text\n\n```python\n>>> x = 1\n>>> print('" + "a" * 90 + "')\n\n```\n"
  ((start, lang, body),) = fenced_blocks(page)
  assert (start, lang, len(body)) == (4, "python", 3)
  assert max(map(len, body)) > WIDTH
  with pytest.raises(AssertionError, match="never closed"):
    fenced_blocks("```pycon\n>>> 1\n")


def test_doctests_read_examples_in_pycon_fences():
  """pytest's ``--doctest-glob`` parser finds ``>>>`` whatever the fence's language."""
  import doctest

  (example,) = doctest.DocTestParser().get_examples("```pycon\n>>> 1 + 1\n2\n\n```\n")
  assert (example.source, example.want) == ("1 + 1\n", "2\n")


def test_the_copy_button_copies_the_code_of_an_example():
  """``docs/javascripts/pycon_copy.js`` drops prompts and output (run with node)."""
  import json
  import shutil
  import subprocess

  node = shutil.which("node")
  if node is None:
    pytest.skip("node is not installed: the copy filter is checked where it is")
  example = ">>> @jax.jit\n... def f(x):\n...   return x\n>>> f(1)\nArray(1)\n>>> print('a')\na\n\n"
  script = ROOT / "docs" / "javascripts" / "pycon_copy.js"
  call = (
    f"console.log(JSON.stringify(require({json.dumps(str(script))}).pyconCode(process.argv[1])))"
  )
  out = subprocess.run([node, "-e", call, example], capture_output=True, text=True, check=True)
  assert json.loads(out.stdout) == "@jax.jit\ndef f(x):\n  return x\nf(1)\nprint('a')\n"

"""Relative links of the Markdown pages: parsed, checked, and mapped into the site.

Pages link files by their path in the repository, so every link works where the
page is read on a code host or in an editor. The site holds only ``docs/`` plus
what the mkdocs hook adds: the executed notebooks (``notebooks/NAME.py`` is
rendered as ``notebooks/NAME.ipynb``) and the benchmark plots
(``benchmarks/results/*.png``). ``site_target`` maps a repository path to the
site's, and the hook rewrites each link that leaves ``docs/`` with it (a link to
a file the site does not hold becomes its text);
``tests/test_doc_links.py`` checks every relative link and ``#anchor``.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata

_FENCE = re.compile(r"^( {0,3})(```|~~~).*?^\1\2[ \t]*$", re.M | re.S)
_CODE = re.compile(r"(`+).+?\1", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# [text](target) and ![alt](target), with an optional "title"; <target> forms too.
_LINK = re.compile(r"(!?\[(?:[^\[\]]|\[[^\]]*\])*\]\()\s*<?([^)\s>]+)>?((?:\s+\"[^\"]*\")?\s*\))")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


def _blank(m: re.Match) -> str:
  return re.sub(r"[^\n]", " ", m.group(0))


def prose(text: str) -> str:
  """``text`` with code blocks, inline code and comments blanked (same offsets)."""
  return _CODE.sub(_blank, _COMMENT.sub(_blank, _FENCE.sub(_blank, text)))


def links(text: str) -> list[str]:
  """The link targets of ``text`` outside code, relative ones and anchors included."""
  return [m.group(2) for m in _LINK.finditer(prose(text))]


def is_relative(target: str) -> bool:
  return not _EXTERNAL.match(target) and not target.startswith("/")


def slug(heading: str) -> str:
  """The anchor of a heading as Python-Markdown's ``toc`` makes it (mkdocs)."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
  text = re.sub(r"[`*]|<[^>]+>", "", text)
  text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
  text = re.sub(r"[^\w\s-]", "", text).strip().lower()
  return re.sub(r"[-\s]+", "-", text)


def github_slug(heading: str) -> str:
  """The anchor of a heading as GitHub makes it (no runs of hyphens collapsed)."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
  text = re.sub(r"[`*]|<[^>]+>", "", text).strip().lower()
  return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(text: str) -> set[str]:
  """The anchors of ``text``'s headings that mkdocs and GitHub both make."""
  blocks = _COMMENT.sub(_blank, _FENCE.sub(_blank, text))  # headings keep their code
  heads = [m.group(2) for m in _HEADING.finditer(blocks)]
  return {slug(h) for h in heads} & {github_slug(h) for h in heads}


def site_target(repo_path: str) -> str | None:
  """Where the site holds the repository file ``repo_path`` (posix, relative to the
  repository root), relative to the site root; ``None`` where it holds no copy."""
  if repo_path.startswith("docs/"):
    return repo_path[len("docs/") :]
  m = re.fullmatch(r"notebooks/(\d\d_\w+)\.py", repo_path)
  if m:
    return f"notebooks/{m.group(1)}.ipynb"
  if re.fullmatch(r"benchmarks/results/[\w.-]+\.png", repo_path):
    return repo_path
  return None


def for_site(text: str, page: str) -> str:
  """``text`` of the page at ``page`` (posix, relative to the repository root, under
  ``docs/``) with each link that leaves ``docs/`` pointing at the site's copy.

  A link to another file of the repository becomes its text alone.

  Raises:
    ValueError: an image outside ``docs/`` that the site has no copy of.
  """
  base = posixpath.dirname(page)
  out, pos = [], 0
  for m in _LINK.finditer(prose(text)):  # links outside code; their text may hold code
    opening, target, closing = (text[m.start(i) : m.end(i)] for i in (1, 2, 3))
    path, _, anchor = target.partition("#")
    if not path or not is_relative(target):
      continue
    repo_path = posixpath.normpath(posixpath.join(base, path))
    if repo_path.startswith("docs/"):
      continue
    site = site_target(repo_path)
    if site is None and opening.startswith("!"):
      raise ValueError(
        f"{page}: the image {target} is outside docs/ and the site holds no copy "
        "(docs/_hooks/links.py site_target lists the files it holds)"
      )
    if site is None:
      new = opening[1:-2]  # the site has no copy: the link's text alone
    else:
      rel = posixpath.relpath(site, posixpath.dirname(page[len("docs/") :]) or ".")
      new = f"{opening}{rel}{'#' + anchor if anchor else ''}{closing}"
    out += [text[pos : m.start()], new]
    pos = m.end()
  return "".join(out) + text[pos:]

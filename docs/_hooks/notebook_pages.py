"""What the site changes in the notebook pages mkdocs-jupyter renders.

* A relative link or image in a notebook's output (``display(Markdown(...))`` of a
  report with ``../benchmarks/results/plot.png``) is written, as Jupyter reads it,
  relative to the notebook's folder; the page is one folder deeper
  (``notebooks/NAME/``). A relative URL that names no file of the site from the page
  but does from the notebook's folder is rewritten to reach it from the page.
* mkdocs-jupyter adds to each notebook page a loader that fetches MathJax from a CDN;
  a page without math (``\\(``, ``\\[``, ``$$``) does not get it, so reading the
  notebooks needs no other host.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Container

_URL = re.compile(r'(?P<attr>\b(?:src|href))="(?P<url>[^"#?:]+)(?P<rest>[#?][^"]*)?"')
_MATHJAX = re.compile(r"<script data-mkdocs-jupyter-mathjax=.*?</script>\s*", re.S)
_MATH = re.compile(r"\\\(|\\\[|\$\$")


def _target(folder: str, url: str) -> str:
  path = posixpath.normpath(posixpath.join(folder, url))
  return posixpath.join(path, "index.html") if url.endswith("/") else path


def fix_relative_urls(html: str, page_url: str, notebook_src: str, site: Container[str]) -> str:
  """``html`` of the page at ``page_url`` (``notebooks/NAME/``) with the URLs written
  relative to ``notebook_src``'s folder made relative to the page."""
  page_dir = page_url.rstrip("/")
  nb_dir = posixpath.dirname(notebook_src)

  def fix(m: re.Match) -> str:
    url = m["url"]
    if url.startswith("/") or _target(page_dir, url) in site:
      return m.group(0)
    target = _target(nb_dir, url)
    if target not in site:
      return m.group(0)
    new = posixpath.relpath(target, page_dir or ".")
    return f'{m["attr"]}="{new}{m["rest"] or ""}"'

  return _URL.sub(fix, html)


def drop_unused_mathjax(html: str) -> str:
  body = _MATHJAX.sub("", html)
  return html if _MATH.search(body) else body

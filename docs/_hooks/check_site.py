"""Checks a built site (``mkdocs build``'s output folder) for what a reader would see broken.

    python docs/_hooks/check_site.py SITE_DIR

* every internal ``href``/``src`` (links, images, scripts, stylesheets) names a file
  of the site, and every ``#anchor`` an ``id`` on the page it points to;
* no page shows a Python object's default repr (``<object object at 0x7f...>``,
  ``<function f at 0x...>``): it
  differs between builds and tells a reader nothing;
* every public name a guide writes as inline code links to an API entry (the mkdocs hook
  makes it a reference, ``autolink.py``; one without an entry is left as plain text);
* no API entry shows a built-in type's docstring (``str(object='') -> str``, ``dict() ->
  new empty dictionary``, ...), which is what an undocumented constant or class
  attribute of a built-in type inherits;
* the search index splits code names into words (``nnx.LostUpdateError`` is found by
  ``LostUpdateError``, ``Update``) and holds the API entries, boosted above the guides
  (``browser_check.py`` checks the ranking in a browser).

Prints one line per problem and exits with status 1 if there is any.
"""

from __future__ import annotations

import builtins
import html
import html.parser
import json
import pathlib
import posixpath
import re
import sys
import urllib.parse

# <object object at 0x7f...>, <function f at 0x...>
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,}")
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
_LINKING = {"href", "src"}


def builtin_docstrings() -> list[str]:
  """The first line of each built-in type's docstring, as a page would show it."""
  firsts = set()
  singletons = [type(None), type(...), type(NotImplemented)]
  for obj in [*vars(builtins).values(), *singletons]:
    if isinstance(obj, type) and obj.__doc__ and not issubclass(obj, BaseException):
      first = obj.__doc__.strip().splitlines()[0].strip()
      if len(first) > 12:  # long enough not to occur in prose by chance
        firsts.add(first)
  return sorted(firsts)


class _Page(html.parser.HTMLParser):
  def __init__(self) -> None:
    super().__init__(convert_charrefs=True)
    self.ids: set[str] = set()
    self.targets: list[tuple[str, str]] = []  # (tag, url)
    self.unlinked: list[str] = []
    self.text: dict[str, list[str]] = {"": []}  # by the heading it follows
    self._heading = ""
    self._skip = 0

  def handle_starttag(self, tag, attrs):
    for name, value in attrs:
      if name in ("id", "name") and value and tag != "meta" and tag != "input":
        self.ids.add(value)
      elif name == "title" and tag == "span" and value and value.startswith("nnx_eqx."):
        self.unlinked.append(value)  # what autorefs leaves of a reference it cannot resolve
      elif name in _LINKING and value is not None:
        self.targets.append((tag, value))
    if tag in ("script", "style"):
      self._skip += 1
    ident = dict(attrs).get("id")
    if re.fullmatch(r"h[1-6]", tag) and ident:
      self._heading = ident
      self.text.setdefault(ident, [])

  def handle_endtag(self, tag):
    if tag in ("script", "style") and self._skip:
      self._skip -= 1

  def handle_data(self, data):
    if not self._skip:
      self.text[self._heading].append(data)


def _parse(path: pathlib.Path) -> _Page:
  page = _Page()
  page.feed(path.read_text(encoding="utf-8"))
  page.close()
  return page


def _resolve(site: pathlib.Path, page: pathlib.Path, url: str) -> tuple[pathlib.Path, str]:
  """The file an internal URL of ``page`` names, and its fragment."""
  parts = urllib.parse.urlsplit(url)
  path = urllib.parse.unquote(parts.path)
  if not path:
    return page, parts.fragment
  base = "" if path.startswith("/") else posixpath.dirname(page.relative_to(site).as_posix())
  rel = posixpath.normpath(posixpath.join(base, path.lstrip("/")))
  target = site / rel
  if path.endswith("/") or target.is_dir():
    target = target / "index.html"
  return target, urllib.parse.unquote(parts.fragment)


def check(site: pathlib.Path) -> list[str]:
  problems: list[str] = []
  pages = {p: _parse(p) for p in sorted(site.rglob("*.html"))}
  docstrings = builtin_docstrings()
  for path, page in pages.items():
    where = path.relative_to(site).as_posix()
    for tag, url in page.targets:
      if _EXTERNAL.match(url) or url.startswith(("data:", "javascript:")):
        continue
      target, fragment = _resolve(site, path, url)
      if not target.resolve().is_relative_to(site.resolve()):
        problems.append(f"{where}: <{tag}> {url}: outside the site")
      elif not target.is_file():
        problems.append(f"{where}: <{tag}> {url}: no such file")
      elif fragment and target.suffix == ".html":
        ids = pages[target].ids if target in pages else _parse(target).ids
        if fragment not in ids:
          problems.append(f"{where}: <{tag}> {url}: no #{fragment} on that page")
    if not where.startswith("api/"):  # the reference's signatures may name private types
      for name in sorted(set(page.unlinked)):
        problems.append(f"{where}: `{name}` is not linked: the API reference has no entry for it")
    for heading, chunks in page.text.items():
      text = html.unescape("".join(chunks))
      at = f"{where}#{heading}"
      for m in _ADDRESS.finditer(text):
        context = " ".join(text[max(0, m.start() - 60) : m.end()].split())
        problems.append(f"{at}: an object's address is shown: ...{context}")
      for doc in docstrings:
        if doc in text:
          problems.append(f"{at}: a built-in type's docstring is shown: {doc!r}")
  return problems


# a public name and the words the search index must make of it (so a query for any
# of them finds the name), and the entries the index must hold
_TOKENS = {"nnx.LostUpdateError(x)": ["nnx", "Lost", "Update", "Error", "x"]}
_ENTRIES = ("nnx_eqx.LostUpdateError", "nnx_eqx.bridge.from_eqx", "nnx_eqx.split_rngs")


def check_search_index(site: pathlib.Path) -> list[str]:
  """The search index splits code names into words and holds the API entries, boosted."""
  index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
  separator = index["config"]["separator"]
  problems = []
  for text, words in _TOKENS.items():
    got = [t for t in re.split(separator, text) if t]
    if got != words:
      problems.append(f"search index: separator {separator!r} makes {got} of {text!r}, not {words}")
  docs = {d["location"].rsplit("#", 1)[-1]: d for d in index["docs"]}
  for anchor in _ENTRIES:
    if anchor not in docs:
      problems.append(f"search index: no entry #{anchor}")
    elif docs[anchor].get("boost", 1) <= 1:
      problems.append(f"search index: #{anchor} is not boosted above the guides")
  return problems


def main(argv: list[str]) -> int:
  if len(argv) != 1:
    print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
    return 2
  site = pathlib.Path(argv[0])
  if not (site / "index.html").is_file():
    print(f"{site}: no index.html; build the site first", file=sys.stderr)
    return 2
  problems = check(site) + check_search_index(site)
  for p in problems:
    print(p)
  n = len(list(site.rglob("*.html")))
  print(f"{len(problems)} problems in {n} pages of {site}")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))

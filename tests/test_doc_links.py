"""Every relative link of the Markdown pages leads somewhere, in the repository and on the site.

The pages are read in the repository (on a code host, in an editor) as well as on
the documentation site, so a link names the file's path in the repository
(``../../notebooks/01_getting_started.py``), and an ``#anchor`` a heading of its
page as both mkdocs and GitHub spell it. The site build points links that leave
``docs/`` at the site's copies (``docs/_hooks/links.py``), and only images need
one: this test checks both.
"""

import importlib.util
import pathlib
import posixpath

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load(name: str):
  spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_hooks" / f"{name}.py")
  assert spec is not None and spec.loader is not None
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


links = _load("links")

PAGES = sorted(
  {
    *ROOT.glob("*.md"),  # README, CHANGELOG, CONTRIBUTING
    *(ROOT / "docs").rglob("*.md"),
    *(ROOT / "benchmarks").rglob("*.md"),
    *(ROOT / "tests").rglob("*.md"),
    *(ROOT / "examples").rglob("*.md"),
    *(ROOT / "notebooks").rglob("*.md"),
  }
)


def broken_links(page: pathlib.Path) -> list[str]:
  """The relative links of ``page`` whose file or ``#anchor`` does not exist."""
  bad = []
  for target in links.links(page.read_text()):
    if not links.is_relative(target):
      continue
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
      bad.append(f"{target}: no such file")
    elif anchor and dest.suffix == ".md" and anchor not in links.anchors(dest.read_text()):
      bad.append(f"{target}: no heading with this anchor in {dest.name}")
  return bad


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_lead_to_existing_files_and_headings(page):
  bad = broken_links(page)
  assert not bad, f"{page.relative_to(ROOT)}:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize(
  "page",
  [p for p in PAGES if p.is_relative_to(ROOT / "docs")],
  ids=[str(p.relative_to(ROOT)) for p in PAGES if p.is_relative_to(ROOT / "docs")],
)
def test_the_site_holds_what_each_docs_page_links(page):
  """Links that leave ``docs/`` become the site's copies (or their text alone) and
  every link of the page as the site renders it names a file the site holds."""
  site_files = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*")}
  for p in [*(ROOT / "notebooks").glob("*.py"), *(ROOT / "benchmarks").rglob("*.png")]:
    target = links.site_target(str(p.relative_to(ROOT)))
    if target is not None:
      site_files.add(target)
  rel = page.relative_to(ROOT / "docs")
  for target in links.links(links.for_site(page.read_text(), f"docs/{rel}")):
    path = target.partition("#")[0]
    if path and links.is_relative(target):
      dest = posixpath.normpath(posixpath.join(posixpath.dirname(str(rel)), path))
      assert dest in site_files, f"docs/{rel}: {target} is not in the site"


def test_the_link_check_can_fail(tmp_path):
  (tmp_path / "a.md").write_text("# Title here\n\n## A `code` heading\n")
  page = tmp_path / "b.md"
  page.write_text(
    "[ok](a.md) [ok](a.md#title-here) [ok](a.md#a-code-heading) [ok](#local)\n"
    "[gone](missing.md) [bad anchor](a.md#nope) [bad local](#elsewhere)\n"
    "`[in code](missing2.md)`\n\n```\n[in a block](missing3.md)\n```\n\n"
    "# Local\n[web](https://example.org/x.md)\n"
  )
  assert broken_links(page) == [
    "missing.md: no such file",
    "a.md#nope: no heading with this anchor in a.md",
    "#elsewhere: no heading with this anchor in b.md",
  ]


def test_links_leaving_docs_point_at_the_site_copies():
  text = (
    "[nb](../../notebooks/01_getting_started.py) "
    "![plot](../../benchmarks/results/pytree.png) "
    "[`benchmarks/README.md`](../../benchmarks/README.md) [page](other.md#x)\n"
  )
  out = links.for_site(text, "docs/guides/page.md")
  assert out == (
    "[nb](../notebooks/01_getting_started.ipynb) "
    "![plot](../benchmarks/results/pytree.png) "
    "`benchmarks/README.md` [page](other.md#x)\n"
  )
  with pytest.raises(ValueError, match="examples/x.png"):
    links.for_site("![x](../../examples/x.png)", "docs/guides/page.md")

"""The documentation site (``docs/``, ``mkdocs.yml``) covers the library and stays runnable.

* every public name (``docs/_hooks/api_coverage.py``: the package root and the
  ``bridge``/``testing``/``checkpoint``/``metrics``/flax-compatible namespaces)
  has a docstring and an entry in the API reference pages, and every ``:::``
  directive there names an existing object;
* every page is in the navigation and every navigation entry exists;
* every ``pycon`` block in the docs is a doctest (``>>>``), so pytest's doctests over
  ``docs/**/*.md`` run everything the site shows (``tests/test_doc_code_blocks.py``
  checks that every ``>>>`` example is in one);
* the generated list of flax.nnx differences names every failing flax test;
* every generated section committed in a page (``docs/_hooks/generated.py``) is
  what its generator gives now (``python docs/_hooks/regenerate.py`` rewrites them).

``mkdocs build --strict`` (in ``.ci/run``) checks links and references and runs
the same coverage check as a build hook.
"""

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HOOKS = DOCS / "_hooks"


def _load(name: str):
  spec = importlib.util.spec_from_file_location(name, HOOKS / f"{name}.py")
  assert spec is not None and spec.loader is not None
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


api_coverage = _load("api_coverage")
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)


def test_every_public_name_is_in_the_api_reference():
  missing = api_coverage.missing_from(api_coverage.api_pages(DOCS))
  assert not missing, "add these to a page in docs/api/ (`::: path`):\n" + "\n".join(missing)


def test_every_public_name_has_a_docstring():
  assert not api_coverage.undocumented()


def test_the_coverage_check_can_fail(tmp_path):
  page = "# One\n\n::: nnx_eqx.Linear\n\n::: nnx_eqx.GraphDef\n\n`nnx.ModuleDef` `nnx.relu`\n"
  (tmp_path / "one.md").write_text(page + "`nnx.Conv` is mentioned, not rendered.\n")
  missing = api_coverage.missing_from([tmp_path / "one.md"])
  assert "nnx_eqx.Linear" not in missing and "nnx_eqx.ModuleDef" not in missing  # an alias
  assert "nnx_eqx.relu" not in missing  # a JAX function: a mention (with a link) is enough
  assert "nnx_eqx.Conv" in missing  # a class of nnx_eqx needs its docstring on a page
  assert "nnx_eqx.bridge.register" in missing and "nnx_eqx.PureModule" in missing


def test_every_api_directive_resolves():
  for page in api_coverage.api_pages(DOCS):
    for path in re.findall(r"^::: +([\w.]+)", page.read_text(), re.M):
      api_coverage._resolve(path)  # raises AttributeError naming the missing name


def _nav_files(entry) -> list[str]:
  if isinstance(entry, str):
    return [entry]
  if isinstance(entry, list):
    return [f for e in entry for f in _nav_files(e)]
  if isinstance(entry, dict):
    return [f for v in entry.values() for f in _nav_files(v)]
  return []


def test_every_page_is_in_the_navigation():
  yaml = pytest.importorskip("yaml")
  config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
  nav = set(_nav_files(config["nav"]))
  pages = {str(p.relative_to(DOCS)) for p in PAGES}
  assert pages - nav == set(), "pages missing from mkdocs.yml nav"
  notebooks = {f"notebooks/{p.stem}.ipynb" for p in (ROOT / "notebooks").glob("[0-9]*.py")}
  assert nav - pages == notebooks, "nav entries without a page (or a notebook without one)"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_pycon_blocks_are_doctests(page):
  blocks = re.findall(r"```pycon\n(.*?)```", page.read_text(), re.S)
  for block in blocks:
    assert block.startswith(">>> "), f"{page.name}: a ```pycon block that is not a doctest"
    assert block.endswith("\n\n"), f"{page.name}: leave a blank line before the closing fence"


def test_generated_sections_are_current():
  pytest.importorskip("mkdocs")
  generated = _load("generated")
  hooks = _load("mkdocs_hooks")
  stale, seen = [], 0
  for page in generated.pages(ROOT):
    rel = str(page.relative_to(ROOT))
    text = page.read_text()
    seen += len(generated.sections(text))
    names = generated.stale(text, generated.generator(hooks._GENERATED, rel))
    stale += [f"{rel}: {', '.join(names)}"] if names else []
  assert seen >= len(hooks._GENERATED), "a generator no page uses, or pages without markers"
  assert not stale, (
    f"generated sections not current; run `{generated.COMMAND}` and commit the pages:\n  "
    + "\n  ".join(stale)
  )


def test_generated_sections_are_found_filled_and_checked():
  generated = _load("generated")
  bodies = {"a": "Table A\n", "b": "- b"}
  generate = generated.generator({k: (lambda v=v: v) for k, v in bodies.items()}, "page.md")
  text = (
    "# Page\n\n<!-- generated: a -->\n\nold A\n\n<!-- end generated: a -->\n\n"
    "text\n\n<!-- generated: b -->\n"
  )
  assert [(s.name, s.body) for s in generated.sections(text)] == [("a", "old A"), ("b", None)]
  assert generated.stale(text, generate) == ["a", "b"]
  new = generated.fill(text, generate)
  assert new == (
    "# Page\n\n<!-- generated: a -->\n\nTable A\n\n<!-- end generated: a -->\n\ntext\n\n"
    "<!-- generated: b -->\n\n- b\n\n<!-- end generated: b -->\n"
  )
  assert generated.stale(new, generate) == [] and generated.fill(new, generate) == new
  with pytest.raises(KeyError, match="page.md.*generated: c"):
    generated.stale("<!-- generated: c -->\n", generate)
  with pytest.raises(ValueError, match="without its opening"):
    generated.sections("x\n<!-- end generated: a -->\n")


def test_flax_differences_name_every_failing_test():
  pytest.importorskip("mkdocs")
  hooks = _load("mkdocs_hooks")
  text = hooks.flax_differences()
  import json

  results = sorted((ROOT / "tests/parity/results").glob("flax-*/flax_suite.json"))
  assert len(results) >= 2  # flax 0.12.8 and 0.12.12
  for path in results:
    run = json.loads(path.read_text())
    assert run["summary"]["failing"]
    for name in run["summary"]["failing"]:
      assert f"`{name}`" in text
    row = (
      f"| {run['flax']} | {run['python']} | {run['jax']} | {run['summary']['total']['applicable']}"
    )
    assert row in hooks.flax_parity_table()
  assert "Not yet explained" not in text


def test_generated_versions_and_missing_names_come_from_their_sources():
  pytest.importorskip("mkdocs")
  import tomllib

  hooks = _load("mkdocs_hooks")
  project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
  versions = hooks.supported_versions()
  assert f"| Python | `{project['requires-python']}` |" in versions
  for dep in project["dependencies"]:
    assert dep.split(">")[0].split("=")[0] in versions
  listed = hooks.flax_names_missing()
  from nnx_eqx._flax_missing import MISSING

  for _, names in MISSING:
    for name in names:
      assert f"`{name.replace('nnx_eqx', 'nnx', 1)}`" in listed


def test_docstring_conventions_are_read_as_google_sections():
  pytest.importorskip("griffe")
  ext = _load("griffe_docstrings")
  doc = "Args:\n  a, b,\n    c: shared text\n    more.\n  d: alone.\n\n"
  doc += "Raises:\n  Whatever f raises.\n\nSee :class:`nnx.Rngs` and :func:`~nnx.jit`.\n"
  out = ext.rewrite(doc + "\nExample:\n  >>> 1\n  1\n")
  assert "  a: shared text\n    more.\n  b: shared text\n    more.\n  c: shared text" in out
  assert "  d: alone." in out
  assert "  Exception: Whatever f raises." in out
  assert "Examples:\n  >>> 1" in out
  assert "See `nnx.Rngs` and `nnx.jit`." in out


def test_an_indented_generated_section_keeps_its_indentation():
  """A section inside a block (``??? details``) is indented with it, markers and text."""
  generated = _load("generated")
  generate = generated.generator({"a": lambda: "| t |\n|---|\n\nline\n"}, "page.md")
  text = '??? details "All"\n\n    <!-- generated: a -->\n\n    old\n\n'
  text += "    <!-- end generated: a -->\n"
  (section,) = generated.sections(text)
  assert (section.name, section.body, section.indent) == ("a", "old", "    ")
  new = generated.fill(text, generate)
  assert new == (
    '??? details "All"\n\n    <!-- generated: a -->\n\n    | t |\n    |---|\n\n    line\n\n'
    "    <!-- end generated: a -->\n"
  )
  assert generated.stale(new, generate) == [] and generated.fill(new, generate) == new


def test_every_documented_constant_has_a_docstring_in_the_source():
  assert not api_coverage.constants_without_docs(api_coverage.api_pages(DOCS))


def test_constant_docstrings_are_read_from_the_source(tmp_path):
  import nnx_eqx as nnx
  import nnx_eqx.testing

  # a string after the assignment, in the module that assigns it (re-exported here)
  assert "stacked axis" in api_coverage.source_docstring(nnx, "PARTITION_NAME")
  # `#:` comments above it
  assert "rtol" in api_coverage.source_docstring(nnx_eqx.testing, "TOLERANCES")
  # a class attribute, and one without a docstring (its type's would show)
  assert "params" in api_coverage.source_docstring(nnx.Param, "collection")
  assert api_coverage.source_docstring(nnx.PathContains, "exact") is None
  page = tmp_path / "api.md"
  page.write_text("::: nnx_eqx.PARTITION_NAME\n\n::: nnx_eqx.DATA_TAG_FOR_TEST\n")
  nnx.DATA_TAG_FOR_TEST = "x"  # a str without a docstring anywhere
  try:
    assert api_coverage.constants_without_docs([page]) == ["nnx_eqx.DATA_TAG_FOR_TEST"]
  finally:
    del nnx.DATA_TAG_FOR_TEST


def test_the_site_checker_finds_what_a_reader_would_see_broken(tmp_path):
  check_site = _load("check_site")
  (tmp_path / "a").mkdir()
  (tmp_path / "img.png").write_bytes(b"")
  (tmp_path / "index.html").write_text(
    '<h1 id="top">Home</h1><a href="a/#there">ok</a><img src="img.png">'
    '<a href="https://example.org/x">external</a>'
  )
  (tmp_path / "a" / "index.html").write_text('<h2 id="there">There</h2><a href="../#top">up</a>')
  assert check_site.check(tmp_path) == []
  (tmp_path / "a" / "index.html").write_text(
    '<h2 id="there">There</h2><a href="../#gone">up</a><img src="../missing.png">'
    "<h3 id=\"x.NAME\">NAME</h3><p>str(object='') -&gt; str</p>"
    "<code>f(value=&lt;object object at 0x7f00aa&gt;)</code>"
    '<span title="nnx_eqx.Module.nothing"><code>nnx.Module.nothing</code></span>'
  )
  problems = check_site.check(tmp_path)
  assert len(problems) == 5, problems
  assert any("`nnx_eqx.Module.nothing` is not linked" in p for p in problems)
  assert any("#gone" in p for p in problems) and any("missing.png" in p for p in problems)
  assert any(p.startswith("a/index.html#x.NAME: a built-in type's docstring") for p in problems)
  assert any("object at 0x7f00aa" in p for p in problems)


def test_api_entries_show_public_bases_and_named_defaults():
  pytest.importorskip("griffe")
  ext = _load("griffe_api")
  assert ext.public_base("equinox._module._module.Module") == "equinox.Module"
  assert ext.public_base("nnx_eqx.graph.variables._variables.Variable") == "nnx_eqx.Variable"
  assert ext.public_base("nnx_eqx.graph.state._filters._BaseFilter") is None
  assert ext.public_base("_thread._local") is None
  assert ext.public_base("collections.abc.Mapping") == "collections.abc.Mapping"
  import dataclasses

  assert ext.public_name(dataclasses.MISSING, ("dataclasses",)) == "dataclasses.MISSING"


def test_inline_public_names_become_references_to_their_entries():
  import sys

  sys.path.insert(0, str(HOOKS))
  autolink = _load("autolink")
  table = autolink.entries(api_coverage.api_pages(DOCS))
  assert table["nnx_eqx.from_eqx"] == "nnx_eqx.bridge.from_eqx"  # documented under bridge
  assert table["nnx_eqx.ModuleDef"] == "nnx_eqx.GraphDef"  # an alias: its object's entry
  assert autolink.identifier("nnx.Module.sow", table) == "nnx_eqx.Module.sow"
  assert autolink.identifier("nnx.not_a_name", table) is None
  md = (
    "# `nnx.split` heading\n\nUse `nnx.split` and `nnx.from_eqx(model)`; see [`nnx.merge`](x.md).\n"
    "\n```python\n# `nnx.state`\n```\n\n    ```pycon\n    >>> `nnx.update`\n    ```\n"
  )
  out = autolink.link_names(md, table)
  assert out.count("<autoref") == 2
  assert '<autoref identifier="nnx_eqx.split" optional><code>nnx.split</code></autoref>' in out
  assert '<autoref identifier="nnx_eqx.bridge.from_eqx" optional>' in out
  assert "# `nnx.split` heading" in out and "[`nnx.merge`](x.md)" in out


def test_notebook_pages_resolve_links_written_from_the_notebook_folder():
  pages = _load("notebook_pages")
  site = {"benchmarks/results/a.png", "notebooks/04_x/index.html", "guides/x/index.html"}
  html = (
    '<img src="../benchmarks/results/a.png"><img src="../../benchmarks/results/a.png">'
    '<a href="../../guides/x/#s">ok</a><img src="../missing.png"><a href="https://x.org/y">'
  )
  out = pages.fix_relative_urls(html, "notebooks/04_x/", "notebooks/04_x.ipynb", site)
  assert out == html.replace('"../benchmarks', '"../../benchmarks', 1)
  loader = '<script data-mkdocs-jupyter-mathjax="{}">load()</script>\n'
  assert pages.drop_unused_mathjax(f"<p>x</p>{loader}</body>") == "<p>x</p></body>"
  assert pages.drop_unused_mathjax(f"<p>\\(x\\)</p>{loader}") == f"<p>\\(x\\)</p>{loader}"


def test_api_entries_show_defaults_that_are_no_expression_as_written():
  pytest.importorskip("griffe")
  import nnx_eqx as nnx

  ext = _load("griffe_api")
  assert ext.source_defaults(nnx.Module.sow)["reduce_fn"] == "lambda acc, x: acc + (x,)"
  # a hypothesis strategy: the function @st.composite generated has no source
  assert ext.source_defaults(nnx.testing.graphs)["variable_types"] == "VARIABLE_TYPES"


def test_the_site_checker_reads_the_search_index(tmp_path):
  import json

  check_site = _load("check_site")
  (tmp_path / "search").mkdir()
  docs = [
    {"location": f"api/x/#{a}", "title": a, "text": "", "boost": 2} for a in check_site._ENTRIES
  ]
  config = {"separator": r'[\s\-,:!=\[\]()"/]+|(?!\b)(?=[A-Z][a-z])|\.(?!\d)|&[lg]t;'}
  index = tmp_path / "search" / "search_index.json"
  index.write_text(json.dumps({"config": config, "docs": docs}))
  assert check_site.check_search_index(tmp_path) == []
  index.write_text(json.dumps({"config": {"separator": r"[\s\-]+"}, "docs": docs[1:]}))
  problems = check_site.check_search_index(tmp_path)
  assert len(problems) == 2 and "separator" in problems[0] and "no entry" in problems[1]

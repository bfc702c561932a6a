"""mkdocs hooks (``hooks:`` in mkdocs.yml): what the site adds to the pages in ``docs/``.

* Before the build, every public name must have a docstring and an entry in
  ``docs/api/*.md``, and every constant with an entry a docstring in the source
  (``api_coverage.py``; ``tests/test_docs.py`` checks the same).
* The notebooks in ``notebooks/`` (jupytext ``.py`` files) are executed in one
  kernel by ``notebooks/run.py`` (as ``tests/test_notebooks.py`` does) and
  rendered by mkdocs-jupyter with their outputs and figures. Executed notebooks
  are cached in ``.docs_cache/`` under a hash of the notebooks and the library
  source, so ``mkdocs serve`` does not re-run them after every edit. While
  editing docstrings (which changes that hash), ``NNX_EQX_DOCS_STALE_NOTEBOOKS=1``
  renders the most recently executed notebooks instead of executing them again
  (never in CI: the site then shows outputs of an older library).
* Inline code naming a public object (`` `nnx.split` ``) links to its API entry
  (``autolink.py``).
* The API pages rank above the guides in search (``search: boost`` in their metadata).
* The notebook pages' relative links and images are made to resolve on the site, and
  MathJax is left out of pages without math (``notebook_pages.py``).
* A note between ``<!-- repository only ... -->`` and ``<!-- end repository only -->``
  (how to read ``docs/api/*.md`` in the repository) is left out of the site.
* Pages link repository files by their repository path (``../../notebooks/NAME.py``);
  each link that leaves ``docs/`` is pointed at the site's copy (``links.py``).
* Generated sections (``generated.py``) are committed in the pages, between
  ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``, and written
  by ``python docs/_hooks/regenerate.py`` from the functions in ``_GENERATED``
  below; the build stops while a page's section differs from what its function
  gives now (``tests/test_docs.py`` checks the same). The sections:

  * ``flax-differences``: the flax.nnx tests that fail with nnx_eqx, under the
    reason each fails, rendered from ``tests/parity/flax_suite_explained.toml`` and
    each flax version's ``tests/parity/results/flax-<version>/flax_suite.json`` (the
    same sources as its ``flax_suite.md``), and ``flax-parity-table``: the table of
    those runs (flax, Python and jax versions, applicable and passing tests);
  * ``benchmark-results``: ``benchmarks/results/RESULTS.md``, its PNG plots added to
    the site, and ``benchmark-headline``: the headline table of the same run,
    rendered from ``benchmarks/results/results.json`` by ``benchmarks/_headline.py``
    with the run's machine, load and date (a report that mixes runs is refused), and
    ``benchmark-watch``: that run's table of the dropped-update watch on against off;
  * ``flax-names-missing``: the flax.nnx names nnx_eqx does not provide, by reason
    (``nnx_eqx._flax_missing``), and ``flax-keywords-missing``: the parameters of
    flax.nnx callables nnx_eqx does not take under flax's name, by reason (its
    ``MISSING_KEYWORDS``);
  * ``supported-versions``: the Python and dependency versions ``pyproject.toml``
    requires.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import json
import os
import pathlib
import re
import sys
import tempfile
import time

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import api_coverage  # noqa: E402
import autolink  # noqa: E402
import generated  # noqa: E402
import links  # noqa: E402
import notebook_pages  # noqa: E402

CACHE = ROOT / ".docs_cache"
# a note for readers of the Markdown in the repository (how to read docs/api/*.md)
_REPOSITORY_ONLY = re.compile(
  r"^<!-- repository only\b.*?-->\n.*?^<!-- end repository only -->\n", re.M | re.S
)


def _load(name: str, path: pathlib.Path):
  spec = importlib.util.spec_from_file_location(name, path)
  assert spec is not None and spec.loader is not None
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def on_config(config, **kwargs):
  # hypothesis' @st.composite strategies (nnx.testing.arrays, graphs, eqx_models,
  # eqx_inputs) wrap a function hypothesis generates in a temporary module, which
  # griffe cannot import; name it after the function the library defines.
  import nnx_eqx.testing

  for name in dir(nnx_eqx.testing):  # dir: the strategies are imported on first use
    obj = getattr(nnx_eqx.testing, name)
    inner = inspect.unwrap(obj) if callable(obj) else obj
    if inner is not obj and "<locals>" in getattr(inner, "__qualname__", ""):
      inner.__module__, inner.__qualname__ = obj.__module__, name
      inner.__doc__ = inner.__doc__ or obj.__doc__
  return config


def on_pre_build(config, **kwargs) -> None:
  docs_dir = pathlib.Path(config["docs_dir"])
  pages = api_coverage.api_pages(docs_dir)
  missing = api_coverage.missing_from(pages)
  undocumented = api_coverage.undocumented()
  constants = api_coverage.constants_without_docs(pages)
  if missing or undocumented or constants:
    raise SystemExit(
      "API reference incomplete.\n"
      + "".join(f"  not in docs/api/*.md: {n}\n" for n in missing)
      + "".join(f"  no docstring: {n}\n" for n in undocumented)
      + "".join(f"  no docstring in the source (its type's would show): {n}\n" for n in constants)
    )


def _source_hash(paths: list[pathlib.Path]) -> str:
  h = hashlib.sha256()
  library = sorted((ROOT / "nnx_eqx").rglob("*.py"))
  for p in [*paths, *library, ROOT / "notebooks" / "run.py"]:
    h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes())
  return h.hexdigest()[:16]


def _newest_cache(paths: list[pathlib.Path]) -> pathlib.Path | None:
  """The most recently executed cache entry holding every notebook, if any."""
  full = [
    d for d in CACHE.glob("*") if all((d / "notebooks" / f"{p.stem}.ipynb").exists() for p in paths)
  ]
  return max(full, key=lambda d: d.stat().st_mtime, default=None)


def executed_notebooks() -> pathlib.Path:
  """Folder holding ``notebooks/<name>.ipynb``, executed (from the cache if current)."""
  run = _load("notebooks_run", ROOT / "notebooks" / "run.py")
  paths = run.notebooks()
  out = CACHE / _source_hash(paths)
  nb_dir = out / "notebooks"
  if all((nb_dir / f"{p.stem}.ipynb").exists() for p in paths):
    return out
  if os.environ.get("NNX_EQX_DOCS_STALE_NOTEBOOKS") and (stale := _newest_cache(paths)):
    print(f"INFO    -  NNX_EQX_DOCS_STALE_NOTEBOOKS: notebooks as executed in {stale}")
    return stale
  import nbformat

  t0 = time.perf_counter()
  with tempfile.TemporaryDirectory() as figures:
    nbs = run.execute_all(paths, pathlib.Path(figures), timeout=600)
  errors = [
    f"{p.name}: {o['ename']}: {o['evalue']}"
    for p, nb in zip(paths, nbs)
    for c in nb.cells
    for o in c.get("outputs", [])
    if o.get("output_type") == "error"
  ]
  if errors:
    raise SystemExit("notebook cells failed:\n  " + "\n  ".join(errors))
  nb_dir.mkdir(parents=True, exist_ok=True)
  for p, nb in zip(paths, nbs):
    nbformat.write(nb, nb_dir / f"{p.stem}.ipynb")
  print(f"INFO    -  executed {len(paths)} notebooks in {time.perf_counter() - t0:.0f} s")
  return out


_SITE_FILES: set[str] = set()  # the site's files (dest_uri), for the notebook pages' links


def on_env(env, config, files, **kwargs):
  _SITE_FILES.clear()
  _SITE_FILES.update(f.dest_uri for f in files)
  return env


@event_priority(-100)  # after mkdocs-jupyter's own on_post_page
def on_post_page(output, page, config, **kwargs):
  if not page.file.src_uri.endswith(".ipynb"):
    return output
  output = notebook_pages.fix_relative_urls(output, page.url, page.file.src_uri, _SITE_FILES)
  return notebook_pages.drop_unused_mathjax(output)


@event_priority(100)  # before mkdocs-jupyter turns the .ipynb files into pages
def on_files(files, config, **kwargs):
  site, urls = config["site_dir"], config["use_directory_urls"]
  nb_root = executed_notebooks()
  for nb in sorted((nb_root / "notebooks").glob("*.ipynb")):
    files.append(File(f"notebooks/{nb.name}", str(nb_root), site, urls))
  for png in sorted((ROOT / "benchmarks" / "results").glob("*.png")):
    files.append(File(f"benchmarks/results/{png.name}", str(ROOT), site, urls))
  return files


def flax_differences() -> str:
  """The failing flax.nnx tests under their reasons, grouped by kind of reason,
  with per-file counts for every flax version measured (``tests/parity/results``)."""
  suite = _load("flax_suite", ROOT / "tests" / "parity" / "flax_suite.py")
  runs = suite.load_results()
  explained = suite.load_explained(ROOT / "tests" / "parity" / "flax_suite_explained.toml")
  fails_in: dict[str, list[str]] = {}
  for run in runs:
    for name in run["summary"]["failing"]:
      fails_in.setdefault(name, []).append(run["flax"])
  groups, unexplained = suite.explain(sorted(fails_in), explained)
  lines = []
  for run in runs:
    t = run["summary"]["total"]
    n_fail = len(run["summary"]["failing"])
    lines.append(
      f"- flax {run['flax']}: **{t['passed']} of {t['applicable']} applicable flax tests"
      f" pass ({100 * t['passed'] / t['applicable']:.1f} %);** {n_fail} fail."
    )
  lines.append(f"- {len(unexplained)} failing tests without an explanation.")
  header = "| flax test file |" + "".join(
    f" {r['flax']} applicable | {r['flax']} pass |" for r in runs
  )
  lines += ["", header, "|---|" + "---:|---:|" * len(runs)]
  files = sorted({rel for r in runs for rel in r["summary"]["files"]})
  for rel in files:
    cells = []
    for r in runs:
      c = r["summary"]["files"].get(rel)
      cells += ["-", "-"] if c is None else [str(c.get("applicable", 0)), str(c.get("passed", 0))]
    lines.append(f"| `{rel}` | " + " | ".join(cells) + " |")
  all_versions = [r["flax"] for r in runs]

  def label(name: str) -> str:
    versions = fails_in[name]
    only = "" if versions == all_versions else f" (flax {', '.join(versions)} only)"
    return f"`{name}`{only}"

  kinds: dict[str, list[tuple[str, str, list[str]]]] = {}
  for why, names in groups.items():
    kind, _, rest = why.partition(":")
    kinds.setdefault(kind.strip(), []).append((rest.strip(), why, names))
  order = ["Differs on purpose", "Differs", "Pending", "Not implemented", "Not applicable"]
  for kind in sorted(kinds, key=lambda k: (order.index(k) if k in order else len(order), k)):
    entries = sorted(kinds[kind], key=lambda e: -len(e[2]))
    n = sum(len(e[2]) for e in entries)
    lines += ["", f"### {kind} ({n} test{'s' if n != 1 else ''})", ""]
    for text, _, names in entries:
      lines += [f"- {text}", ""]
      lines += [f"    - {label(n)}" for n in names]
      lines.append("")
  if unexplained:
    lines += ["", "### Not yet explained", ""] + [f"- {label(n)}" for n in unexplained]
  return "\n".join(lines)


def flax_parity_table() -> str:
  """One row per flax version measured: the flax, Python and jax versions of the run,
  applicable and passing flax tests/nnx tests, and the share passing."""
  suite = _load("flax_suite", ROOT / "tests" / "parity" / "flax_suite.py")
  lines = [
    "| flax | Python | jax | applicable | passing | % |",
    "|---|---|---|---:|---:|---:|",
  ]
  for run in suite.load_results():
    t = run["summary"]["total"]
    pct = 100 * t["passed"] / t["applicable"]
    lines.append(
      f"| {run['flax']} | {run['python']} | {run['jax']} | {t['applicable']} | {t['passed']}"
      f" | {pct:.1f} |"
    )
  return "\n".join(lines)


def benchmark_results() -> str:
  text = (ROOT / "benchmarks" / "results" / "RESULTS.md").read_text()
  text = re.sub(r"^# .*\n", "", text, count=1)
  text = re.sub(r"^(#+) ", r"#\1 ", text, flags=re.M)  # one level below the page's
  # from docs/guides/performance.md, the page that includes it
  return re.sub(r"\]\(([\w.-]+\.png)\)", r"](../../benchmarks/results/\1)", text)


def _rendered(renderer: str) -> str:
  """``benchmarks/_headline.<renderer>`` of ``results.json``; a report it refuses
  stops the build with its message."""
  headline = _load("bench_headline", ROOT / "benchmarks" / "_headline.py")
  report = json.loads((ROOT / "benchmarks" / "results" / "results.json").read_text())
  try:
    return getattr(headline, renderer)(report)
  except (headline.MixedRunsError, KeyError) as e:
    raise SystemExit(e.args[0]) from e


def benchmark_headline() -> str:
  """The headline table of the last ``benchmarks/run_all.py`` run."""
  return _rendered("render")


def benchmark_watch() -> str:
  """The dropped-update watch on against off, from the run of the headline."""
  return _rendered("render_watch")


def flax_names_missing() -> str:
  """The flax.nnx names not provided, one list per reason (plain Markdown, so the page
  reads the same in the repository and on the site)."""
  from nnx_eqx._flax_missing import MISSING

  lines: list[str] = []
  for reason, entry_names in MISSING:
    names = [f"`{n.replace('nnx_eqx', 'nnx', 1)}`" for n in entry_names]
    lines += [f"- {reason}", "", f"    {len(names)} names: {', '.join(names)}.", ""]
  return "\n".join(lines)


def flax_keywords_missing() -> str:
  """The flax.nnx parameters nnx_eqx does not take, one item per reason with the
  callables and parameter names it covers (plain Markdown)."""
  import inspect

  from nnx_eqx._flax_missing import MISSING_KEYWORDS

  prefix = {"args": "*", "kwargs": "**"}
  by_reason: dict[str, dict[str, list[str]]] = {}
  for key, params in sorted(MISSING_KEYWORDS.items()):
    path, _, name = key.replace("nnx_eqx", "nnx", 1).partition(":")
    where = f"{path}.{name.removesuffix('.__init__')}"
    for param, reason in params.items():
      shown = f"{prefix[param]}{param}" if param in prefix else f"{param}="
      by_reason.setdefault(reason, {}).setdefault(where, []).append(shown)
  lines: list[str] = []
  for reason, calls in by_reason.items():
    entries = ", ".join(f"`{where}({', '.join(ps)})`" for where, ps in calls.items())
    lines += [f"- {entries}: {inspect.cleandoc(reason)}.", ""]
  total = sum(len(v) for v in MISSING_KEYWORDS.values())
  return "\n".join([f"{total} parameters in all.", "", *lines]).rstrip() + "\n"


def supported_versions() -> str:
  """A table of the Python and runtime dependency versions pyproject.toml requires."""
  import tomllib

  project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
  rows = [("Python", project["requires-python"])]
  for dep in project["dependencies"]:
    name = re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0]
    rows.append((name, dep[len(name) :].strip() or "any"))
  return "\n".join(["| package | versions |", "|---|---|"] + [f"| {n} | `{v}` |" for n, v in rows])


_GENERATED = {
  "flax-differences": flax_differences,
  "flax-parity-table": flax_parity_table,
  "benchmark-results": benchmark_results,
  "benchmark-headline": benchmark_headline,
  "benchmark-watch": benchmark_watch,
  "flax-names-missing": flax_names_missing,
  "flax-keywords-missing": flax_keywords_missing,
  "supported-versions": supported_versions,
}


@functools.cache
def _entries(docs_dir: str) -> dict[str, str]:
  return autolink.entries(api_coverage.api_pages(pathlib.Path(docs_dir)))


def on_page_markdown(markdown, page, config, files, **kwargs):
  src = f"docs/{page.file.src_uri}"
  try:
    names = generated.stale(markdown, generated.generator(_GENERATED, src))
    if names:
      raise SystemExit(
        f"{src}: generated sections not current ({', '.join(names)}); "
        f"run `{generated.COMMAND}` and commit the result"
      )
    markdown = links.for_site(_REPOSITORY_ONLY.sub("", markdown), src)
    if page.file.src_uri.startswith("api/"):
      # an API entry before the guides that mention its name (mkdocs-material's boost)
      page.meta.setdefault("search", {}).setdefault("boost", 2)
    # the pages' own prose; mkdocstrings links inside the entries it renders
    markdown = autolink.link_names(markdown, _entries(config["docs_dir"]))
    return markdown
  except (KeyError, ValueError) as e:
    raise SystemExit(e.args[0]) from e

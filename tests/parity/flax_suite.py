"""Run flax's own ``tests/nnx`` suite against nnx_eqx and summarise the results.

flax's test sources are not part of this repository: the script extracts them
from a flax sdist (``--sdist flax-0.12.8.tar.gz``) or reads them from a flax
source checkout (``--tests-dir flax/tests/nnx``) into a scratch folder, rewrites
the imports (``from flax import nnx`` becomes ``import nnx_eqx as nnx``), marks
the tests that exercise the Linen bridge or flax internals as excluded, and
runs every file in its own pytest process (the files set ``XLA_FLAGS`` at
import time).

With ``--flax-site`` (the site-packages of an environment with flax, e.g.
``<flaxenv>/lib/python3.11/site-packages``; or ``--flax-python``, a python
with flax, default ``$NNX_EQX_FLAX_PYTHON``) the unmodified tests first run with
flax.nnx and their outcomes are written to ``flax_suite_reference.json``;
``--reference`` reuses that file. A
test counts as *applicable* when it is not excluded and passes with flax. The
summary (``flax_suite.json`` and ``flax_suite.md`` in ``--out``) gives per-file
counts of applicable tests and how many of them pass with nnx_eqx, and groups
the failure messages. Every failing test is matched against the explanations
in ``flax_suite_explained.toml`` (``--explained``): ``fnmatch`` patterns over
test ids, each with the reason it fails; the markdown lists each failing test
under its reason and names the tests no pattern explains.

Each flax version measured keeps its results in ``results/flax-<version>/``
(``flax_suite.json``, ``flax_suite.md``, ``flax_suite_reference.json``; the
default ``--out``, the version read from the sdist's name); the explanations
(``flax_suite_explained.toml``) are shared. ``flax_suite.json`` also records the
flax version and the Python and jax versions of the nnx_eqx run.
``--sdist`` defaults to ``$NNX_EQX_FLAX_SDIST``.

Typical use (from the repository root)::

  python tests/parity/flax_suite.py --sdist <dir>/flax-0.12.8.tar.gz \\
      --flax-site <flaxenv>/lib/python3.11/site-packages \\
      --reference tests/parity/results/flax-0.12.8/flax_suite_reference.json

``--flax-site`` is also appended to ``sys.path`` of the nnx_eqx run so the tests
that compare a layer against its ``flax.linen`` counterpart can import Linen;
without it those tests are excluded. The nnx_eqx run imports nothing else from
flax. ``--tree`` points at another checkout to measure (default: this one).
"""

from __future__ import annotations

import argparse
import ast
import collections
import fnmatch
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# Whole files left out, with the reason.
EXCLUDED_FILES = {
  "bridge/module_test.py": "Linen bridge (nnx.bridge.Module, Linen interop)",
  "bridge/wrappers_test.py": "Linen bridge (ToNNX / ToLinen wrappers)",
  "test_traversals.py": "flax internal: flax.nnx.traversals over flax.core.FrozenDict",
}

# Tests whose source mentions one of these names are excluded, with the reason.
EXCLUDED_TOKENS = {
  "bridge.": "Linen bridge",
}
LINEN_TOKEN = "linen"
LINEN_REASON = "compares against flax.linen (run with --flax-site to include)"

SHIM = '''"""Stand-ins for the few flax names the rewritten tests use outside flax.nnx."""
import typing as _tp

import nnx_eqx as _nnx

Dtype = PrecisionLike = Shape = PaddingLike = Array = _tp.Any


# flax config flags and the nnx_eqx settings that hold them.
_SETTINGS = {"nnx_graph_mode": "set_graph_mode", "nnx_sow_capture_noop": "set_sow_capture_noop"}


class _Config:
  def _read(self, name):
    return getattr(_nnx, _SETTINGS[name]).current_value()

  def update(self, name, value):
    getattr(_nnx, _SETTINGS[name])(value)

  def __getattr__(self, name):
    if name not in _SETTINGS:
      raise AttributeError(name)
    return self._read(name)


config = _Config()
'''

CONFTEST = """import functools
import sys

import pytest

for _p in {extra_paths!r}:
  sys.path.append(_p)


def parity_excluded(reason):
  def deco(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      pytest.skip("parity-excluded: " + reason)

    return wrapper

  return deco


import builtins

builtins.parity_excluded = parity_excluded
"""


def _rewrite_from_flax(indent: str, names: str) -> list[str]:
  out = []
  for part in names.split(","):
    name, _, alias = part.strip().partition(" as ")
    alias = alias.strip() or name
    if name in ("nnx", "errors"):
      out.append(f"{indent}import nnx_eqx as {alias}")
    else:
      out.append(f"{indent}from flax import {name} as {alias}")
  return out


def rewrite_imports(src: str) -> str:
  """Point a flax test file at nnx_eqx instead of flax.nnx."""
  lines = []
  for line in src.splitlines():
    m = re.match(r"^(\s*)(from|import) (\S+)(?: import (.+))?$", line)
    if not m:
      lines.append(line)
      continue
    indent, kind, mod, names = m.groups()
    if kind == "from" and mod == "flax":
      lines.extend(_rewrite_from_flax(indent, names))
    elif kind == "from" and mod == "flax.typing":
      lines.append(f"{indent}from _parity_shim import {names}")
    elif kind == "from" and mod == "flax.nnx":
      for part in names.split(","):
        name = part.strip().split(" as ")[0]
        if name in ("traversals", "bridge"):
          lines.append(f"{indent}{name} = None  # flax internal; its tests are excluded")
        else:
          lines.append(f"{indent}from nnx_eqx import {part.strip()}")
    elif kind == "from" and mod.startswith("flax.nnx.nn"):
      lines.append(f"{indent}from nnx_eqx.nn import {names}")
    elif kind == "from" and mod == "flax.nnx.transforms":
      lines.append(f"{indent}from nnx_eqx.transforms import {names.strip()}")
    elif kind == "from" and mod.startswith("flax.nnx"):
      lines.append(f"{indent}{names.strip()} = None  # flax internal; its tests are excluded")
    elif kind == "import" and mod == "flax.errors":
      lines.append(f"{indent}import nnx_eqx")
    elif kind == "import" and mod == "flax":
      lines.append(f"{indent}import _parity_shim as flax")
    else:
      lines.append(line)
  out = "\n".join(lines) + "\n"
  out = out.replace("flax.errors.", "nnx_eqx.")
  out = re.sub(r"\bflax\.nnx\.", "nnx.", out)
  return out


def _test_functions(tree: ast.AST):
  for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
      yield node


def exclusions(src: str, with_linen: bool) -> dict[int, str]:
  """Maps the line of each excluded test's ``def`` to the reason."""
  out = {}
  tree = ast.parse(src)
  for fn in _test_functions(tree):
    body = ast.get_source_segment(src, fn) or ""
    for token, reason in EXCLUDED_TOKENS.items():
      if token in body:
        out[fn.lineno] = reason
    if not with_linen and LINEN_TOKEN in body:
      out[fn.lineno] = LINEN_REASON
  return out


def mark_excluded(src: str, excluded: dict[int, str]) -> str:
  lines = src.splitlines()
  for lineno in sorted(excluded, reverse=True):
    line = lines[lineno - 1]
    indent = line[: len(line) - len(line.lstrip())]
    lines.insert(lineno - 1, f"{indent}@parity_excluded({excluded[lineno]!r})")
  return "\n".join(lines) + "\n"


def extract(args, dest: pathlib.Path) -> pathlib.Path:
  if args.tests_dir:
    shutil.copytree(args.tests_dir, dest / "src")
    return dest / "src"
  with tarfile.open(args.sdist) as tar:
    members = [m for m in tar.getmembers() if "/tests/nnx/" in m.name and m.isfile()]
    for m in members:
      m.name = m.name.split("/tests/nnx/", 1)[1]
    tar.extractall(dest / "src", members=members, filter="data")
  return dest / "src"


def prepare(src_dir: pathlib.Path, out_dir: pathlib.Path, target: str, extra_paths, with_linen):
  out_dir.mkdir(parents=True)
  (out_dir / "conftest.py").write_text(CONFTEST.format(extra_paths=list(extra_paths)))
  (out_dir / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
  if target == "nnx_eqx":
    (out_dir / "_parity_shim.py").write_text(SHIM)
  files = {}
  for path in sorted(src_dir.rglob("*.py")):
    rel = path.relative_to(src_dir).as_posix()
    if path.name in ("__init__.py", "conftest.py") or rel in EXCLUDED_FILES:
      continue
    src = path.read_text()
    src = mark_excluded(src, exclusions(src, with_linen))
    if target == "nnx_eqx":
      src = rewrite_imports(src)
    dest = out_dir / rel.replace("/", "__")
    dest.write_text(src)
    files[rel] = dest
  return files


def run_file(python: str, path: pathlib.Path, env_path: str, timeout: int):
  xml = path.with_suffix(".xml")
  cmd = [python, "-m", "pytest", "-q", str(path.name)]
  cmd += ["--junitxml", str(xml.name), "-c", "pytest.ini", "--rootdir", "."]
  env = {"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
  try:
    proc = subprocess.run(
      cmd, cwd=path.parent, env=env, capture_output=True, text=True, timeout=timeout
    )
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
  except subprocess.TimeoutExpired:
    log = "TIMEOUT"
  return parse_junit(xml) if xml.exists() else {}, log


def _first_line(text: str) -> str:
  for line in (text or "").splitlines():
    if line.strip():
      return line.strip()[:200]
  return ""


def parse_junit(xml: pathlib.Path) -> dict[str, dict]:
  out = {}
  for case in ET.parse(xml).getroot().iter("testcase"):
    name = f"{case.get('classname', '')}.{case.get('name')}"
    outcome, message = "passed", ""
    for child in case:
      if child.tag in ("failure", "error"):
        outcome = "failed" if child.tag == "failure" else "error"
        message = child.get("message", "")
        if "collection failure" in message:
          e_lines = [ln for ln in (child.text or "").splitlines() if ln.startswith("E ")]
          message = "collection error: " + (e_lines[-1][1:].strip() if e_lines else message)
      elif child.tag == "skipped":
        message = child.get("message", "")
        outcome = "excluded" if "parity-excluded" in message else "skipped"
    out[name] = {"outcome": outcome, "message": _first_line(message)}
  return out


def reason_key(message: str) -> str:
  """Groups failure messages: missing attributes by name, otherwise by exception type."""
  m = re.search(r"has no attribute '([^']+)'", message)
  if m:
    return f"missing attribute {m.group(1)!r}"
  m = re.search(r"unexpected keyword argument '([^']+)'", message)
  if m:
    return f"unexpected keyword {m.group(1)!r}"
  m = re.match(r"(\w+(?:Error|Exception|Exit))", message)
  return m.group(1) if m else (message[:60] or "unknown")


def summarise(ours: dict, ref: dict | None) -> dict:
  files = {}
  reasons = collections.Counter()
  failing: list[str] = []
  for rel, cases in ours.items():
    ref_cases = (ref or {}).get(rel)
    names = set(cases) | set(ref_cases or {})
    counts = collections.Counter()
    collection = [c["message"] for c in cases.values() if c["message"].startswith("collection")]
    missing = {"outcome": "error", "message": collection[0] if collection else "not collected"}
    for name in names:
      if collection and ref_cases is not None and name not in ref_cases:
        continue  # the collection-error entry itself
      mine = cases.get(name, missing)
      ref_outcome = (ref_cases or {}).get(name, {}).get("outcome")
      if mine["outcome"] == "excluded" or ref_outcome == "excluded":
        counts["excluded"] += 1
        continue
      if ref_cases is not None and ref_outcome != "passed":
        counts["fails_with_flax"] += 1
        continue
      counts["applicable"] += 1
      counts[mine["outcome"]] += 1
      if mine["outcome"] in ("failed", "error"):
        reasons[reason_key(mine["message"])] += 1
        failing.append(name)
    files[rel] = dict(counts)
  total = collections.Counter()
  for c in files.values():
    total.update(c)
  return {
    "files": files,
    "total": dict(total),
    "reasons": reasons.most_common(60),
    "failing": sorted(failing),
  }


def load_explained(path: pathlib.Path | None) -> list[tuple[str, str]]:
  """``[[failure]]`` tables of ``pattern`` (fnmatch over test ids) and ``why``."""
  if path is None or not path.exists():
    return []
  return [(e["pattern"], e["why"]) for e in tomllib.loads(path.read_text())["failure"]]


def explain(failing: list[str], explained: list[tuple[str, str]]) -> tuple[dict, list[str]]:
  """Groups failing test ids by the first explanation whose pattern matches."""
  groups: dict[str, list[str]] = {}
  unexplained = []
  for name in failing:
    why = next((w for pat, w in explained if fnmatch.fnmatchcase(name, pat)), None)
    if why is None:
      unexplained.append(name)
    else:
      groups.setdefault(why, []).append(name)
  return groups, unexplained


def markdown(
  summary: dict, excluded_files: dict, explained: list | None = None, run: dict | None = None
) -> str:
  t = summary["total"]
  app, ok = t.get("applicable", 0), t.get("passed", 0)
  pct = 100 * ok / app if app else 0.0
  title = "# flax tests/nnx suite against nnx_eqx"
  if run:
    title += f" (flax {run['flax']}; nnx_eqx on Python {run['python']}, jax {run['jax']})"
  lines = [
    title,
    "",
    f"**{ok} of {app} applicable tests pass ({pct:.1f} %).** Excluded: {t.get('excluded', 0)};"
    f" failing with flax itself (not applicable): {t.get('fails_with_flax', 0)}.",
    "",
    "| file | applicable | passed | failed | error | skipped | excluded |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for rel, c in sorted(summary["files"].items()):
    row = [c.get(k, 0) for k in ("applicable", "passed", "failed", "error", "skipped", "excluded")]
    lines.append(f"| {rel} | " + " | ".join(map(str, row)) + " |")
  lines += ["", "## Excluded files", ""]
  lines += [f"- `{k}`: {v}" for k, v in excluded_files.items()]
  lines += ["", "## Excluded tests", ""]
  lines += [f"- {r}" for r in sorted({*EXCLUDED_TOKENS.values(), LINEN_REASON})]
  lines += ["", "## Failure reasons (grouped)", "", "| count | reason |", "|---:|---|"]
  lines += [f"| {n} | {r} |" for r, n in summary["reasons"]]
  if explained is not None:
    groups, unexplained = explain(summary.get("failing", []), explained)
    lines += ["", "## Failing tests, by reason", ""]
    lines.append(f"Unexplained: {len(unexplained)}.")
    for why, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
      lines += ["", f"**{why}** ({len(names)})", ""]
      lines += [f"- `{n}`" for n in names]
    if unexplained:
      lines += ["", "**Not yet explained**", ""] + [f"- `{n}`" for n in unexplained]
  return "\n".join(lines) + "\n"


def run_suite(args, src_dir, work, target, python, env_path, extra_paths, with_linen):
  files = prepare(src_dir, work / target, target, extra_paths, with_linen)
  if args.only:
    files = {k: v for k, v in files.items() if any(o in k for o in args.only)}
  results = {}
  for rel, path in files.items():
    cases, log = run_file(python, path, env_path, args.timeout)
    results[rel] = cases
    n_ok = sum(c["outcome"] == "passed" for c in cases.values())
    print(f"[{target}] {rel}: {n_ok}/{len(cases)} passed", flush=True)
    if not cases:
      print(log, flush=True)
  return results


RESULTS = HERE / "results"


def sdist_version(sdist: str) -> str | None:
  """``0.12.8`` from ``.../flax-0.12.8.tar.gz``."""
  m = re.match(r"flax-(.+?)\.(?:tar\.gz|tgz)$", pathlib.Path(sdist).name)
  return m.group(1) if m else None


def load_results() -> list[dict]:
  """The committed runs, one per flax version (oldest first): each ``flax_suite.json``
  with its folder under ``"dir"``."""
  runs = []
  for path in RESULTS.glob("flax-*/flax_suite.json"):
    run = json.loads(path.read_text())
    run["dir"] = path.parent
    runs.append(run)
  key = lambda r: tuple(int(x) for x in re.findall(r"\d+", r["dir"].name))  # noqa: E731
  return sorted(runs, key=key)


def runtime_versions(python: str, env_path: str) -> dict:
  """Python and jax versions of ``python`` (the interpreter that ran nnx_eqx)."""
  code = "import sys, jax; print(sys.version.split()[0], jax.__version__)"
  env = {"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
  out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=True)
  py, jax_version = out.stdout.split()
  return {"python": py, "jax": jax_version}


def _require(value, what: str, env: str) -> str:
  if not value:
    raise SystemExit(f"flax_suite.py: no {what}. Pass it as an argument or set ${env}.")
  return value


def strip_paths(results: dict, tree: str) -> dict:
  """Failure messages with the measured checkout's path removed (``nnx_eqx/x.py:12``),
  so the committed results name no machine path."""
  prefix = tree.rstrip("/") + "/"
  for cases in results.values():
    for case in cases.values():
      case["message"] = case["message"].replace(prefix, "")
  return results


def _merge_earlier(args, path: pathlib.Path, results: dict) -> dict:
  """With ``--only``, the files run now replace theirs in an earlier run's results."""
  if args.only and path.exists():
    return {**json.loads(path.read_text()), **results}
  return results


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  src = p.add_mutually_exclusive_group()
  src.add_argument(
    "--sdist",
    default=os.environ.get("NNX_EQX_FLAX_SDIST"),
    help="flax sdist (.tar.gz) holding tests/nnx (default: $NNX_EQX_FLAX_SDIST)",
  )
  src.add_argument("--tests-dir", help="a flax tests/nnx folder")
  p.add_argument("--flax-version", help="flax version measured (default: from the sdist name)")
  p.add_argument("--python", default=sys.executable, help="python that runs nnx_eqx")
  p.add_argument(
    "--flax-python",
    default=os.environ.get("NNX_EQX_FLAX_PYTHON"),
    help="python with flax installed (default: $NNX_EQX_FLAX_PYTHON)",
  )
  p.add_argument("--flax-site", help="site-packages holding flax.linen for Linen comparisons")
  p.add_argument("--reference", help="reuse a reference JSON written by an earlier run")
  p.add_argument(
    "--only",
    nargs="*",
    help="substrings of the test files to run; their results replace those of the same"
    " files in the results already in --out (reference and nnx_eqx runs alike)",
  )
  p.add_argument("--timeout", type=int, default=1200, help="seconds per test file")
  p.add_argument("--tree", default=str(ROOT), help="folder holding the nnx_eqx package")
  p.add_argument("--keep", action="store_true", help="keep the rewritten tests")
  p.add_argument("--out", help="folder for the results (default: results/flax-<version>)")
  p.add_argument(
    "--explained",
    default=str(HERE / "flax_suite_explained.toml"),
    help="TOML of [[failure]] pattern/why entries explaining failing tests",
  )
  p.add_argument(
    "--render",
    metavar="DIR",
    help="only rewrite DIR/flax_suite.md from DIR/flax_suite.json and --explained (after"
    " editing the explanations); runs nothing",
  )
  args = p.parse_args(argv)
  if args.render:
    out = pathlib.Path(args.render)
    detail = json.loads((out / "flax_suite.json").read_text())
    explained = load_explained(pathlib.Path(args.explained))
    text = markdown(detail["summary"], detail["excluded_files"], explained, detail)
    (out / "flax_suite.md").write_text(text)
    return
  if not args.tests_dir:
    _require(args.sdist, "flax sdist (--sdist)", "NNX_EQX_FLAX_SDIST")
  version = args.flax_version or (sdist_version(args.sdist) if args.sdist else None)
  if args.out is None:
    args.out = str(RESULTS / f"flax-{_require(version, 'flax version (--flax-version)', '-')}")
  pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)

  work = pathlib.Path(tempfile.mkdtemp(prefix="flax_suite_"))
  src_dir = extract(args, work)
  with_linen = bool(args.flax_site)
  extra = [args.flax_site] if args.flax_site else []
  ref = None
  if args.reference:
    ref = json.loads(pathlib.Path(args.reference).read_text())
  elif args.flax_python or args.flax_site:  # (the reference run)
    python = args.flax_python or args.python
    ref = run_suite(args, src_dir, work, "flax", python, "", extra, True)
    ref_path = pathlib.Path(args.out) / "flax_suite_reference.json"
    ref = _merge_earlier(args, ref_path, ref)
    ref_path.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    print(f"reference results in {ref_path}")
  tree = str(pathlib.Path(args.tree).resolve())
  ours = strip_paths(
    run_suite(args, src_dir, work, "nnx_eqx", args.python, tree, extra, with_linen), tree
  )
  out = pathlib.Path(args.out)
  earlier = out / "flax_suite.json"
  if args.only and earlier.exists():
    ours = {**json.loads(earlier.read_text())["results"], **ours}
  summary = summarise(ours, ref)
  detail = {
    "summary": summary,
    "excluded_files": EXCLUDED_FILES,
    "results": ours,
    "flax": version,
    **runtime_versions(args.python, tree),
  }
  (out / "flax_suite.json").write_text(json.dumps(detail, indent=1, sort_keys=True) + "\n")
  explained = load_explained(pathlib.Path(args.explained))
  text = markdown(summary, EXCLUDED_FILES, explained, detail)
  (out / "flax_suite.md").write_text(text)
  print(text)
  if args.keep:
    print(f"rewritten tests kept in {work}")
  else:
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
  main()

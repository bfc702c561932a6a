"""Which public names the API reference documents, and which have no docstring.

The public names are those of the namespaces in ``NAMESPACES`` that do not start
with ``_``, leaving out submodules (documented through their own names) and the
``from __future__ import annotations`` feature. A name counts as documented when
an API page (``docs/api/*.md``) has a ``::: path`` directive for it, or for the
same object under the same name in another namespace (``nnx.from_eqx`` is
``nnx.bridge.from_eqx``), or names it as ``nnx.X`` / ``nnx_eqx.X`` in backticks
(aliases such as ``nnx.ModuleDef``, whose object has a directive under its own
name, and names that are not nnx_eqx classes or functions: the re-exported
``jax.nn`` functions, type aliases, constants).
``tests/test_docs.py`` and the ``mkdocs`` hook (``mkdocs_hooks.py``) both use it,
so a missing name fails the test suite and ``mkdocs build``.
"""

from __future__ import annotations
import __future__

import ast
import functools
import importlib
import inspect
import pathlib
import re
import sys
import types
import typing
from typing import Any

NAMESPACES = (
  "nnx_eqx",
  "nnx_eqx.bridge",
  "nnx_eqx.testing",
  "nnx_eqx.checkpoint",
  "nnx_eqx.metrics",
  "nnx_eqx.graphlib",
  "nnx_eqx.statelib",
  "nnx_eqx.extract",
  "nnx_eqx.variablelib",
  "nnx_eqx.compat",
  "nnx_eqx.nn.initializers",
  "nnx_eqx.reprlib",
  "nnx_eqx.ids",
  "nnx_eqx.tracers",
  "nnx_eqx.proxy_caller",
  "nnx_eqx.transforms.general",
)

_DIRECTIVE = re.compile(r"^::: +([\w.]+)", re.M)
_BACKTICKED = re.compile(r"`(nnx(?:_eqx)?(?:\.\w+)+)`")


def public_names() -> dict[str, Any]:
  """``{"nnx_eqx.bridge.register": obj, ...}`` for every public name."""
  names = {}
  for ns in NAMESPACES:
    mod = importlib.import_module(ns)
    # names a module imports on first use (its own __dir__ lists them, e.g. the
    # hypothesis strategies of nnx_eqx.testing) count as well
    lazy = {n: getattr(mod, n) for n in vars(mod).get("__dir__", list)() if n not in vars(mod)}
    for name, obj in [*vars(mod).items(), *lazy.items()]:
      if name.startswith("_") or isinstance(obj, types.ModuleType):
        continue
      if isinstance(obj, __future__._Feature) or obj is getattr(typing, name, None):
        continue  # `from __future__ import annotations`, `from typing import Any`
      names[f"{ns}.{name}"] = obj
  return names


def _resolve(path: str) -> Any:
  parts = path.split(".")
  for i in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:i]))
    except ImportError:
      continue
    for p in parts[i:]:
      obj = getattr(obj, p)
    return obj
  raise ImportError(path)


def documented(pages: list[pathlib.Path]) -> tuple[set[str], dict[str, list[Any]]]:
  """The paths the pages name, and the objects of their ``:::`` directives by name."""
  paths: set[str] = set()
  objects: dict[str, list[Any]] = {}
  for page in pages:
    text = page.read_text()
    for path in _DIRECTIVE.findall(text):
      paths.add(path)
      objects.setdefault(path.rsplit(".", 1)[-1], []).append(_resolve(path))
    for path in _BACKTICKED.findall(text):
      paths.add(re.sub(r"^nnx\.", "nnx_eqx.", path))
  return paths, objects


def _own_code(obj: Any) -> bool:
  """A class or function defined in nnx_eqx (its page must show its docstring)."""
  module = getattr(obj, "__module__", None) or ""
  return isinstance(obj, (type, types.FunctionType)) and module.startswith("nnx_eqx")


def missing_from(pages: list[pathlib.Path]) -> list[str]:
  """Public names that no API page documents.

  A class or function of nnx_eqx needs a ``:::`` directive (for itself, or for the
  same object under another name when it is an alias); a backticked mention is
  enough only for other names (JAX re-exports, type aliases, constants).
  """
  paths, objects = documented(pages)
  rendered = [o for objs in objects.values() for o in objs]
  missing = []
  for path, obj in public_names().items():
    name = path.rsplit(".", 1)[-1]
    if any(o is obj for o in objects.get(name, ())):
      continue
    if path in paths and not (_own_code(obj) and not any(o is obj for o in rendered)):
      continue
    missing.append(path)
  return missing


def undocumented() -> list[str]:
  """Public classes and functions of nnx_eqx without a docstring of their own.

  Re-exported JAX functions (``nnx.relu``, the initializers) are documented by JAX.
  """
  bad = []
  for path, obj in public_names().items():
    if not callable(obj) or not getattr(obj, "__module__", "nnx_eqx").startswith("nnx_eqx"):
      continue
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
    if not (doc or "").strip():
      bad.append(path)
  return bad


def api_pages(docs_dir: pathlib.Path) -> list[pathlib.Path]:
  return sorted((docs_dir / "api").glob("*.md"))


def is_builtin_value(obj: Any) -> bool:
  """A constant whose ``__doc__`` is a built-in type's (``str``, ``dict``, ``tuple``,
  ``None``, ``...``)."""
  return type(obj).__module__ == "builtins" and not callable(obj)


@functools.cache
def _tree(path: str) -> ast.Module:
  return ast.parse(pathlib.Path(path).read_text())


def _assigned_docs(body: list[ast.stmt], lines: list[str]) -> dict[str, str]:
  """``{name: doc}`` for the assignments of ``body`` that are documented: a string
  literal right after the assignment, or ``#:`` comment lines right above it."""
  docs: dict[str, str] = {}
  for i, stmt in enumerate(body):
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
      target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign):
      target = stmt.target
    else:
      continue
    if not isinstance(target, ast.Name):
      continue
    after = body[i + 1] if i + 1 < len(body) else None
    if (
      isinstance(after, ast.Expr)
      and isinstance(after.value, ast.Constant)
      and isinstance(after.value.value, str)
    ):
      docs[target.id] = inspect.cleandoc(after.value.value)
      continue
    comment, n = [], stmt.lineno - 2
    while n >= 0 and lines[n].lstrip().startswith("#:"):
      comment.insert(0, lines[n].lstrip()[2:].strip())
      n -= 1
    if comment:
      docs[target.id] = " ".join(comment)
  return docs


def source_docstring(owner: Any, name: str) -> str | None:
  """The docstring written for attribute ``name`` of a module or class in its source.

  Python keeps no docstring for a constant: ``owner.name.__doc__`` is its type's
  (``str(object='') -> str``). The documentation tools' convention is a string
  literal right after the assignment (or ``#:`` comments above it); this reads it
  from the module that assigns the name (a package re-exporting a constant: the
  module it comes from), or from the class body of the class in ``owner``'s MRO
  that sets it.
  """
  if isinstance(owner, type):
    owner = next(k for k in owner.__mro__ if name in vars(k))
    value, key, top = owner, owner.__name__, owner.__module__.split(".")[0]
  else:
    value, key, top = getattr(owner, name), name, owner.__name__.split(".")[0]
  # the modules binding the name: where it is assigned is among them (a class's
  # ``__module__`` may be the package that re-exports it)
  scopes = [
    m
    for m in list(sys.modules.values())
    if getattr(m, "__name__", "").split(".")[0] == top and vars(m).get(key, None) is value
  ]
  for scope in scopes:
    path = getattr(scope, "__file__", None)
    if path is None or not path.endswith(".py"):
      continue
    tree, lines = _tree(path), pathlib.Path(path).read_text().splitlines()
    if isinstance(owner, type):
      bodies = [c.body for c in tree.body if isinstance(c, ast.ClassDef) and c.name == key]
    else:
      bodies = [tree.body]
    for body in bodies:
      doc = _assigned_docs(body, lines).get(name)
      if doc:
        return doc
  return None


def constants_without_docs(pages: list[pathlib.Path]) -> list[str]:
  """Constants with a ``:::`` directive whose page would show a built-in type's
  docstring: no docstring is written for them in the source (``source_docstring``)."""
  bad = []
  for page in pages:
    for path in _DIRECTIVE.findall(page.read_text()):
      obj = _resolve(path)
      if not is_builtin_value(obj):
        continue
      owner_path, name = path.rsplit(".", 1)
      if not source_docstring(_resolve(owner_path), name):
        bad.append(path)
  return bad

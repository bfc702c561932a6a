"""A griffe extension: what the API reference shows of constants, defaults and bases.

mkdocstrings inspects the imported package (``force_inspection``), so it sees what
Python keeps at run time, which in three places is not what a reader should see:

* a constant or class attribute of a built-in type (``PARTITION_NAME = "..."``,
  ``Param.collection``) has its type's ``__doc__`` (``str(object='') -> str``); its
  docstring is read from the source instead (a string literal after the assignment,
  or ``#:`` comments above it: ``api_coverage.source_docstring``), and an attribute
  without one is left undocumented (and so not listed: ``show_if_no_docstring`` is
  off; classes describe such fields in their ``Attributes:`` section);
* a default that prints as an address (``<dataclasses._MISSING_TYPE object at 0x...>``)
  is shown by the name it has in its module (``dataclasses.MISSING``), and one that is
  no Python expression (a lambda shows as ``<lambda>``, which also keeps the signature
  from being wrapped) as written in the source (``lambda x, y: (*x, y)``);
* an attribute's value longer than a line (``EQX_ARCHITECTURES``, a table of
  architectures) is left out of its signature;
* a base class named by a private path is shown under the public name its package
  gives it (``equinox._module._module.Module`` is ``equinox.Module``,
  ``nnx_eqx.graph.variables._variables.Variable`` is ``nnx_eqx.Variable``), and
  left out where it has none (``_BaseFilter``, ``_thread._local``).

Entries have no ``[source]`` link: the project has no public code host yet (see
``pyproject.toml``), and mkdocstrings' inline ``show_source`` cannot stand in for one,
because public classes name the package that exports them as their ``__module__`` (so
pickles stay loadable: ``nnx_eqx/_pickle_names.py``) and inspection then shows lines of
``nnx_eqx/__init__.py`` as their source.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import re
import sys
import textwrap
from typing import Any

import griffe

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import api_coverage  # noqa: E402

_LONGEST_VALUE = 80  # characters of an attribute's value shown in its signature
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,}")
# modules whose public names are looked up for a default shown as an address
_NAMED_IN = ("dataclasses", "nnx_eqx")


def public_name(obj: Any, modules: tuple[str, ...]) -> str | None:
  """``module.NAME`` for the first of ``modules`` with a public name bound to ``obj``."""
  for module in modules:
    mod = importlib.import_module(module)
    for name, value in vars(mod).items():
      if value is obj and not name.startswith("_"):
        return f"{module}.{name}"
  return None


def public_base(path: str) -> str | None:
  """The public path of the class at ``module.qualname`` ``path`` (itself if public)."""
  parts = path.split(".")
  if not any(p.startswith("_") for p in parts):
    return path
  module, _, qualname = path.rpartition(".")
  if qualname.startswith("_") or "." in qualname:
    return None
  try:
    cls = getattr(importlib.import_module(module), qualname)
    top = importlib.import_module(parts[0])
  except (ImportError, AttributeError):
    return None
  return f"{parts[0]}.{qualname}" if getattr(top, qualname, None) is cls else None


def _is_expression(text: str) -> bool:
  try:
    ast.parse(text, mode="eval")
  except SyntaxError:
    return False
  return True


def source_defaults(func: Any) -> dict[str, str]:
  """``{parameter: default as written}`` from the source of ``func`` (``{}`` without one).

  A function generated around another one (hypothesis' ``@st.composite`` wraps the
  strategy in a function of its own, without source) is read from the function its
  closure holds under the same name.
  """
  seen, todo = set(), [inspect.unwrap(func)]
  while todo and len(seen) < 8:
    candidate = todo.pop(0)
    seen.add(id(candidate))
    if getattr(candidate, "__name__", None) == func.__name__:
      try:
        return _written_defaults(ast.parse(textwrap.dedent(inspect.getsource(candidate))))
      except (OSError, TypeError, SyntaxError):
        pass
    for cell in getattr(candidate, "__closure__", None) or ():
      held = cell.cell_contents
      if inspect.isfunction(held) and id(held) not in seen:
        todo.append(held)
  return {}


def _written_defaults(tree: ast.Module) -> dict[str, str]:
  fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
  if fn is None:
    return {}
  a = fn.args
  positional = [*a.posonlyargs, *a.args]
  pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
  pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
  return {arg.arg: ast.unparse(default) for arg, default in pairs}


class ApiEntries(griffe.Extension):
  def on_attribute_instance(
    self, *, node: Any, attr: griffe.Attribute, agent: Any, **kwargs: Any
  ) -> None:
    if attr.value is not None and len(str(attr.value)) > _LONGEST_VALUE:
      attr.value = None  # a table of values: its docstring says what it holds
    if not isinstance(node, griffe.ObjectNode) or node.parent is None:
      return
    if not api_coverage.is_builtin_value(node.obj):
      return
    doc = api_coverage.source_docstring(node.parent.obj, attr.name)
    attr.docstring = (
      griffe.Docstring(
        doc,
        parent=attr,
        parser=agent.docstring_parser,
        parser_options=agent.docstring_options,
      )
      if doc
      else None
    )

  def on_function_instance(
    self, *, node: Any, func: griffe.Function, agent: Any, **kwargs: Any
  ) -> None:
    if not isinstance(node, griffe.ObjectNode):
      return
    shown = [p for p in func.parameters if p.default and _ADDRESS.search(str(p.default))]
    if shown:
      defaults = inspect.signature(node.obj).parameters
      for param in shown:
        name = public_name(defaults[param.name].default, _NAMED_IN)
        if name is not None:
          param.default = name
    unreadable = [p for p in func.parameters if p.default and not _is_expression(str(p.default))]
    if unreadable:
      written = source_defaults(node.obj)
      for param in unreadable:
        param.default = written.get(param.name, param.default)

  def on_class_instance(self, *, node: Any, cls: griffe.Class, agent: Any, **kwargs: Any) -> None:
    bases = [public_base(str(b)) for b in cls.bases]
    cls.bases = [b for b in bases if b is not None]

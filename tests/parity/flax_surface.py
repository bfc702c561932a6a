"""Records flax.nnx's public import surface (run in an environment with flax).

<python with flax> tests/parity/flax_surface.py

Writes ``flax_surface_<flax version>.json`` beside this file: for every public
module path under ``flax.nnx``
(private modules and the Linen ``bridge`` package left out), the public
functions, classes and constants a user can import from it. A name counts when
the module defines it (``def``/``class``/assignment), re-exports it explicitly
(``from x import y as y``), lists it in ``__all__``, or, for a package's
``__init__``, imports it from inside flax. Type variables, typing constructs,
modules and plain aliases of third-party types (``Array = jax.Array``) are left
out. ``tests/test_flax_surface.py`` checks every such file (one per flax version
measured) against nnx_eqx.

It also records, under ``signatures``, the parameters (name and kind, from
``inspect.signature``) of every public callable found: a function's, a class's
``__init__`` and, for an ``nnx.Module`` subclass, its ``__call__``. A callable that
several module paths export is recorded once, under the path of the module that
defines it when that path is public (else the first path in sorted order), as
``"<path>:<name>"`` or ``"<path>:<Class>.__init__"``, each parameter as
``"<name>:<kind>"`` in signature order; the kinds are ``inspect``'s names:
``POSITIONAL_ONLY``, ``POSITIONAL_OR_KEYWORD``, ``VAR_POSITIONAL``, ``KEYWORD_ONLY``,
``VAR_KEYWORD``; ``self`` is left out. Callables flax re-exports from JAX
(``nnx.relu`` is ``jax.nn.relu``) are left out: their parameters are the installed
JAX's, and nnx_eqx exports the same objects.
"""

import ast
import functools
import importlib
import inspect
import json
import pathlib
import pkgutil
import sys
import typing

import flax
import flax.nnx

SKIP_PACKAGES = ("flax.nnx.bridge",)  # the Linen bridge: out of scope (needs flax)
TYPING_MODULES = {"typing", "typing_extensions", "collections.abc", "abc", "types", "builtins"}


def _top_level_statements(body):
  for node in body:
    if isinstance(node, ast.If | ast.Try):
      yield from _top_level_statements(node.body)
      yield from _top_level_statements(getattr(node, "orelse", []))
    else:
      yield node


def _candidate_names(module) -> set[str]:
  source = inspect.getsource(module)
  tree = ast.parse(source)
  is_package = module.__file__.endswith("__init__.py")
  names: set[str] = set(getattr(module, "__all__", ()))
  for node in _top_level_statements(tree.body):
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
      names.add(node.name)
    elif isinstance(node, ast.Assign | ast.AnnAssign):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      names.update(t.id for t in targets if isinstance(t, ast.Name))
    elif isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
      source_module = importlib.import_module(node.module or "")
      names.update(n for n in _candidate_names(source_module) if _keep(source_module, n))
    elif isinstance(node, ast.ImportFrom):
      inside_flax = node.level > 0 or (node.module or "").startswith("flax")
      for alias in node.names:
        if alias.asname is not None and alias.asname == alias.name:
          names.add(alias.name)  # explicit re-export
        elif is_package and inside_flax and alias.name != "*":
          names.add(alias.asname or alias.name)
  return {n for n in names if not n.startswith("_")}


def _is_typing_thing(value) -> bool:
  if isinstance(value, typing.TypeVar | typing.ParamSpec):
    return True
  kind_module = getattr(type(value), "__module__", "")
  if kind_module in ("typing", "typing_extensions"):
    return True  # Any, Union[...], generic aliases, NewType, ...
  return getattr(value, "__module__", None) in TYPING_MODULES and not callable(value)


def _keep(module, name: str) -> bool:
  if not hasattr(module, name):
    return False
  value = getattr(module, name)
  if inspect.ismodule(value) or _is_typing_thing(value):
    return False
  if inspect.isclass(value):
    origin = value.__module__
    if origin.split(".")[0] in sys.stdlib_module_names:
      return False  # typing, collections, abc, ... re-imported
    if getattr(value, "_is_protocol", False):
      return False  # a typing Protocol (the ``Simple*Fn`` call signatures)
    # ``Array = jax.Array``: a type alias for a third-party class, unless re-exported
    # by its own name (``from jax import Array as Array`` style is kept).
    if not origin.startswith("flax") and value.__name__ != name:
      return False
  return True


def public_modules() -> list[str]:
  paths = ["flax.nnx"]
  for info in pkgutil.walk_packages(flax.nnx.__path__, "flax.nnx."):
    parts = info.name.split(".")
    if any(p.startswith("_") for p in parts) or info.name.startswith(SKIP_PACKAGES):
      continue
    paths.append(info.name)
  return sorted(paths)


# Type aliases users import by name although the rules above leave typing things out.
EXTRA = {"flax.nnx.graph": ["Key"], "flax.nnx.graphlib": ["Key"]}


def surface() -> dict[str, list[str]]:
  result = {}
  for path in public_modules():
    module = importlib.import_module(path)
    names = sorted(
      {n for n in _candidate_names(module) if _keep(module, n)} | set(EXTRA.get(path, []))
    )
    if path == "flax.nnx":
      # The package re-exports with ``from .x import y as y``; its submodule
      # attributes (nnx.nn, nnx.graph, ...) are checked as module paths.
      names = sorted(n for n in names if f"flax.nnx.{n}" not in result)
    result[path.replace("flax.nnx", "nnx_eqx", 1)] = names
  return result


def _parameters(fn, drop_first: bool):
  try:
    params = list(inspect.signature(fn).parameters.values())
  except (TypeError, ValueError):
    return None  # a builtin or C callable without a signature
  if drop_first and params and params[0].kind is not inspect.Parameter.VAR_POSITIONAL:
    params = params[1:]
  return [f"{p.name}:{p.kind.name}" for p in params]


def _own_method(cls, name):
  """``cls.<name>`` when a flax class (not ``object`` or a stdlib base) defines it."""
  for klass in cls.__mro__:
    if name in vars(klass):
      origin = klass.__module__.split(".")[0]
      return vars(klass)[name] if origin not in ("builtins", "typing", "abc") else None
  return None


def _from_flax(value) -> bool:
  """Defined by flax (not a JAX function or class flax re-exports, e.g. ``nnx.relu``:
  its parameters are those of the installed JAX, the same object in nnx_eqx)."""
  if isinstance(value, functools.partial):  # e.g. the compat transforms
    value = value.func
  home = getattr(value, "__module__", None) or ""
  return home.split(".")[0] == "flax"


def signatures(modules: dict[str, list[str]]) -> dict[str, list[str]]:
  chosen: dict[int, tuple[str, str, object]] = {}
  for path in sorted(modules):
    module = importlib.import_module(path.replace("nnx_eqx", "flax.nnx", 1))
    for name in modules[path]:
      value = getattr(module, name)
      if not callable(value) or not _from_flax(value):
        continue
      home = getattr(value, "__module__", "") or ""
      defined_here = home == module.__name__
      if id(value) not in chosen or (defined_here and not chosen[id(value)][2]):
        chosen[id(value)] = (path, name, defined_here)
  result: dict[str, list[str]] = {}
  for path, name, _ in chosen.values():
    value = getattr(importlib.import_module(path.replace("nnx_eqx", "flax.nnx", 1)), name)
    entries = []
    if inspect.isclass(value):
      init = _own_method(value, "__init__")
      if init is not None:
        entries.append((f"{path}:{name}.__init__", init, True))
      if issubclass(value, flax.nnx.Module):
        call = _own_method(value, "__call__")
        if call is not None:
          entries.append((f"{path}:{name}.__call__", call, True))
    else:
      entries.append((f"{path}:{name}", value, False))
    for key, fn, drop_first in entries:
      params = _parameters(fn, drop_first)
      if params is not None:
        result[key] = params
  return result


if __name__ == "__main__":
  modules = surface()
  data = {"_flax_version": flax.__version__, "modules": modules, "signatures": signatures(modules)}
  out = pathlib.Path(__file__).with_name(f"flax_surface_{flax.__version__}.json")
  out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
  total = sum(len(v) for v in data["modules"].values())
  n_params = sum(len(v) for v in data["signatures"].values())
  print(
    f"wrote {out}: {len(data['modules'])} modules, {total} names, "
    f"{len(data['signatures'])} signatures with {n_params} parameters"
  )

"""The names pickles record for nnx_eqx's objects, kept stable on purpose.

``pickle`` stores a class or function by ``__module__`` and ``__qualname__``, so a
file saved by one release names the modules that defined its classes then. Three
rules keep every such name loadable after the files inside the package move:

* Public classes name the public namespace that exports them (``nnx_eqx`` first,
  else the shortest public module path: ``nnx_eqx.Param``, ``nnx_eqx.bridge.Linear``);
  :func:`publish_all` sets it at import, once every public module is loaded. Classes
  already defined in a public module (``nnx_eqx.nn.linear.Linear``, flax's module
  paths) keep it. The public exceptions read the same way in tracebacks.
* Internal objects a pickle can reach (the rebuild functions of GraphDefs and trace
  tokens, the classes behind GraphDef values) name this module: :data:`INTERNAL`
  lists them, and they are attributes here.
* The private module paths of earlier releases stay importable: :data:`MOVED`
  maps each to the module that holds its contents now, and an import hook made
  here loads the new module under the old name. A later move adds its lines.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Any

from .graph._errors import is_private_module

MOVED: dict[str, str] = {
  "nnx_eqx.graph._tracing": "nnx_eqx.graph.tracing._traces",
  "nnx_eqx.graph._lost_updates": "nnx_eqx.graph.tracing._lost_updates",
  "nnx_eqx.graph._variables": "nnx_eqx.graph.variables._variables",
  "nnx_eqx.graph._variable_metadata": "nnx_eqx.graph.variables._metadata",
  "nnx_eqx.graph._var_defaults": "nnx_eqx.graph.variables._defaults",
  "nnx_eqx.graph._variable_names": "nnx_eqx.graph.variables._names",
  "nnx_eqx.graph._hijax": "nnx_eqx.graph.variables._hijax",
  "nnx_eqx.graph._hijax_api": "nnx_eqx.graph.variables._hijax_api",
  "nnx_eqx.graph._refs": "nnx_eqx.graph.variables._refs",
  "nnx_eqx.graph._ref_placeholders": "nnx_eqx.graph.variables._ref_placeholders",
  "nnx_eqx.graph._state": "nnx_eqx.graph.state._state",
  "nnx_eqx.graph._flat_state": "nnx_eqx.graph.state._state",
  "nnx_eqx.graph._filters": "nnx_eqx.graph.state._filters",
  "nnx_eqx.graph._diff_state": "nnx_eqx.graph.state._diff_state",
  "nnx_eqx.graph._state_tools": "nnx_eqx.graph.state._state_tools",
  "nnx_eqx.graph._walk": "nnx_eqx.graph.walk._walk",
  "nnx_eqx.graph._node_types": "nnx_eqx.graph.walk._node_types",
  "nnx_eqx.graph._nodedefs": "nnx_eqx.graph.walk._nodedefs",
  "nnx_eqx.graph._graphdef": "nnx_eqx.graph.walk._graphdef",
  "nnx_eqx.graph._links": "nnx_eqx.graph.walk._links",
  "nnx_eqx.graph._paths": "nnx_eqx.graph.walk._paths",
  "nnx_eqx.graph._duplicates": "nnx_eqx.graph.walk._duplicates",
  "nnx_eqx.graph._pytree_nodes": "nnx_eqx.graph.walk._pytree_nodes",
  "nnx_eqx.graph._tree_mode": "nnx_eqx.graph.walk._tree_mode",
  "nnx_eqx.graph._graph_mode": "nnx_eqx.graph.walk._graph_mode",
  "nnx_eqx.graph._pytree_view": "nnx_eqx.graph.pytree._view",
  "nnx_eqx.graph._pytree_build": "nnx_eqx.graph.pytree._build",
  "nnx_eqx.graph._pytree_flags": "nnx_eqx.graph.pytree._flags",
  "nnx_eqx.graph._graph": "nnx_eqx.graph.api._functional",
  "nnx_eqx.graph._graphlib": "nnx_eqx.graph.api._flatten",
  "nnx_eqx.graph._contexts": "nnx_eqx.graph.api._contexts",
  "nnx_eqx.graph._cached_partial": "nnx_eqx.graph.api._cached_partial",
  "nnx_eqx.graph._map": "nnx_eqx.graph.api._map",
  "nnx_eqx.graph._prefix": "nnx_eqx.graph.api._prefix",
  "nnx_eqx.graph._module_iter": "nnx_eqx.graph.api._module_iter",
  "nnx_eqx.graph._graph_state": "nnx_eqx.graph.api._graph_state",
  "nnx_eqx.graph._tree_form": "nnx_eqx.graph.api._tree_form",
  "nnx_eqx.graph._repr": "nnx_eqx.graph.api._repr",
  "nnx_eqx.transforms._lift": "nnx_eqx.transforms.lifting._lift",
  "nnx_eqx.transforms._dispatch": "nnx_eqx.transforms.lifting._dispatch",
  "nnx_eqx.transforms._seed_hooks": "nnx_eqx.transforms.lifting._seed_hooks",
  "nnx_eqx.transforms._ref_outputs": "nnx_eqx.transforms.lifting._ref_outputs",
  "nnx_eqx.transforms._axes": "nnx_eqx.transforms.axes._specs",
  "nnx_eqx.transforms._carry": "nnx_eqx.transforms.axes._carry",
  "nnx_eqx.transforms._leafaxes": "nnx_eqx.transforms.axes._leaf_axes",
  "nnx_eqx.transforms._node_outputs": "nnx_eqx.transforms.axes._node_outputs",
  "nnx_eqx.transforms._shardings": "nnx_eqx.transforms.axes._shardings",
  "nnx_eqx.transforms._rng_split": "nnx_eqx.transforms.rngs._split",
  "nnx_eqx.transforms._rng_tools": "nnx_eqx.transforms.rngs._tools",
  "nnx_eqx.transforms._autodiff": "nnx_eqx.transforms.lifted._autodiff",
  "nnx_eqx.transforms._control": "nnx_eqx.transforms.lifted._control",
  "nnx_eqx.transforms._custom_vjp": "nnx_eqx.transforms.lifted._custom_vjp",
  "nnx_eqx.transforms._eval_shape": "nnx_eqx.transforms.lifted._eval_shape",
  "nnx_eqx.transforms._jit": "nnx_eqx.transforms.lifted._jit",
  "nnx_eqx.transforms._pmap": "nnx_eqx.transforms.lifted._pmap",
  "nnx_eqx.transforms._remat": "nnx_eqx.transforms.lifted._remat",
  "nnx_eqx.transforms._scan": "nnx_eqx.transforms.lifted._scan",
  "nnx_eqx.transforms._shard_map": "nnx_eqx.transforms.lifted._shard_map",
  "nnx_eqx.transforms._staging": "nnx_eqx.transforms.lifted._staging",
  "nnx_eqx.transforms._vjp": "nnx_eqx.transforms.lifted._vjp",
  "nnx_eqx.transforms._vmap": "nnx_eqx.transforms.lifted._vmap",
  "nnx_eqx.transforms._transform_metadata": "nnx_eqx.transforms.lifted._transform_metadata",
  "nnx_eqx.transforms._stack": "nnx_eqx._stacking",
  "nnx_eqx.bridge._iter": "nnx_eqx.bridge.walk._iter",
  "nnx_eqx.bridge._registry": "nnx_eqx.bridge.walk._registry",
  "nnx_eqx.bridge._state": "nnx_eqx.bridge.walk._eqx_state",
  "nnx_eqx.bridge._deep_eqx": "nnx_eqx.bridge.walk._deep_from_eqx",
  "nnx_eqx.bridge._context": "nnx_eqx.bridge.walk._context",
  "nnx_eqx.bridge._deep": "nnx_eqx.bridge.walk._deep_to_eqx",
  "nnx_eqx.bridge._to_eqx": "nnx_eqx.bridge.walk._to_eqx",
  "nnx_eqx.bridge._static": "nnx_eqx.bridge.convert._static",
  "nnx_eqx.bridge._pickling": "nnx_eqx.bridge.convert._pickling",
  "nnx_eqx.bridge._bridged": "nnx_eqx.bridge.convert._bridged",
  "nnx_eqx.bridge._shared": "nnx_eqx.bridge.convert._shared",
  "nnx_eqx.bridge._random": "nnx_eqx.bridge.convert._random",
  "nnx_eqx.bridge._generic": "nnx_eqx.bridge.convert._generic",
  "nnx_eqx.bridge._convert": "nnx_eqx.bridge.convert._convert",
  "nnx_eqx.bridge._layers": "nnx_eqx.bridge.layers._layers",
  "nnx_eqx.bridge._attention": "nnx_eqx.bridge.layers._attention",
  "nnx_eqx.bridge._norms": "nnx_eqx.bridge.layers._norms",
  "nnx_eqx.bridge._recurrent": "nnx_eqx.bridge.layers._recurrent",
  "nnx_eqx.bridge._eqx_layers": "nnx_eqx.bridge.layers._eqx_layers",
  "nnx_eqx.bridge._stack": "nnx_eqx.bridge.layers._stack_shape",
  "nnx_eqx.bridge._converters": "nnx_eqx.bridge.layers._converters",
}
"""Private module paths of nnx_eqx 0.1.0 -> the modules that hold their contents now."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Imports an old path of :data:`MOVED` as the module it moved to (one module
  object under both names, so ``pickle`` finds the classes it names)."""

  def __init__(self) -> None:
    self._specs: dict[str, Any] = {}  # old name -> the new module's own spec, while loading

  def find_spec(self, fullname, path=None, target=None):
    if fullname not in MOVED:
      return None
    return importlib.machinery.ModuleSpec(fullname, self)

  def create_module(self, spec):
    module = importlib.import_module(MOVED[spec.name])
    self._specs[spec.name] = module.__spec__
    return module

  def exec_module(self, module):
    # the import system has just set ``module.__spec__`` to the old name's spec:
    # the module keeps its own (relative imports inside it resolve from it)
    module.__spec__ = self._specs.pop(module.__spec__.name)


def install_moved_modules() -> None:
  """Adds the import hook of :data:`MOVED` once (after the file-system finders, so a
  real module of that name, should one exist, wins)."""
  if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def publish(namespace: dict[str, Any], name: str) -> None:
  """Sets ``__module__`` to ``name`` on the classes in ``namespace`` (a module's
  globals) that are exported under their own name and still named by a private
  module of the package."""
  for key, obj in list(namespace.items()):
    if (
      isinstance(obj, type)
      and obj.__name__ == key
      and obj.__module__.startswith("nnx_eqx")
      and is_private_module(obj.__module__)
    ):
      _rename(obj, obj.__module__, name)


def _rename(obj: Any, old: str, new: str) -> None:
  """Sets ``__module__`` to ``new`` on ``obj`` and, for a class, on the functions
  its body defines (methods, and those under properties, static and class methods):
  a method left naming the private module would make documentation tools that
  follow ``__module__`` (griffe) resolve it back and forth between the two."""
  obj.__module__ = new
  if not isinstance(obj, type):
    return
  # ``inspect`` reads a class's source from the file of its ``__module__`` at its
  # ``__firstlineno__``: in the new module's file that line is another one (a
  # docstring, say, on which griffe's tokenizer fails), so the class has none there.
  if "__firstlineno__" in vars(obj):
    delattr(obj, "__firstlineno__")
  for attr in vars(obj).values():
    inner = [attr]
    if isinstance(attr, staticmethod | classmethod):
      inner = [attr.__func__]
    elif isinstance(attr, property):
      inner = [attr.fget, attr.fset, attr.fdel]
    for fn in inner:
      if callable(fn) and getattr(fn, "__module__", None) == old:
        try:
          fn.__module__ = new
        except (AttributeError, TypeError):  # (a builtin or slot wrapper)
          pass


def publish_all() -> None:
  """:func:`publish` over the package's public modules imported so far, the
  top-level namespace first, then by the length of their paths; then the internal
  names of :data:`INTERNAL` are given this module."""
  names = sorted(
    (n for n in list(sys.modules) if n.split(".")[0] == "nnx_eqx" and not is_private_module(n)),
    key=lambda n: (n.count("."), n),
  )
  for n in names:
    publish(vars(sys.modules[n]), n)
  this = sys.modules[__name__]
  for module, attrs in INTERNAL.items():
    source = importlib.import_module(module)
    for attr in attrs:
      obj = getattr(source, attr)
      if getattr(this, attr, obj) is not obj:
        raise RuntimeError(f"two internal pickle names {attr!r}: rename one")
      setattr(this, attr, obj)
      if obj.__module__ != __name__:
        _rename(obj, obj.__module__, __name__)


INTERNAL: dict[str, tuple[str, ...]] = {
  "nnx_eqx.graph.tracing._traces": ("current_trace",),
  "nnx_eqx.graph.walk._graphdef": ("_graphdef_from_flat", "_seed_of"),
  "nnx_eqx.graph.walk._walk": ("_stale_walk",),
  "nnx_eqx.graph.pytree._view": ("NodeDef",),
  "nnx_eqx.graph.pytree._flags": ("Mode",),
  "nnx_eqx.graph.variables._hijax": ("to_hijax",),
  "nnx_eqx.nn._common": ("promote_dtype",),
  "nnx_eqx.bridge.convert._generic": ("nnx_class",),
  "nnx_eqx.bridge.convert._bridged": ("bridged_class",),
}
"""Internal objects that pickles name, by the module defining them: each is an
attribute of this module, and names it."""

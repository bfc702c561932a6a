"""What ``nnx.<name>`` does for a flax.nnx name nnx_eqx does not define.

flax.nnx's submodules are attributes after ``from flax import nnx``; here the
ones not imported by the package itself (``reprlib``, ``tracers``, ...) are
imported on first access. A flax name that is out of scope (the Linen bridge,
flax's engine internals: the names of :mod:`._flax_missing`) raises
:class:`OutOfScopeError`, which says so and points to the alternative; any
other unknown name raises the usual ``AttributeError``. :func:`install` puts
the ``__getattr__`` that does this on each namespace concerned.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ._flax_missing import MISSING
from .graph._errors import NnxError

DOCS = "docs/migration/from_flax.md, section 'Names not provided'"

# Submodules imported on first access (flax.nnx has them as attributes), and
# flax's module aliases (``nnx.object`` is its pytreelib, ``nnx.optimizer`` its
# training.optimizer); lazy, so that ``from nnx_eqx import *`` cannot shadow the
# builtin ``object``.
LAZY_SUBMODULES = {
  "ids": "nnx_eqx.ids",
  "proxy_caller": "nnx_eqx.proxy_caller",
  "reprlib": "nnx_eqx.reprlib",
  "tracers": "nnx_eqx.tracers",
  "testing": "nnx_eqx.testing",
  "object": "nnx_eqx.pytreelib",
  "optimizer": "nnx_eqx.training.optimizer",
}

_LINEN_BRIDGE = (
  "is flax's Linen bridge (flax.nnx.bridge: Linen modules inside NNX and back), which nnx_eqx"
  " does not provide: it has no Linen. nnx_eqx.bridge is the Equinox bridge instead"
  " (nnx.to_eqx / nnx.from_eqx convert modules both ways; see docs/guides/bridge.md). To"
  " keep using a Linen model, run it with flax, or port it to nnx_eqx layers."
)

# name -> why it is missing and what to use instead, per namespace.
OUT_OF_SCOPE: dict[str, dict[str, str]] = {
  "nnx_eqx": {
    "wrappers": _LINEN_BRIDGE,
    "scripts": "is flax's own maintenance scripts, not part of the library's API.",
  },
  "nnx_eqx.bridge": {
    name: _LINEN_BRIDGE
    for name in (
      "AttrPriority",
      "Functional",
      "Module",
      "NNXMeta",
      "Scope",
      "ToLinen",
      "ToNNX",
      "compact",
      "current_context",
      "current_module",
      "functional",
      "initializers",
      "interop",
      "lazy_init",
      "linen_in_bridge_mdl",
      "module",
      "nnx_in_bridge_mdl",
      "to_linen",
      "to_nnx",
      "variables",
      "with_partitioning",
      "wrappers",
    )
  },
}


class OutOfScopeError(NnxError, AttributeError):
  """A flax.nnx name that nnx_eqx deliberately does not provide was asked for
  (the Linen bridge, flax internals); the message names the alternative.

  It is an ``AttributeError``, so ``hasattr`` and ``getattr(..., default)``
  behave as for any missing attribute.

  Example:
    >>> import nnx_eqx as nnx
    >>> try:
    ...   nnx.bridge.ToNNX
    ... except nnx.OutOfScopeError as e:
    ...   print(str(e)[:52])
    nnx_eqx.bridge.ToNNX is flax's Linen bridge (flax.nn
  """


def _not_provided() -> dict[str, dict[str, str]]:
  """``{module: {name: reason}}`` of the flax names not provided (built once)."""
  if not _BY_MODULE:
    for reason, names in MISSING:
      for entry in names:
        module, _, name = entry.partition(":")
        if name:
          _BY_MODULE.setdefault(module, {})[name] = reason
  return _BY_MODULE


_BY_MODULE: dict[str, dict[str, str]] = {}


def missing(module: str, name: str) -> AttributeError:
  """The error for ``<module>.<name>``: :class:`OutOfScopeError` for a known
  out-of-scope flax name, else a plain ``AttributeError`` naming the list of
  flax names not provided."""
  why = OUT_OF_SCOPE.get(module, {}).get(name)
  if why is not None:
    return OutOfScopeError(f"{module}.{name} {why} The flax.nnx names not provided: {DOCS}.")
  reason = _not_provided().get(module, {}).get(name)
  if reason is not None:
    return OutOfScopeError(
      f"{module}.{name} (flax.nnx has it) is not provided by nnx_eqx: {reason} The flax.nnx"
      f" names not provided: {DOCS}."
    )
  return AttributeError(
    f"module {module!r} has no attribute {name!r}. If it is a flax.nnx name, see the list of"
    f" names nnx_eqx does not provide ({DOCS})."
  )


def module_getattr(module: ModuleType):
  """A module-level ``__getattr__`` for ``module``: lazy submodules (for the
  package root), then :func:`missing`. Keeps a ``__getattr__`` it already had."""
  prior = module.__dict__.get("__getattr__")
  name_of = module.__name__

  def __getattr__(name: str):
    if name_of == "nnx_eqx" and name in LAZY_SUBMODULES:
      return importlib.import_module(LAZY_SUBMODULES[name])
    if prior is not None:
      try:
        return prior(name)
      except AttributeError:
        pass
    raise missing(name_of, name)

  return __getattr__


def install() -> None:
  """Puts :func:`module_getattr` on the package root and on every namespace that
  has flax names not provided (e.g. ``nnx.graphlib``, ``nnx.bridge``)."""
  for name in ("nnx_eqx", *OUT_OF_SCOPE, *_not_provided()):
    module = importlib.import_module(name)
    if not getattr(module.__dict__.get("__getattr__"), "_nnx_flax_names", False):
      hook = module_getattr(module)
      hook._nnx_flax_names = True  # type: ignore[attr-defined]
      setattr(module, "__getattr__", hook)  # noqa: B010

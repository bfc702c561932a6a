"""The lazy import of flax.nnx and the tests for flax objects that need no import."""

from __future__ import annotations

import importlib
from typing import Any

from .._errors import FlaxNotInstalledError

INSTALL_HINT = "pip install 'nnx_eqx[flax]'"


def flax_nnx() -> Any:
  """``flax.nnx``, imported on first use (flax is an optional dependency).

  Raises:
    FlaxNotInstalledError: flax is not installed; the message names the extra.
  """
  try:
    from flax import nnx  # optional: the `flax` extra
  except ImportError as e:
    raise FlaxNotInstalledError(
      f"nnx.from_flax / nnx.to_flax need flax (flax.nnx). Fix: {INSTALL_HINT}."
    ) from e
  return nnx


def flax_side() -> Any:
  """The bridge's flax-side module (``_flax_side``, which imports flax at its top),
  loaded on first use like flax itself.

  Raises:
    FlaxNotInstalledError: flax is not installed.
  """
  flax_nnx()
  return importlib.import_module(f"{__package__}._flax_side")


def flax_classes(obj: Any) -> list[str]:
  """The ``module.qualname`` of every class of flax in ``type(obj)``'s MRO (no import)."""
  return [
    f"{c.__module__}.{c.__qualname__}"
    for c in type(obj).__mro__
    if c.__module__ == "flax" or c.__module__.startswith("flax.")
  ]


def is_flax_object(obj: Any) -> bool:
  """True if ``obj`` is an instance of a class of flax (or of a subclass of one)."""
  return bool(flax_classes(obj))


def is_linen(obj: Any) -> bool:
  """True if ``obj`` is a flax Linen Module (out of the bridge's scope)."""
  return any(c.startswith("flax.linen.") for c in flax_classes(obj))


def describe(obj: Any) -> str:
  """``Class (from module)`` for error messages."""
  t = type(obj)
  return f"{t.__qualname__} (from {t.__module__})"

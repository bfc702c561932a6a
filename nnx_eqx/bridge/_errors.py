"""Errors raised by the Equinox bridge.

Every class derives from :class:`nnx.NnxError` (so ``except nnx.NnxError``
catches them) and from the builtin a caller would expect. Messages name the
offending path, what was expected and found, and the fix.
"""

from __future__ import annotations

from ..graph._errors import NnxError


class BridgeError(NnxError):
  """Base class of the errors raised by ``nnx.to_eqx`` / ``nnx.from_eqx``."""


class UnconvertibleFieldError(BridgeError, TypeError):
  """A field or attribute holds something the bridge cannot represent on the
  other side (e.g. arrays inside a custom pytree that is not a Module)."""


class ConverterClashError(BridgeError, ValueError):
  """``nnx.bridge.register`` was called for a type that already has a converter."""


class StatefulModuleError(BridgeError, TypeError):
  """``nnx.to_eqx`` was called on a module whose state Equinox keeps in
  ``eqx.nn.State``; use ``nnx.to_eqx_with_state``."""


class MissingStateError(BridgeError, KeyError):
  """An ``eqx.nn.StateIndex`` has no value: the ``eqx.nn.State`` lacks its
  marker, or no State was given for a model whose initial state was deleted."""

  def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
    return str(self.args[0]) if self.args else ""


class SharedConversionError(BridgeError, ValueError):
  """An ``eqx.nn.Shared`` cannot be mapped onto shared Variables (its ``get``
  computes new arrays instead of selecting nodes), or shared Variables cannot be
  expressed as an ``eqx.nn.Shared`` (they are used in different layouts)."""


class CycleError(BridgeError, ValueError):
  """The NNX graph has a reference cycle, which no Equinox pytree can hold."""

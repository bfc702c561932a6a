"""The converter registry: one entry per (Equinox layer, NNX module) pair.

``nnx.from_eqx`` looks up the *exact* type of each Equinox module it meets and
``nnx.to_eqx`` the exact type of each NNX module; types without an entry
convert generically (see ``_generic``). A converter may return
``NotImplemented`` to decline a particular instance (e.g. an ``nnx.Linear``
with a computation ``dtype`` that ``eqx.nn.Linear`` cannot express), which
sends that instance down the generic path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ...graph._errors import public_name, type_names
from .._errors import ConverterClashError


class Converter(NamedTuple):
  """A registered pair.

  Attributes:
    eqx_type: the Equinox module class.
    nnx_type: the NNX module class.
    to_nnx: ``(eqx_module, ctx) -> nnx_module`` (or ``NotImplemented``), or None
      if this pair only converts towards Equinox.
    to_eqx: ``(nnx_module, ctx) -> eqx_module`` (or ``NotImplemented``), or None
      if this pair only converts towards NNX.

  Example:
    >>> import equinox as eqx, nnx_eqx as nnx
    >>> pair = next(c for c in nnx.bridge.registered() if c.eqx_type is eqx.nn.GRUCell)
    >>> pair.nnx_type is nnx.bridge.GRUCell
    True
  """

  eqx_type: type
  nnx_type: type
  to_nnx: Callable[[Any, Any], Any] | None
  to_eqx: Callable[[Any, Any], Any] | None


_TO_NNX: dict[type, Converter] = {}
_TO_EQX: dict[type, Converter] = {}

GENERIC: dict[str, Callable[[Any, Any], Any]] = {}
"""The conversions for types without a converter: ``"to_nnx"`` (any ``eqx.Module``)
and ``"to_eqx"`` (any NNX module). They build on the contexts that call them, so
``_generic`` registers them here."""


def _name(t: type) -> str:
  return public_name(t)


def register(
  eqx_type: type,
  nnx_type: type,
  *,
  to_nnx: Callable[[Any, Any], Any] | None = None,
  to_eqx: Callable[[Any, Any], Any] | None = None,
  override: bool = False,
) -> Converter:
  """Registers a converter pair between an Equinox and an NNX module type.

  ``to_nnx(eqx_module, ctx)`` builds the NNX module; ``to_eqx(nnx_module, ctx)``
  builds the Equinox module. ``ctx`` converts children and creates Variables
  (``ctx.variable``, ``ctx.child``, ``ctx.leaf``, ``ctx.state_index``; see
  :class:`nnx.bridge.FromEqxContext` and :class:`nnx.bridge.ToEqxContext`),
  which keeps sharing and ``eqx.nn.State`` bookkeeping correct. Either function
  may return ``NotImplemented`` to fall back to generic conversion. Lookups use
  exact types, so subclasses convert generically unless registered too.

  Layers stacked with ``eqx.filter_vmap`` (or ``nnx.vmap``) reach the same
  converter with leading axes on every array: a converter either maps arrays
  with functions of their trailing axes (so the stack axes pass through) or
  returns ``NotImplemented`` for stacks; :func:`nnx.bridge.stack_shape` tells
  the stack axes, and None when the arrays disagree (then decline).

  Args:
    eqx_type: an ``eqx.Module`` subclass.
    nnx_type: an ``nnx.Module`` subclass.
    to_nnx: converter towards NNX (keyed by ``eqx_type``), or None.
    to_eqx: converter towards Equinox (keyed by ``nnx_type``), or None.
    override: replace existing converters for these types instead of raising.

  Returns:
    The registered :class:`Converter`.

  Raises:
    ConverterClashError: if ``eqx_type`` already has a ``to_nnx`` converter (or
      ``nnx_type`` a ``to_eqx`` one) and ``override`` is False; the message names
      both pairs.
    TypeError: if neither ``to_nnx`` nor ``to_eqx`` is given.

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Scale(eqx.Module):
    ...   s: jnp.ndarray
    ...   def __call__(self, x): return self.s * x
    >>> class NnxScale(nnx.Module):
    ...   def __call__(self, x): return self.s.value * x
    >>> def to_nnx(m, ctx):
    ...   out = NnxScale(); out.s = ctx.variable("s"); return out
    >>> def to_eqx(m, ctx):
    ...   return Scale(ctx.leaf("s"))
    >>> _ = nnx.bridge.register(Scale, NnxScale, to_nnx=to_nnx, to_eqx=to_eqx)
    >>> type(nnx.from_eqx(Scale(jnp.ones(2)))).__name__
    'NnxScale'
    >>> nnx.bridge.unregister(Scale, NnxScale)
  """
  if to_nnx is None and to_eqx is None:
    raise TypeError(
      f"register({', '.join(type_names(eqx_type, nnx_type))}): give `to_nnx=` and/or"
      " `to_eqx=`, the functions that convert each way."
    )
  conv = Converter(eqx_type, nnx_type, to_nnx, to_eqx)
  if not override:
    if to_nnx is not None and eqx_type in _TO_NNX:
      old = _TO_NNX[eqx_type]
      raise _clash("Equinox", eqx_type, old, conv)
    if to_eqx is not None and nnx_type in _TO_EQX:
      old = _TO_EQX[nnx_type]
      raise _clash("NNX", nnx_type, old, conv)
  if to_nnx is not None:
    _TO_NNX[eqx_type] = conv
  if to_eqx is not None:
    _TO_EQX[nnx_type] = conv
  return conv


def _clash(side: str, t: type, old: Converter, new: Converter) -> ConverterClashError:
  return ConverterClashError(
    f"The {side} type {_name(t)} already has a converter: {_name(old.eqx_type)} <->"
    f" {_name(old.nnx_type)}; cannot also register {_name(new.eqx_type)} <->"
    f" {_name(new.nnx_type)}. Fix: pass `override=True` to replace it, or call"
    f" `nnx.bridge.unregister({', '.join(type_names(old.eqx_type, old.nnx_type))})` first."
  )


def unregister(eqx_type: type | None = None, nnx_type: type | None = None) -> None:
  """Removes the converters keyed by ``eqx_type`` (towards NNX) and ``nnx_type``
  (towards Equinox); missing entries are ignored.

  Example:
    >>> import equinox as eqx, nnx_eqx as nnx
    >>> nnx.bridge.unregister(eqx.nn.PReLU)   # nothing registered: no error
  """
  if eqx_type is not None:
    _TO_NNX.pop(eqx_type, None)
  if nnx_type is not None:
    _TO_EQX.pop(nnx_type, None)


def lookup_to_nnx(eqx_type: type) -> Converter | None:
  """The converter for Equinox modules of exactly ``eqx_type``, or None."""
  return _TO_NNX.get(eqx_type)


def lookup_to_eqx(nnx_type: type) -> Converter | None:
  """The converter for NNX modules of exactly ``nnx_type``, or None."""
  return _TO_EQX.get(nnx_type)


def registered() -> list[Converter]:
  """Every registered converter pair (each listed once).

  Example:
    >>> import equinox as eqx, nnx_eqx as nnx
    >>> any(c.eqx_type is eqx.nn.Conv2d for c in nnx.bridge.registered())
    True
  """
  seen: dict[int, Converter] = {}
  for c in (*_TO_NNX.values(), *_TO_EQX.values()):
    seen.setdefault(id(c), c)
  return list(seen.values())

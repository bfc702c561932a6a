"""Equinox forms with a public class of their own.

``nnx.to_eqx`` makes one Equinox class per (NNX class, attribute layout), named after
the NNX class (the Equinox form of a user's ``Net`` reads ``Net``). Where the NNX class
is one of nnx_eqx's own public classes, that name would be taken twice, by two
different classes; such a class registers an Equinox base class here instead, and
its forms subclass that base and take its name (``nnx.from_flax``'s ``FlaxModule``
-> ``nnx.bridge.EqxFlaxModule``).
"""

from __future__ import annotations

_BASES: dict[type, type] = {}


def register_form(nnx_type: type, eqx_base: type) -> None:
  """Makes the Equinox forms of ``nnx_type`` (and its subclasses) subclasses of
  ``eqx_base``, named as it is."""
  _BASES[nnx_type] = eqx_base


def form_base(nnx_type: type) -> type | None:
  """The registered Equinox base class of ``nnx_type``'s forms, or None."""
  for klass in nnx_type.__mro__:
    found = _BASES.get(klass)
    if found is not None:
      return found
  return None

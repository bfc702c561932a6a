"""Boolean mode flags of some module classes as leaves of the pytree view.

Equinox keeps a layer's ``inference: bool`` as a pytree leaf, and
``eqx.nn.inference_mode`` flips it with ``eqx.tree_at``, which can only replace
leaves. A class registered with :func:`register_flag` (the Equinox bridge
registers its converted layers) names the attribute that holds its flag; as a
pytree such a module has one more child, last, keyed ``.inference``: the flag
(see ``_pytree_view``). The flag's value also stays in the aux data, which
compares without it, so a mask or a model in the other mode keeps the
structure, as in Equinox, where the flag is only a leaf.

Rebuilding from concrete bools sets the flags; any other leaf (a tracer under
``jax.jit``, ``None`` from ``eqx.partition``, a placeholder of ``eqx.tree_at``)
leaves the flag as the aux data has it and is only remembered, so that
``module.inference`` returns the very object that was put in. Hence plain
``jax.jit`` over a module still branches on its static flags, and
``nnx.split``/``nnx.jit`` (which never see these leaves) keep them static.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from . import _version

FLAG_ATTRS: dict[type, str] = {}
_OVERRIDE = "_nnx_flag_leaf"


def read(node: Any) -> Any:
  """The flag of ``node``: what a pytree map put there, else its attribute."""
  d = node.__dict__
  return d[_OVERRIDE] if _OVERRIDE in d else d[FLAG_ATTRS[type(node)]]


def _flag_property(attr: str) -> property:
  def fget(self):
    d = self.__dict__
    return d[_OVERRIDE] if _OVERRIDE in d else d[attr]

  def fset(self, value):
    self.__dict__.pop(_OVERRIDE, None)
    if attr == "inference":
      if self.__dict__.get("_nnx_in_graph"):
        _version.bump()  # a static attribute of a walked graph changes
      self.__dict__["inference"] = value
    else:
      setattr(self, attr, value)

  return property(fget, fset, doc=f"Equinox's ``inference`` flag (this module's ``{attr}``).")


def register_flag(cls: type, attr: str) -> None:
  """Exposes the bool attribute ``attr`` of ``cls`` as ``cls.inference`` and as a
  leaf of the pytree view of any graph that contains an instance.

  Args:
    cls: a graph node class (e.g. a Module subclass).
    attr: the attribute holding the flag (``"inference"``, ``"deterministic"``...).

  Raises:
    TypeError: if ``cls`` already defines a different ``inference`` attribute.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> from nnx_eqx.graph._pytree_flags import register_flag
    >>> class Drop(nnx.Module):
    ...   def __init__(self): self.deterministic = False
    >>> register_flag(Drop, "deterministic")
    >>> jax.tree.leaves(Drop()), Drop().inference
    ([False], False)
  """
  existing = cls.__dict__.get("inference")
  if existing is not None and not isinstance(existing, property):
    raise TypeError(
      f"register_flag: {cls.__qualname__} defines `inference` itself; it cannot also"
      f" expose {attr!r} under that name. Fix: rename the class attribute."
    )
  FLAG_ATTRS[cls] = attr
  type.__setattr__(cls, "inference", _flag_property(attr))


def _concrete(v: Any) -> bool | None:
  if isinstance(v, (bool, np.bool_)):
    return bool(v)
  if isinstance(v, (np.ndarray, jax.Array)) and not isinstance(v, jax.core.Tracer):
    if v.shape == () and v.dtype == np.bool_:
      return bool(v)
  return None


def apply(node: Any, attr: str, value: Any) -> bool:
  """Sets (a concrete bool) or remembers (anything else) the flag ``attr`` of a
  node just rebuilt with its static value; returns whether the node still has
  that static value (so its record stays valid)."""
  d = node.__dict__
  b = _concrete(value)
  if b is None:
    d[_OVERRIDE] = value
    return True
  same = d[attr] is b
  d[attr] = b
  return same

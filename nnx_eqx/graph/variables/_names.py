"""Linen collection names <-> Variable types (as flax.nnx.variablelib).

flax.nnx keeps a one-to-one registry between Linen-style collection names
(``"params"``, ``"batch_stats"``, ...) and NNX Variable classes; checkpoint
converters and bridges use it to name State partitions.
"""

from __future__ import annotations

from typing import Any

from .._errors import NnxError
from ._variables import BatchStat, Cache, Intermediate, Param, Perturbation, Variable

VariableTypeCache: dict[str, type[Variable]] = {}
"""``{collection name: Variable type}`` for every registered name (the built-in ones and
those ``variable_type_from_name`` or ``register_variable_name`` added)."""


class VariableNameError(NnxError, ValueError):
  """A collection name or Variable type is not (or already) registered."""


def variable_type_from_name(
  name: str, /, *, base: type[Variable] = Variable, allow_register: bool = False
) -> type[Variable]:
  """The Variable class registered for the Linen collection ``name``.

  Args:
    name: a collection name, e.g. ``"params"``.
    base: the base class of a newly created type (with ``allow_register``).
    allow_register: create and register a ``base`` subclass named ``name`` if
      none is registered.

  Returns:
    The Variable class.

  Raises:
    VariableNameError: if ``name`` is not registered and ``allow_register`` is False.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.variable_type_from_name("params") is nnx.Param
    True
    >>> nnx.variable_type_from_name("my_stats", allow_register=True).__name__
    'my_stats'
  """
  if name not in VariableTypeCache:
    if not allow_register:
      raise VariableNameError(
        f"Collection name {name!r} is not registered. Fix: call"
        " nnx.register_variable_name(name, VariableType) or pass allow_register=True."
      )
    VariableTypeCache[name] = type(name, (base,), {})
  return VariableTypeCache[name]


def variable_name_from_type(typ: type[Variable], /, *, allow_register: bool = False) -> str:
  """The Linen collection name registered for the Variable class ``typ``
  (the inverse of :func:`variable_type_from_name`).

  Args:
    typ: a Variable subclass.
    allow_register: register ``typ`` under its class name if it is not registered.

  Returns:
    The collection name.

  Raises:
    VariableNameError: if ``typ`` is not registered and ``allow_register`` is
      False, or its class name is already taken by another type.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.variable_name_from_type(nnx.BatchStat)
    'batch_stats'
  """
  for name, t in VariableTypeCache.items():
    if t is typ:
      return name
  if not allow_register:
    raise VariableNameError(
      f"Variable type {typ.__name__} is not registered. Fix: call"
      " nnx.register_variable_name(name, typ) or pass allow_register=True."
    )
  name = typ.__name__
  if name in VariableTypeCache:
    raise VariableNameError(
      f"Collection name {name!r} is already registered for {VariableTypeCache[name].__name__};"
      f" it cannot also name {typ.__name__}. Fix: register {typ.__name__} under another name."
    )
  VariableTypeCache[name] = typ
  return name


def register_variable_name(name: str, typ: Any = None, *, overwrite: bool = False) -> Any:
  """Registers ``typ`` as the Variable class of the collection ``name``.

  Without ``typ`` it returns a class decorator.

  Args:
    name: the collection name.
    typ: the Variable subclass (or None to get a decorator).
    overwrite: replace an existing registration of ``name``.

  Returns:
    ``typ`` (or the decorator).

  Raises:
    VariableNameError: if ``name`` is registered already and ``overwrite`` is False.

  Example:
    >>> import nnx_eqx as nnx
    >>> @nnx.register_variable_name("counts_doc")
    ... class Count(nnx.Variable):
    ...   pass
    >>> nnx.variable_type_from_name("counts_doc") is Count
    True
  """
  if typ is None:
    return lambda t: register_variable_name(name, t, overwrite=overwrite)
  if not overwrite and name in VariableTypeCache:
    raise VariableNameError(
      f"Collection name {name!r} is already registered for"
      f" {VariableTypeCache[name].__name__}. Fix: pass overwrite=True to replace it."
    )
  VariableTypeCache[name] = typ
  return typ


register_variable_name("params", Param)
register_variable_name("batch_stats", BatchStat)
register_variable_name("cache", Cache)
register_variable_name("intermediates", Intermediate)
register_variable_name("perturbations", Perturbation)

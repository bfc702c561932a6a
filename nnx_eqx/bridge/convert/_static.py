"""Unhashable static fields on the Equinox side, read back as themselves.

JAX compares (and may hash) the auxiliary data of a pytree node, so a static
field of an ``eqx.Module`` should be hashable. An NNX attribute need not be:
a model's config is often a frozen dataclass holding a list. The Equinox
classes that ``nnx.to_eqx`` generates therefore keep such a value in the
instance ``__dict__`` inside a private :class:`Hashed` box (what Equinox's
flatten puts in the treedef), and install a :class:`StaticField` descriptor
for the field so that reading the attribute gives the original object.
"""

from __future__ import annotations

from typing import Any


class Hashed:
  """A static value that cannot be hashed, made hashable for a treedef.

  Equal when the values are ``==`` (as Equinox compares hashable static
  fields); the hash is that of the value's type, which equal values share.
  """

  __slots__ = ("value", "_hash")

  def __init__(self, value: Any):
    self.value = value
    self._hash = hash(type(value))

  def __eq__(self, other: object) -> bool:
    if self is other:
      return True
    if type(other) is not Hashed or self._hash != other._hash:
      return False
    if self.value is other.value:
      return True
    try:
      return bool(self.value == other.value)
    except Exception:  # noqa: BLE001 - e.g. an ambiguous array truth value: not equal
      return False

  def __hash__(self) -> int:
    return self._hash

  def __repr__(self) -> str:
    return f"Hashed({self.value!r})"


def is_hashable(value: Any) -> bool:
  try:
    hash(value)
  except TypeError:
    return False
  return True


def box(value: Any) -> Any:
  """``value``, or a :class:`Hashed` box around it if it is unhashable."""
  if type(value) is Hashed or is_hashable(value):
    return value
  return Hashed(value)


class StaticField:
  """Data descriptor for a static field that may hold an unhashable value.

  Setting the attribute (also ``object.__setattr__``, which Equinox's
  unflatten uses) stores the value boxed if it is unhashable; reading it
  returns the value itself. Equinox's flatten reads ``obj.__dict__`` directly,
  so the treedef holds the hashable box.

  Example:
    >>> import dataclasses, nnx_eqx as nnx
    >>> @dataclasses.dataclass(frozen=True)
    ... class Config:
    ...   layer_types: list
    >>> class Net(nnx.Module):
    ...   def __init__(self):
    ...     self.config = Config(["attention", "mlp"])
    ...     self.lin = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> e = nnx.to_eqx(Net())
    >>> e.config.layer_types
    ['attention', 'mlp']
  """

  __slots__ = ("name",)

  def __init__(self, name: str):
    self.name = name

  def __get__(self, obj: Any, owner: Any = None) -> Any:
    if obj is None:
      return self
    try:
      value = obj.__dict__[self.name]
    except KeyError:
      raise AttributeError(self.name) from None
    return value.value if type(value) is Hashed else value

  def __set__(self, obj: Any, value: Any) -> None:
    obj.__dict__[self.name] = box(value)

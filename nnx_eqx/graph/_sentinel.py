"""``MISSING``: the default of a parameter that may be left out, told apart from any value.

A plain ``object()`` would do as well for ``is`` tests, but it prints as
``<object object at 0x7f...>``, an address that differs in every process, in
``help()``, signatures and the API reference; ``MISSING`` prints as its name.
"""

from __future__ import annotations

from typing import Any, Final


class Sentinel:
  """A marker object that prints as its name and survives copying as itself.

  Example:
    >>> from nnx_eqx.graph._sentinel import MISSING
    >>> import copy
    >>> MISSING, copy.deepcopy(MISSING) is MISSING
    (MISSING, True)
  """

  __slots__ = ("_name",)

  def __init__(self, name: str) -> None:
    self._name = name

  def __repr__(self) -> str:
    return self._name

  def __copy__(self) -> Sentinel:
    return self

  def __deepcopy__(self, memo: dict) -> Sentinel:
    return self

  def __reduce__(self) -> str:
    return self._name  # pickled by reference: the module-level name of this marker


MISSING: Final[Any] = Sentinel("MISSING")
"""An argument that was not given (``data(value=MISSING)``, ``split_rngs(node=MISSING)``)."""

"""Equinox's ``inference`` flag on the Equinox form of an NNX module with a mode.

An NNX module holding mode attributes (``deterministic``, ``use_running_average``,
or an ``inference`` bool: see ``graph.pytree._flags``) converts, by the generic path
(``_bridged``), to an Equinox class with

- a static field ``_nnx_modes``: ``((name, value), ...)``, those attributes as they
  were converted (what ``nnx.from_eqx`` rebuilds when nothing switched them);
- a dynamic field ``inference`` holding a :class:`~nnx_eqx.graph.pytree._flags.Mode`,
  a pytree node without leaves whose aux data is the mode, so ``jax.jit`` and
  ``eqx.filter_jit`` key their caches on it, pytree maps leave it alone, and
  ``eqx.nn.inference_mode`` (``eqx.tree_at(lambda m: m.inference, ...)``) finds it;
- read-only properties for the other mode attributes, giving their current values.

``eqx.tree_at`` puts a bool where the ``Mode`` was; Equinox's unflatten stores it
with ``object.__setattr__``, which the :class:`InferenceField` descriptor turns back
into a ``Mode``. A ``Mode`` equal to the converted attributes' common value means
"as converted" (so switching back gives the original structure, and the cache hits);
any other value is the mode of every mode attribute, as ``module.eval()`` /
``module.train()`` set them on the NNX side.
"""

from __future__ import annotations

from typing import Any

from ...graph.pytree._flags import Mode, coerce, set_mode

FIELD = "inference"
BASE = "_nnx_modes"


def common(base: tuple) -> bool | None:
  """The one value of the mode attributes ``base`` (``((name, value), ...)``), or
  None when they are None or disagree (as ``Mode.value`` reads on the NNX side)."""
  first = base[0][1]
  return first if all(v is first for _, v in base[1:]) else None


def switched(obj: Any) -> tuple[bool, bool | None]:
  """``(True, value)`` if ``obj``'s ``inference`` was set to a mode other than the
  one it was converted in, else ``(False, None)``."""
  d = obj.__dict__
  mode = d[FIELD].value
  if mode is common(d[BASE]):
    return False, None
  return True, mode


def current(obj: Any, name: str) -> bool | None:
  """The current value of ``obj``'s mode attribute ``name``."""
  on, value = switched(obj)
  return value if on else dict(obj.__dict__[BASE])[name]


class InferenceField:
  """Data descriptor of the ``inference`` field (see the module docstring).

  Reading gives the stored :class:`Mode` (the very node of the pytree, as
  ``eqx.tree_at`` needs); setting it (also ``object.__setattr__``, which Equinox's
  unflatten uses) stores a ``Mode``, made from a bool if given one.

  Raises:
    ModeFlagError: on setting a traced value or anything but a bool or None.
  """

  __slots__ = ()

  def __get__(self, obj: Any, owner: Any = None) -> Any:
    if obj is None:
      return self
    try:
      return obj.__dict__[FIELD]
    except KeyError:
      raise AttributeError(FIELD) from None

  def __set__(self, obj: Any, value: Any) -> None:
    if type(value) is not Mode:
      value = Mode(coerce(value, type(obj).__name__, getattr(type(obj), "_nnx_mode_names", ())))
    obj.__dict__[FIELD] = value


def _mode_property(name: str) -> property:
  def fget(self: Any) -> Any:
    return current(self, name)

  return property(fget, doc=f"The current ``{name}`` (set by ``inference``).")


def install(cls: type, names: tuple[str, ...]) -> None:
  """Gives the Equinox class ``cls`` (made after the dataclass transform, with
  ``_nnx_mode_names = names``) the ``inference`` descriptor and a read-only property
  per mode attribute ``names``."""
  setattr(cls, FIELD, InferenceField())
  for n in names:
    if n != FIELD:
      setattr(cls, n, _mode_property(n))


def fields(base: tuple) -> dict[str, Any]:
  """The Equinox fields for mode attributes ``base`` (``((name, value), ...)``)."""
  return {BASE: base, FIELD: Mode(common(base))}


def rebuild(obj: Any, module: Any) -> None:
  """Sets the mode of ``module`` (just rebuilt from ``obj`` with the converted mode
  attributes) to ``obj``'s, if ``inference`` switched it: as ``eval()``/``train()``."""
  on, value = switched(obj)
  if on:
    set_mode(module, tuple(n for n, _ in obj.__dict__[BASE]), value)

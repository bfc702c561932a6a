"""Mode flags in the pytree view: what ``eqx.nn.inference_mode`` switches.

A Module holding a *mode attribute* (``deterministic``, ``use_running_average``
or Equinox's ``inference``, valued a bool or ``None``) has ``module.inference``
and, as a pytree, one more child, last, keyed ``.inference``: a :class:`Mode`,
a pytree node with no leaves whose aux data is the mode. The mode attributes
themselves stay static in the node's aux data, and they take part in its
equality: **a mode is structure**. So

- ``jax.jit``, ``eqx.filter_jit`` and ``nnx.jit`` key their caches on it: a
  model switched to the other mode retraces (or reuses that mode's trace) and
  never runs the other mode's program (Equinox's own layers, whose ``inference``
  is a leaf, fail under plain ``jax.jit`` at ``if inference:``);
- pytree maps never touch it (it has no leaves), so masks such as
  ``jax.tree.map(lambda _: False, model)``, ``eqx.is_array`` filters and
  ``eqx.partition``/``eqx.combine`` keep the model's structure in either mode;
- ``eqx.nn.inference_mode`` finds the node through ``module.inference`` and
  ``eqx.tree_at`` puts a bool in its place: rebuilding sets every mode attribute
  of that Module to it, as ``module.eval()`` / ``module.train()`` do (a ``None``
  attribute, flax's "decided by the call", is set too).

Unlike Equinox, two models in different modes do not share a structure:
``jax.tree.map(f, model_train, model_eval)`` raises JAX's structure mismatch.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._errors import ModeFlagError

MODE_ATTRS = ("deterministic", "use_running_average", "inference")
"""Attributes that make a Module's mode (each a bool, or None for "unset")."""

OVERRIDE = "_nnx_flag_leaf"
"""Key in a rebuilt node's ``__dict__``: the :class:`Mode` child it was rebuilt with."""


class Mode:
  """The ``.inference`` child of a Module in the pytree view: its mode.

  A pytree node without leaves; its aux data is ``value``. ``module.inference``
  returns one (on a Module rebuilt by a pytree map, that very child, so that
  ``eqx.tree_at`` finds it); it behaves as the bool it holds.

  Attributes:
    value: True (inference mode), False (training mode), or None (the mode
      attributes are unset, decided by the call, or disagree).

  Raises:
    TypeError: from ``bool(mode)`` when ``value`` is None.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> d = nnx.Dropout(0.5, deterministic=True)
    >>> r = jax.tree.map(lambda x: x, d)
    >>> r.inference, bool(r.inference), r.inference == True
    (Mode(True), True, True)
  """

  __slots__ = ("value",)

  def __init__(self, value: bool | None):
    self.value = value

  def __bool__(self) -> bool:
    if self.value is None:
      raise TypeError(
        "This Module's mode is not one bool (its mode attributes are None or disagree)."
        " Fix: set it with module.eval() / module.train() or eqx.nn.inference_mode."
      )
    return self.value

  def __eq__(self, other: object) -> bool:
    v = other.value if isinstance(other, Mode) else other
    return self.value is v if v is None or isinstance(v, bool) else NotImplemented  # type: ignore[return-value]

  def __hash__(self) -> int:
    return hash(self.value)

  def __repr__(self) -> str:
    return f"Mode({self.value})"


_new = object.__new__


def _flatten_mode(m: Mode) -> tuple:
  return (), m.value


def _unflatten_mode(value: Any, _: Any) -> Mode:  # (a hot path: no ``__init__``)
  m = _new(Mode)
  m.value = value
  return m


jax.tree_util.register_pytree_node(Mode, _flatten_mode, _unflatten_mode)


def mode_attrs(node: Any) -> tuple[str, ...] | None:
  """The mode attributes ``node`` holds (as a bool or None), or None if none:
  only for classes with the ``inference`` property (Modules)."""
  cls = type(node)
  if getattr(cls, "inference", None) is not INFERENCE or getattr(cls, "_nnx_container", False):
    return None
  d = node.__dict__
  if "inference" in d and not (d["inference"] is None or type(d["inference"]) is bool):
    return None  # an attribute of that name that is no mode: the node has no flag
  found = tuple(a for a in MODE_ATTRS if a in d and (d[a] is None or type(d[a]) is bool))
  return found or None


def _value(d: dict, attrs: tuple[str, ...]) -> bool | None:
  if not attrs:
    return None
  first = d[attrs[0]]
  return first if all(d[a] is first for a in attrs[1:]) else None


def mode_of(layout: tuple, attrs: tuple[str, ...]) -> Mode:
  """The Mode of a node whose static attributes are ``layout`` (see ``NodeDef``)."""
  return Mode(_value({k: sv.value for k, kind, sv in layout if kind == 0}, attrs))


def child(node: Any, mode: Mode) -> Mode:
  """The ``.inference`` child of ``node`` (whose mode is ``mode``): the Mode a
  pytree map put there while it still holds that mode, else ``mode``."""
  ov = node.__dict__.get(OVERRIDE)
  return ov if ov.__class__ is Mode and ov.value is mode.value else mode


def read(node: Any) -> Mode:
  """``node.inference`` of a node holding mode attributes."""
  return child(node, Mode(_value(node.__dict__, mode_attrs(node) or ())))


def _fget(self: Any) -> Any:
  d = self.__dict__
  attrs = mode_attrs(self)
  if attrs is None:
    if "inference" in d:
      return d["inference"]  # an attribute of that name that is no mode flag
    raise AttributeError(f"{type(self).__name__!r} object has no attribute 'inference'")
  return read(self)  # the node's child in the pytree view, as ``eqx.tree_at`` needs


def _fset(self: Any, value: Any) -> None:
  d = self.__dict__
  d.pop(OVERRIDE, None)
  if type(value) is Mode:
    value = value.value  # e.g. ``a.inference = b.inference``
  attrs = mode_attrs(self)
  if attrs is None or "inference" in d or not (value is None or type(value) is bool):
    d["inference"] = value  # an attribute of that name (the caller bumped the version)
    return
  for a in attrs:
    setattr(self, a, value)


def _fdel(self: Any) -> None:
  d = self.__dict__
  if "inference" not in d:
    raise AttributeError(f"{type(self).__name__!r} object has no attribute 'inference'")
  d.pop(OVERRIDE, None)
  del d["inference"]


INFERENCE = property(
  _fget,
  _fset,
  _fdel,
  doc="""The Module's mode, as Equinox's ``inference`` flag: a :class:`Mode`.

Its ``value`` is True/False when all of the Module's mode attributes
(``deterministic``, ``use_running_average``, ``inference``) hold that value, None
when they are None or disagree; setting ``inference`` to a bool or None sets all
of them. Missing (``AttributeError``) on a Module holding none, so
``eqx.nn.inference_mode`` passes it by.""",
)


def register_flag(cls: type) -> None:
  """Gives ``cls`` (a graph node class holding a mode attribute, e.g. a class
  whose own ``inference`` field would hide :class:`Module`'s) the
  ``inference`` property, so that its mode is part of its pytree view.

  Args:
    cls: a Module subclass.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> from nnx_eqx.graph.pytree._flags import register_flag
    >>> class Drop(nnx.Module):
    ...   inference = False
    ...   def __init__(self): self.inference = False
    >>> register_flag(Drop)
    >>> jax.tree.structure(Drop()) == jax.tree.structure(Drop())
    True
  """
  type.__setattr__(cls, "inference", INFERENCE)


def _concrete(v: Any) -> bool | None:
  if isinstance(v, (bool, np.bool_)):
    return bool(v)
  if isinstance(v, (np.ndarray, jax.Array)) and not isinstance(v, jax.core.Tracer):
    if v.shape == () and v.dtype == np.bool_:
      return bool(v)
  return None


def coerce(value: Any, owner: str, attrs: tuple[str, ...]) -> bool | None:
  """The mode ``value`` put at ``.inference`` of ``owner`` (whose mode attributes are
  ``attrs``): a bool or None (a concrete bool array counts as its bool).

  Raises:
    ModeFlagError: if ``value`` is a tracer or anything but a bool or None.
  """
  b = None if value is None else _concrete(value)
  if b is None and value is not None:
    traced = isinstance(value, jax.core.Tracer)
    raise ModeFlagError(
      f"{'A traced value' if traced else f'A {type(value).__name__}'} was put at"
      f" `.inference` of a {owner} (its mode attributes {list(attrs)});"
      " a mode decides which program is traced, so it must be a Python bool (or None)."
      " Fix: "
      + (
        "switch modes outside the traced function (eqx.nn.inference_mode(model) or"
        " model.eval() before the call)."
        if traced
        else "pass True or False (eqx.nn.inference_mode(model, value))."
      )
    )
  return b


SET_MODE = "_nnx_set_mode"
"""A class attribute: a method ``(self, value)`` that sets the node's mode where
writing its mode attributes is not enough (a Module holding another library's
layers, e.g. flax.nnx's, whose own flags must change too)."""


def set_mode(node: Any, attrs: tuple[str, ...], value: bool | None) -> None:
  """Sets every mode attribute ``attrs`` of the freshly rebuilt ``node`` to ``value``,
  through its class's ``_nnx_set_mode`` where it has one."""
  hook = getattr(type(node), SET_MODE, None)
  if hook is not None:
    hook(node, value)
    return
  d = node.__dict__
  for a in attrs:
    d[a] = value


def apply(node: Any, attrs: tuple[str, ...], value: Any) -> bool:
  """Handles the ``.inference`` child ``value`` of a node just rebuilt with its
  static mode attributes ``attrs``: a Mode is kept (as ``node.inference``); a
  bool (or None) put there by ``eqx.tree_at`` sets every mode attribute (see
  :func:`set_mode`). Returns whether the node's static attributes are unchanged
  (so its record stays valid).

  Raises:
    ModeFlagError: if ``value`` is a tracer or anything but a bool or None.
  """
  d = node.__dict__
  if type(value) is Mode:
    d[OVERRIDE] = value
    return True
  b = coerce(value, type(node).__name__, attrs)
  if all(d[a] is b for a in attrs):
    return True
  set_mode(node, attrs, b)
  return False

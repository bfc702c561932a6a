"""Hijax Variables (flax.nnx 0.12's ``hijax=True``): Variables JAX itself tracks.

An ordinary Variable is a pytree node: ``jax.jit`` flattens it to its value and
builds a fresh Variable inside, so an update made there is lost unless a lifted
transform (``nnx.jit``) writes it back. A *hijax* Variable keeps its state in a
JAX ``Box``, a mutable "hi-type" that JAX traces as one value with quasi-dynamic
data (its current pytree structure and leaf types): plain ``jax.jit``,
``jax.grad`` and ``jax.lax.scan`` carry updates made inside them out to the
caller's Box, whether the Variable was an argument or a closure capture, and the
update may even change the value's structure (a dict gaining a key).

Here a hijax Variable is a :class:`HijaxVariable` handle: a Variable whose raw
storage is the Box, and the Box holds an ordinary Variable (value plus metadata,
possibly in ref mode). Every method reads that inner Variable out of the Box,
runs the ordinary Variable method on it and, for updates, writes it back. Split,
merge and pytree flattening see the Box as the Variable's value, so a handle
rebuilt by ``merge`` (or inside ``jax.jit``) updates the same Box. This follows
flax.nnx 0.12 (whose ``HijaxVariable`` is itself the hi-type); the Box is JAX's
own ``jax._src.hijax.Box``, imported here only.
"""

from __future__ import annotations

from typing import Any

import jax

from ._errors import JaxVersionError
from ._variables import (
  _BINARY_OPS,
  _COMPARISONS,
  _UNARY,
  TO_HIJAX,
  Variable,
  new_variable,
)

#: The last jax release whose private ``jax._src.hijax`` has the ``Box`` hi-type.
LAST_JAX_WITH_BOX = "0.11.0"


class _MissingBox:
  """Stands in for JAX's Box where jax lacks it: making one raises the version error."""

  def __init__(self, *args: Any, **kwargs: Any) -> None:
    raise JaxVersionError(BOX_MISSING)


try:  # JAX's Box hi-type is private API: jax 0.7 (at least) to 0.11.0 have it
  from jax._src.hijax import Box as _Box

  HAS_BOX = True
except ImportError:  # jax 0.11.1 and newer: hijax Variables are unavailable
  _Box = _MissingBox  # type: ignore[assignment,misc]
  HAS_BOX = False

#: Why hijax Variables are unavailable where :data:`HAS_BOX` is false.
BOX_MISSING = (
  f"hijax Variables (hijax=True) keep their state in JAX's Box (jax._src.hijax.Box), which"
  f" jax {jax.__version__} lacks: it is in jax <= {LAST_JAX_WITH_BOX} and was removed in 0.11.1."
  f" Fix: install jax<={LAST_JAX_WITH_BOX} (and a matching jaxlib), or create the Variable"
  " with hijax=False (the default; `nnx.var_defaults(hijax=False)` for a block)."
)


_VAR_TYPE = "var_type"


def to_hijax(variable: Variable) -> HijaxVariable:
  """A hijax Variable holding (a reference to) ``variable``'s value and metadata.

  Args:
    variable: an ordinary Variable (any type, plain or ref mode); a hijax one is
      returned as is.

  Returns:
    A :class:`HijaxVariable` whose state lives in a new JAX Box.

  Raises:
    TypeError: if ``variable`` is not a Variable.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.variablelib import to_hijax
    >>> v = to_hijax(nnx.Param(jnp.ones(2)))
    >>> v.hijax, isinstance(v, nnx.Param), v.shape
    (True, True, (2,))
  """
  if isinstance(variable, HijaxVariable):
    return variable
  if not isinstance(variable, Variable):
    raise TypeError(f"to_hijax: expected a Variable, got {type(variable).__name__}.")
  md = {_VAR_TYPE: type(variable)}
  return new_variable(HijaxVariable, _Box(variable), md, variable._trace)  # type: ignore[return-value]


def to_lojax(variable: Variable) -> Variable:
  """The ordinary Variable a hijax Variable holds now (a new object); other
  Variables are returned as they are.

  Raises:
    TypeError: never.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.variablelib import to_hijax, to_lojax
    >>> low = to_lojax(to_hijax(nnx.Param(jnp.ones(2), tag="w")))
    >>> type(low).__name__, low.hijax, low.tag
    ('Param', False, 'w')
  """
  if isinstance(variable, HijaxVariable):
    return _get(variable)
  return variable


def holds_hijax(tree: Any) -> bool:
  """Whether ``tree`` (any pytree, Modules included) holds a hijax Variable."""
  return any(isinstance(x, _Box) for x in jax.tree.leaves(tree))


def _get(h: HijaxVariable) -> Variable:
  return h.__dict__["_value"].get()


def _no_grad(x: Any) -> Any:
  return jax.lax.stop_gradient(x) if isinstance(x, jax.core.Tracer) else x


def _put(h: HijaxVariable, inner: Variable) -> None:
  # A Box's state carries no gradient (JAX cannot transpose through it), so a value
  # computed from differentiated inputs (e.g. BatchNorm's running mean inside
  # ``jax.grad``) is stored without its tangent, as flax's layers do for hijax.
  h.__dict__["_value"].set(jax.tree.map(_no_grad, inner))


def _reader(name: str):
  def method(self, *args, **kwargs):
    return getattr(_get(self), name)(*args, **kwargs)

  method.__name__ = name
  return method


def _writer(name: str, returns_self: bool = False):
  def method(self, *args, **kwargs):
    inner = _get(self)
    out = getattr(inner, name)(*args, **kwargs)
    _put(self, inner)
    return self if returns_self else out

  method.__name__ = name
  return method


def _inner_property(name: str) -> property:
  return property(lambda self: getattr(_get(self), name), doc=f"The held Variable's ``{name}``.")


class HijaxVariable(Variable):
  """A Variable whose state JAX tracks as a mutable hi-type (flax.nnx 0.12's
  ``hijax=True``): updates made inside plain ``jax.jit``/``jax.grad``/
  ``jax.lax.scan`` reach the caller, for arguments and closure captures alike.

  Built by ``nnx.Param(x, hijax=True)``, under ``nnx.var_defaults(hijax=True)``,
  by ``variable.copy(hijax=True)`` or ``nnx.with_vars(node, hijax=True)``.
  ``type(v)`` is ``HijaxVariable`` for every Variable type (as in flax), while
  ``isinstance(v, nnx.Param)`` and ``v.type`` answer for the held Variable's
  type. ``nnx.with_vars(node, hijax=False)`` gives ordinary Variables back.
  Values are read and written as usual (``v[...]``, ``v.value``, ``v += 1``,
  ``v["key"] = x`` for dict values); the held Variable is read out of the Box
  on each access, so prefer ordinary Variables on hot eager paths. Values
  written carry no gradient (they are stored under ``jax.lax.stop_gradient``);
  to differentiate with respect to hijax Variables, pass
  ``nnx.with_vars(state, hijax=False)`` to ``jax.grad``, as in flax.

  Raises:
    TraceContextError: never for updates: JAX orders them by effects, so a hijax
      Variable may be updated from any trace.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> count = nnx.Variable(jnp.array(0), hijax=True)
    >>> @jax.jit
    ... def step(c):
    ...   c[...] += 1
    >>> step(count); step(count)
    >>> int(count[...]), type(count).__name__
    (2, 'HijaxVariable')
  """

  def __new__(cls, *args: Any, **metadata: Any):
    if cls is not HijaxVariable:
      return object.__new__(cls)
    metadata["hijax"] = False
    return to_hijax(Variable(*args, **metadata))

  def __init__(self, *args: Any, **metadata: Any):
    pass  # built by ``__new__``/``to_hijax``

  @property  # type: ignore[misc]
  def __class__(self) -> type:  # noqa: D105  (isinstance(v, Param) sees the held type)
    return self.__dict__["_metadata"][_VAR_TYPE]

  @property
  def var_type(self) -> type:
    """The held Variable's type (``Param``, ``BatchStat``, ...)."""
    return self.__dict__["_metadata"][_VAR_TYPE]

  @property
  def type(self) -> type:
    """The held Variable's type, as flax.nnx's ``variable.type``."""
    return self.var_type

  @property
  def hijax(self) -> bool:
    """True: this Variable's state is tracked by JAX."""
    return True

  @property
  def value(self) -> Any:
    """The held value (an array, or any pytree)."""
    return _get(self).value

  @value.setter
  def value(self, new: Any) -> None:
    inner = _get(self)
    inner.value = new
    _put(self, inner)

  ref = _inner_property("ref")
  shape = _inner_property("shape")
  dtype = _inner_property("dtype")
  ndim = _inner_property("ndim")
  size = _inner_property("size")
  metadata = _inner_property("metadata")

  def get_metadata(self, name: str | None = None, *default: Any) -> Any:
    """As :meth:`Variable.get_metadata`, reporting ``hijax=True``."""
    if name == "hijax":
      return True
    md = _get(self).get_metadata(name, *default)
    return {**md, "hijax": True} if name is None else md

  def copy(self, *, ref: bool | None = None, hijax: bool | None = None) -> Variable:
    """A copy with its own storage; ``hijax=False`` gives an ordinary Variable."""
    low = _get(self).copy(ref=ref)
    return low if hijax is False else to_hijax(low)

  def replace(self, value: Any = None, **metadata: Any) -> Variable:
    """A hijax copy with ``value`` and/or metadata replaced."""
    return to_hijax(_get(self).replace(value, **metadata))

  def __getattr__(self, name: str) -> Any:
    if name.startswith("__"):
      raise AttributeError(name)
    return getattr(_get(self), name)

  def __setattr__(self, name: str, value: Any) -> None:
    if name == "value":
      object.__setattr__(self, name, value)
      return
    inner = _get(self)
    setattr(inner, name, value)
    _put(self, inner)

  def __repr__(self) -> str:
    text = repr(_get(self))
    return f"{text[:-1]}, hijax=True)"

  def __copy__(self) -> Variable:
    return self.copy()

  def __deepcopy__(self, memo: dict) -> Variable:
    return self.copy()

  def __reduce__(self):
    return (to_hijax, (_get(self),))


for _name in (
  "get_value",
  "get_raw_value",
  "__getitem__",
  "__call__",
  "__len__",
  "__iter__",
  "__contains__",
  "__bool__",
  "__int__",
  "__float__",
  "__index__",
  "__array__",
  "__jax_array__",
  "__treescope_repr__",
):
  setattr(HijaxVariable, _name, _reader(_name))
for _name in ("set_value", "set_raw_value", "__setitem__", "__delitem__", "set_metadata"):
  setattr(HijaxVariable, _name, _writer(_name))
for _op in list(_BINARY_OPS) + list(_COMPARISONS) + list(_UNARY):
  setattr(HijaxVariable, f"__{_op}__", _reader(f"__{_op}__"))
for _op in _BINARY_OPS:
  setattr(HijaxVariable, f"__r{_op}__", _reader(f"__r{_op}__"))
  setattr(HijaxVariable, f"__i{_op}__", _writer(f"__i{_op}__", returns_self=True))
TO_HIJAX[0] = to_hijax

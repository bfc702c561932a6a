"""Declarative Modules and Pytrees: ``nnx.dataclass`` and its field helpers (seed dataclasses).

``nnx.dataclass`` turns a Module or Pytree subclass into a standard-library
dataclass. Fields declared with the helpers below are wrapped after
``__init__`` (and ``__post_init__``) has run:

* ``param_field()`` wraps the value in ``nnx.Param``; ``var_field(T)`` in ``T``
  (any Variable subclass, e.g. ``nnx.BatchStat``);
* ``node_field()`` wraps it in ``nnx.Node`` (a graph leaf), unless it already
  is a Variable;
* ``static_field()`` keeps it static: values that would be nodes (arrays,
  registered node types) are wrapped in ``nnx.Static``; others already are;
* ``field()`` is ``dataclasses.field`` with no wrapping.

Values that already have the declared container type are kept as they are,
so shared Variables stay shared.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ..graph.variables._variables import Param, Variable
from ..module._module import Module
from ..module._pytree import Pytree as NnxPytree
from ._boxes import KEY, DataclassError, _Box, _boxes, box_fields
from ._pytree import Pytree

_MISSING = dataclasses.MISSING


def _field(box: _Box | None, kwargs: dict) -> Any:
  metadata = dict(kwargs.pop("metadata", None) or {})
  if KEY in metadata:
    raise DataclassError(
      f"field metadata may not contain the reserved key {KEY!r}. Fix: rename that metadata entry."
    )
  if box is not None:
    metadata[KEY] = box
  kwargs = {k: v for k, v in kwargs.items() if v is not _MISSING}
  return dataclasses.field(metadata=metadata, **kwargs)


def field(
  *,
  default: Any = _MISSING,
  default_factory: Any = _MISSING,
  init: bool = True,
  repr: bool = True,
  hash: bool | None = None,
  compare: bool = True,
  metadata: dict | None = None,
  kw_only: Any = _MISSING,
) -> Any:
  """A plain dataclass field (``dataclasses.field``); the value is stored as given.

  Raises:
    DataclassError: if ``metadata`` uses the reserved key ``"nnx_box"``.

  Example:
    >>> import nnx_eqx as nnx
    >>> @nnx.dataclass
    ... class Cfg(nnx.legacy.Pytree):
    ...   sizes: tuple = nnx.field(default=(1, 2))
    >>> Cfg().sizes
    (1, 2)
  """
  return _field(None, dict(locals()))


def node_field(
  *,
  default: Any = _MISSING,
  default_factory: Any = _MISSING,
  init: bool = True,
  repr: bool = True,
  hash: bool | None = None,
  compare: bool = True,
  metadata: dict | None = None,
  kw_only: Any = _MISSING,
) -> Any:
  """A field whose value becomes a graph leaf: wrapped in ``nnx.Node`` unless it
  already is a Variable.

  Raises:
    DataclassError: if ``metadata`` uses the reserved key ``"nnx_box"``.

  Example:
    >>> import nnx_eqx as nnx
    >>> @nnx.dataclass
    ... class Foo(nnx.Module):
    ...   sizes: list = nnx.node_field()
    >>> Foo([4, 5]).sizes
    Node(value=[4, 5])
  """
  return _field(_Box("node"), dict(locals()))


def static_field(
  *,
  default: Any = _MISSING,
  default_factory: Any = _MISSING,
  init: bool = True,
  repr: bool = True,
  hash: bool | None = None,
  compare: bool = True,
  metadata: dict | None = None,
  kw_only: Any = _MISSING,
) -> Any:
  """A field that stays static (in the GraphDef / pytree aux data).

  Values that would be nodes (arrays, registered node types) are wrapped in
  ``nnx.Static``; other values (ints, strings, functions) are static already
  and stored as given.

  Raises:
    DataclassError: at ``__init__``, if the value is a Variable or a Module
      (the field is named); or if ``metadata`` uses the reserved key.

  Example:
    >>> import numpy as np, nnx_eqx as nnx
    >>> @nnx.dataclass
    ... class Masked(nnx.Module):
    ...   mask: np.ndarray = nnx.static_field()
    ...   n: int = nnx.static_field(default=2)
    >>> m = Masked(np.ones(2))
    >>> type(m.mask).__name__, m.mask.value.tolist(), m.n, len(nnx.state(m))
    ('Static', [1.0, 1.0], 2, 0)
  """
  return _field(_Box("static"), dict(locals()))


def var_field(
  variable_type: type[Variable],
  *,
  default: Any = _MISSING,
  default_factory: Any = _MISSING,
  init: bool = True,
  repr: bool = True,
  hash: bool | None = None,
  compare: bool = True,
  metadata: dict | None = None,
  kw_only: Any = _MISSING,
  **variable_metadata: Any,
) -> Any:
  """A field whose value is wrapped in ``variable_type`` (a Variable subclass).

  Args:
    variable_type: e.g. ``nnx.BatchStat`` or a user Variable subclass.
    default, default_factory, init, repr, hash, compare, metadata, kw_only: as in
      ``dataclasses.field``.
    **variable_metadata: metadata for the Variable, e.g. ``sharding=("x",)``.

  Raises:
    DataclassError: when the class is decorated with ``nnx.dataclass``, if
      ``variable_type`` is not a Variable subclass (the attribute is named); at
      ``__init__``, if the value is a Variable of another type.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.dataclass
    ... class Stats(nnx.Module):
    ...   mean: jnp.ndarray = nnx.var_field(nnx.BatchStat, sharding=("features",))
    >>> s = Stats(jnp.zeros(3))
    >>> type(s.mean).__name__, s.mean.sharding
    ('BatchStat', ('features',))
  """
  box = _Box("var", variable_type, variable_metadata)
  kwargs = dict(locals())
  del kwargs["variable_type"], kwargs["variable_metadata"]
  return _field(kwargs.pop("box"), kwargs)


def param_field(
  *,
  default: Any = _MISSING,
  default_factory: Any = _MISSING,
  init: bool = True,
  repr: bool = True,
  hash: bool | None = None,
  compare: bool = True,
  metadata: dict | None = None,
  kw_only: Any = _MISSING,
  **variable_metadata: Any,
) -> Any:
  """A field whose value is wrapped in ``nnx.Param`` (``var_field(nnx.Param)``).

  Raises:
    DataclassError: at ``__init__``, if the value is a Variable other than a
      Param; or if ``metadata`` uses the reserved key.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.dataclass
    ... class Affine(nnx.Module):
    ...   w: jnp.ndarray = nnx.param_field()
    ...   b: jnp.ndarray = nnx.param_field(default_factory=lambda: jnp.zeros(2))
    ...   def __call__(self, x):
    ...     return x * self.w + self.b
    >>> m = Affine(jnp.ones(2))
    >>> sorted(nnx.state(m, nnx.Param)), m(jnp.ones(2)).tolist()
    (['b', 'w'], [1.0, 1.0])
  """
  kwargs = dict(locals())
  return var_field(Param, **kwargs.pop("variable_metadata"), **kwargs)


def dataclass(
  cls: Any = None,
  /,
  *,
  init: bool = True,
  repr: bool = False,
  eq: bool = False,
  order: bool = False,
  unsafe_hash: bool = False,
  kw_only: bool = False,
  match_args: bool = True,
) -> Any:
  """Makes a Module or Pytree subclass a dataclass (the seeds' ``nnx.dataclass``).

  Field helpers (:func:`param_field`, :func:`var_field`, :func:`node_field`,
  :func:`static_field`) wrap their values after ``__init__``. Defaults differ
  from ``dataclasses.dataclass`` where Modules need it: ``eq=False`` (objects
  keep identity semantics; fields hold arrays) and ``repr=False`` (the base
  class's repr is kept). Frozen and slotted dataclasses are not offered: use
  ``nnx.legacy.Pytree`` for immutability.

  Raises:
    DataclassError: if ``cls`` is not a Module or Pytree subclass, or a
      ``var_field`` names a type that is not a Variable subclass (the
      attribute is named).

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.dataclass
    ... class Scale(nnx.Module):
    ...   scale: jax.Array = nnx.param_field()
    ...   name: str = "scale"
    ...   def __call__(self, x):
    ...     return x * self.scale
    >>> m = Scale(jnp.full(2, 3.0))
    >>> m(jnp.ones(2)).tolist(), list(nnx.state(m))
    ([3.0, 3.0], ['scale'])
  """
  options = dict(
    init=init,
    repr=repr,
    eq=eq,
    order=order,
    unsafe_hash=unsafe_hash,
    kw_only=kw_only,
    match_args=match_args,
  )

  def wrap(c: Any) -> Any:
    if not (isinstance(c, type) and issubclass(c, (NnxPytree, Pytree))):
      raise DataclassError(
        f"nnx.dataclass decorates subclasses of nnx.Module, nnx.Pytree or nnx.legacy.Pytree, got"
        f" {getattr(c, '__name__', c)!r}. Fix: subclass one of them, or use"
        " dataclasses.dataclass for plain classes."
      )
    c = dataclasses.dataclass(c, **options)
    if "_nnx_dataclass_boxes" in c.__dict__:
      type.__delattr__(c, "_nnx_dataclass_boxes")
    boxes = _boxes(c)
    if boxes and issubclass(c, Module):
      _wrap_init(c)
    return c

  return wrap if cls is None else wrap(cls)


def _wrap_init(cls: type) -> None:
  init = getattr(cls, "__init__")

  @functools.wraps(init)
  def __init__(self, *args, **kwargs):
    init(self, *args, **kwargs)
    box_fields(self)

  cls.__init__ = __init__  # type: ignore[misc]

"""Hijax Variables (flax.nnx 0.12's ``hijax=True``): Variables JAX traces as one value.

An ordinary Variable is a pytree node: JAX transforms see its value's leaves.
A *hijax* Variable is a JAX "hi-type": JAX sees one value of an abstract type
that knows the Variable's type, metadata and the abstract values of its leaves,
and lowers it to those leaves only when it compiles.

Which semantics a hijax Variable has follows the flax.nnx release made for the
installed jax, chosen once at import by feature detection (``_hijax_api.BOX``):

* jax >= 0.11.1 (no ``jax._src.hijax.Box``): flax.nnx 0.12.12's immutable
  hi-type cells, described below;
* jax <= 0.11.0 (with the Box): flax.nnx 0.12.8's mutable Variables. The state
  is held in JAX's own mutable hi-type ``Box``, so a write inside plain
  ``jax.jit``/``jax.grad``/``jax.lax.scan`` (as argument or capture) reaches the
  caller. Written values are stored under ``jax.lax.stop_gradient`` (a Box
  carries no gradient), and ``jax.grad`` with respect to a hijax Variable
  raises :class:`HijaxGradientError`: pass ``nnx.with_vars(state,
  hijax=False)`` to ``jax.grad`` instead, as flax.nnx 0.12.8 says.

With cells (jax >= 0.11.1), as in flax.nnx 0.12.12:

* plain ``jax.jit``/``jax.grad``/``jax.lax.scan`` take hijax Variables as
  arguments or closure captures, and ``jax.grad`` with respect to one gives its
  gradient as a hijax Variable of the same type (``isinstance(g, nnx.Param)``);
* a hijax Variable is immutable inside a JAX transformation: writing it there
  raises :class:`ImmutableVariableError`. State that a transform must update
  goes in a ``jax.Ref`` (``ref=True``): a ref-mode hijax Variable, like any
  ref-mode Variable, is updated in place from inside transforms, as a capture
  or (unlike flax 0.12.12, where JAX refuses it) as an argument;
* outside transforms a hijax Variable reads and writes like any Variable.

Here a hijax Variable is a :class:`HijaxVariable` handle: a Variable whose raw
storage is a *cell*, the hi-type value (or a Box, in the same role), and the
cell holds an ordinary Variable (value plus metadata). Split, merge and pytree
flattening see the cell as the Variable's value, so handles rebuilt by
``merge`` share it, and an eager write through one is seen by all. A ref-mode
hijax Variable keeps its ``jax.Ref`` as its raw storage instead (with the held
type and metadata in its own), since JAX tracks a Ref itself and must see it as
a transform's input to let it be written; this holds on every jax. Inside a
trace the cell is a tracer, read through a primitive (``_GetCell``) whose JVP
and transpose rules make gradients flow. The JAX API comes from ``_hijax_api``
(the public ``jax.experimental.hijax`` where it has what is needed, ``jax._src``
otherwise); where jax has none (jax < 0.10), making a hijax Variable raises
:class:`JaxVersionError` naming the jax needed.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._errors import HijaxGradientError, ImmutableVariableError, JaxVersionError
from ..tracing._lost_updates import COPY_MARK as _COPY_MARK
from ..tracing._traces import current_trace, in_transform
from ._hijax_api import API, BOX, DIFF_TRACERS, UNAVAILABLE
from ._refs import Ref
from ._variables import (
  _BINARY_OPS,
  _COMPARISONS,
  _UNARY,
  TO_HIJAX,
  Variable,
  new_variable,
)

_VAR_TYPE = "var_type"
#: Whether this jax has the hi-type API hijax Variables are built on (see ``_hijax_api``).
AVAILABLE = API is not None
_Tracer = jax.core.Tracer

IMMUTABLE = (
  "Cannot update {what}, a hijax Variable without ref=True, inside a JAX transformation"
  " (jax.jit, jax.grad, jax.lax.scan, nnx.jit, ...): JAX traces a hijax Variable as an"
  " immutable value. Fix: make it a ref-mode Variable (ref=True, or"
  " `nnx.with_vars(node, ref=True)`), whose updates JAX carries out of transforms, or"
  " update it outside the transformation."
)

NO_BOX_GRAD = (
  "Cannot differentiate with respect to a hijax {what}: on this jax (<= 0.11.0) a hijax"
  " Variable keeps its state in JAX's Box, which carries no gradient (as in flax.nnx"
  " 0.12.8). Fix: pass ordinary copies to jax.grad, e.g."
  " jax.grad(f)(nnx.with_vars(state, hijax=False)), or install jax >= 0.11.1, where"
  " hijax Variables are differentiable."
)


class _Cell:
  """The hi-type value of a hijax Variable: holds an ordinary Variable."""

  __slots__ = ("inner",)

  def __init__(self, inner: Variable):
    self.inner = inner


def _zeros(aval):
  return (
    np.zeros(aval.shape, aval.dtype)
    if aval.dtype == jax.dtypes.float0
    else (jax.numpy.zeros(aval.shape, aval.dtype))
  )


if API is not None:

  class _CellType(API.HiType):  # type: ignore[name-defined,misc]
    """The abstract value of a cell: the held Variable's type, its pytree
    structure (metadata included) and the abstract values of its leaves."""

    __slots__ = ("var_type", "treedef", "avals")

    def __init__(self, var_type: type, treedef: Any, avals: tuple):
      self.var_type = var_type
      self.treedef = treedef
      self.avals = avals

    def __hash__(self):
      return hash((_CellType, self.treedef, self.avals))

    def __eq__(self, other):
      return (
        isinstance(other, _CellType) and self.treedef == other.treedef and self.avals == other.avals
      )

    def __repr__(self):
      return f"{self.var_type.__name__}({', '.join(a.str_short() for a in self.avals)})"

    def str_short(self, short_dtypes=False, **_) -> str:
      return f"{self.var_type.__name__}()"

    def lo_ty(self) -> list:
      return [lo for a in self.avals for lo in a.lo_ty()]

    def lower_val(self, cell, /) -> list:
      leaves = jax.tree.leaves(cell.inner)
      return [lo for a, x in zip(self.avals, leaves, strict=True) for lo in a.lower_val(x)]

    def raise_val(self, *lo_vals):
      it = iter(lo_vals)
      leaves = [a.raise_val(*[next(it) for _ in a.lo_ty()]) for a in self.avals]
      return _Cell(jax.tree.unflatten(self.treedef, leaves))

    def to_tangent_aval(self):
      return _CellType(self.var_type, self.treedef, tuple(a.to_tangent_aval() for a in self.avals))

    def vspace_zero(self):
      return _Cell(jax.tree.unflatten(self.treedef, [_zeros(a) for a in self.avals]))

    def vspace_add(self, x, y):  # x, y: cells or traced cells (gradients being summed)
      leaves = [
        a if a.dtype == jax.dtypes.float0 else a + b
        for a, b in zip(_cell_leaves(x), _cell_leaves(y), strict=True)
      ]
      return _new_cell(leaves, var_type=self.var_type, treedef=self.treedef)

  def _typeof_cell(cell: _Cell) -> _CellType:
    leaves, treedef = jax.tree.flatten(cell.inner)
    return _CellType(type(cell.inner), treedef, tuple(map(jax.typeof, leaves)))

  API.register_hitype(_Cell, _typeof_cell)

  class _NewCell(API.HiPrim):  # type: ignore[name-defined,misc]
    """Leaves -> a cell holding the Variable they unflatten to."""

    def __init__(self, *leaf_avals, var_type: type, treedef: Any):
      self.in_avals = tuple(leaf_avals)
      self.out_aval = _CellType(var_type, treedef, tuple(leaf_avals))
      self.params = dict(var_type=var_type, treedef=treedef)
      super().__init__()

    def expand(self, *leaves):
      return _Cell(jax.tree.unflatten(self.treedef, leaves))  # type: ignore[attr-defined]

    def jvp(self, primals, tangents):
      return _new_cell(primals, **self.params), _new_cell(tangents, **self.params)

    def vjp_fwd(self, nzs_in, *leaves):
      return self(*leaves), None

    def vjp_bwd_retval(self, res, out_ct):
      return tuple(_cell_leaves(out_ct))

    def transpose(self, out_ct, *accums):
      for leaf_ct, accum in zip(_cell_leaves(out_ct), accums):
        if hasattr(accum, "accum"):
          accum.accum(leaf_ct)

  class _GetCell(API.HiPrim):  # type: ignore[name-defined,misc]
    """A cell -> the leaves of the Variable it holds."""

    def __init__(self, aval: _CellType):
      self.in_avals = (aval,)
      self.out_aval = aval.avals
      self.params = dict(aval=aval)
      super().__init__()

    def expand(self, cell):
      return tuple(jax.tree.leaves(cell.inner))

    def jvp(self, primals, tangents):
      (cell,), (cell_dot,) = primals, tangents
      return _cell_leaves(cell), _cell_leaves(cell_dot)

    def vjp_fwd(self, nzs_in, cell):
      return self(cell), None

    def _ct_cell(self, leaf_cts):
      aval = self.aval  # type: ignore[attr-defined]
      return _new_cell(leaf_cts, var_type=aval.var_type, treedef=aval.treedef)

    def vjp_bwd_retval(self, res, out_ct):
      return (self._ct_cell(out_ct),)

    def transpose(self, out_ct, accum):
      if hasattr(accum, "accum"):
        accum.accum(self._ct_cell(out_ct))

  _instantiate_zeros = API.instantiate_zeros

  def _new_cell(leaves, *, var_type: type, treedef: Any):
    leaves = tuple(_instantiate_zeros(x) for x in leaves)
    return _NewCell(*map(jax.typeof, leaves), var_type=var_type, treedef=treedef)(*leaves)

  def _cell_leaves(cell) -> tuple:
    if isinstance(cell, _Cell):
      return tuple(jax.tree.leaves(cell.inner))
    aval: Any = cell.aval if isinstance(cell, _Tracer) else jax.typeof(cell)
    return tuple(_GetCell(aval)(cell))

  def _make_cell(inner: Variable) -> Any:
    leaves, treedef = jax.tree.flatten(inner)
    if any(isinstance(x, _Tracer) for x in leaves):  # made inside a trace: JAX tracks it
      return _new_cell(leaves, var_type=type(inner), treedef=treedef)
    return _Cell(inner)

  def _held(cell) -> Variable:
    if isinstance(cell, _Cell):
      return cell.inner
    if isinstance(cell, _Tracer) and isinstance(cell.aval, _CellType):
      return jax.tree.unflatten(cell.aval.treedef, _cell_leaves(cell))
    raise TypeError(
      f"A hijax Variable holds {type(cell).__name__!r} instead of its state (was it"
      " rebuilt by jax.tree.map?). Fix: map over nnx.with_vars(tree, hijax=False)."
    )

  def _is_cell(x: Any) -> bool:
    """Whether ``x`` is a hijax Variable's storage: a cell or a Box (traced or not)."""
    if BOX is not None and isinstance(x, BOX):
      return True
    return isinstance(x, _Cell) or (isinstance(x, _Tracer) and isinstance(x.aval, _CellType))

else:  # pragma: no cover (jax < 0.10; tested by CI on the lowest declared versions)

  def _make_cell(inner: Variable) -> Any:
    raise JaxVersionError(UNAVAILABLE)

  def _held(cell: Any) -> Variable:
    raise JaxVersionError(UNAVAILABLE)

  def _is_cell(x: Any) -> bool:
    return False


def to_hijax(variable: Variable) -> HijaxVariable:
  """A hijax Variable holding (a reference to) ``variable``'s value and metadata.

  Args:
    variable: an ordinary Variable (any type, plain or ref mode); a hijax one is
      returned as is.

  Returns:
    A :class:`HijaxVariable` whose state is a new cell (a JAX hi-type value),
    or a new JAX ``Box`` where jax has one (jax <= 0.11.0).

  Raises:
    TypeError: if ``variable`` is not a Variable.
    JaxVersionError: where the installed jax has no hi-type API (jax < 0.10).

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
  if not AVAILABLE:
    raise JaxVersionError(UNAVAILABLE)
  h: Any = new_variable(HijaxVariable, None, {}, variable._trace)
  _store(h, variable)
  return h


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
    return variable.copy(hijax=False)
  return variable


def holds_hijax(tree: Any) -> bool:
  """Whether ``tree`` (any pytree, Modules included) holds a hijax Variable."""
  is_hijax = lambda x: type(x) is HijaxVariable  # noqa: E731
  return any(is_hijax(x) or _is_cell(x) for x in jax.tree.leaves(tree, is_leaf=is_hijax))


def _no_grad(x: Any) -> Any:
  return jax.lax.stop_gradient(x) if isinstance(x, _Tracer) else x


def _store(h: HijaxVariable, inner: Variable) -> None:
  """Makes ``inner`` the Variable ``h`` holds. A ref-mode one keeps its ``jax.Ref``
  as ``h``'s raw value (JAX tracks a Ref itself, and transforms must see it as an
  input to let it be read and written there), with its type and metadata in
  ``h``'s metadata; any other is held in a new JAX ``Box`` where jax has one
  (``BOX``), in a new cell otherwise."""
  d = h.__dict__
  value = inner.__dict__["_value"]
  if isinstance(value, Ref):
    d["_value"], d["_metadata"] = value, {**inner._metadata, _VAR_TYPE: type(inner)}
  else:
    storage = BOX(jax.tree.map(_no_grad, inner)) if BOX is not None else _make_cell(inner)
    d["_value"], d["_metadata"] = storage, {_VAR_TYPE: type(inner)}


def _get(h: HijaxVariable) -> Variable:
  d = h.__dict__
  value = d["_value"]
  if isinstance(value, _Cell):
    return value.inner
  if isinstance(value, Ref):  # ref mode (see ``_store``)
    md = dict(d["_metadata"])
    return new_variable(md.pop(_VAR_TYPE), value, md, d["_trace"])
  if BOX is not None and isinstance(value, BOX):  # a Box, or a Box traced by JAX
    if isinstance(value, DIFF_TRACERS):
      raise HijaxGradientError(NO_BOX_GRAD.format(what=d["_metadata"][_VAR_TYPE].__name__))
    return value.get()
  return _held(value)


def _draft(h: HijaxVariable) -> tuple[Variable, Variable]:
  """The held Variable and a shallow copy of it for a writer to change (see ``_put``)."""
  inner = _get(h)
  return inner, new_variable(type(inner), inner._value, dict(inner._metadata), current_trace())


def _put(h: HijaxVariable, inner: Variable, draft: Variable) -> None:
  """Stores ``draft`` (from ``_draft``, then changed) in place of ``inner``.

  A write into a ``jax.Ref`` (ref mode) changed no Python object and is done.
  A ``Box`` is set, outside and inside transforms alike (JAX carries the write
  out to the caller's Box), with traced leaves under ``jax.lax.stop_gradient``
  (JAX cannot differentiate a Box write). Outside transforms the cell is changed
  in place (every handle sharing it sees the write; a ref-mode Variable's
  metadata is changed in this handle). Inside a transform a hijax Variable made
  in that same trace (not an argument a transform rebuilt, nor a capture) takes
  the change as a local value; any other is an immutable JAX value there, and
  the write is refused."""
  d = h.__dict__
  cell = d["_value"]
  if draft._value is inner._value and draft._metadata == inner._metadata:
    return
  draft.__dict__["_trace"] = d["_trace"]
  if BOX is not None and isinstance(cell, BOX):
    cell.set(jax.tree.map(_no_grad, draft))
  elif isinstance(cell, _Cell) and not in_transform():
    cell.inner = draft
  elif not in_transform() or (d["_trace"] == current_trace() and _COPY_MARK not in d):
    _store(h, draft)
  else:
    raise ImmutableVariableError(IMMUTABLE.format(what=inner.type.__name__))


def update_variable(slot: Variable, leaf: Any) -> bool:
  """``nnx.update``'s write of ``leaf`` (a Variable or a raw value) into ``slot``
  where either is a hijax Variable: the held value and metadata are copied, not
  the raw storage (a cell or Ref), and a hijax ``slot`` takes them as a write
  (in place outside transforms; into a Box or refused inside, see ``_put``). Returns whether
  the metadata changed."""
  src = _get(leaf) if type(leaf) is HijaxVariable else leaf
  value, md = (src._value, src._metadata) if isinstance(src, Variable) else (src, None)
  if type(slot) is HijaxVariable:
    inner, draft = _draft(slot)
  else:
    inner = draft = slot
  changed = md is not None and md != inner._metadata
  d = draft.__dict__
  if draft is not slot and isinstance(d["_value"], Ref) and not isinstance(value, Ref):
    draft.value = value  # a ref-mode hijax Variable keeps its Ref: the value is written in
  else:
    d["_value"] = value
  if changed:
    d["_metadata"] = dict(md)  # type: ignore[arg-type]
  if draft is not slot:
    _put(slot, inner, draft)  # type: ignore[arg-type]
  return changed


def _reader(name: str):
  def method(self, *args, **kwargs):
    return getattr(_get(self), name)(*args, **kwargs)

  method.__name__ = name
  return method


def _writer(name: str, returns_self: bool = False):
  def method(self, *args, **kwargs):
    inner, draft = _draft(self)
    out = getattr(draft, name)(*args, **kwargs)
    _put(self, inner, draft)
    return self if returns_self else out

  method.__name__ = name
  return method


def _inner_property(name: str) -> property:
  return property(lambda self: getattr(_get(self), name), doc=f"The held Variable's ``{name}``.")


class HijaxVariable(Variable):
  """A Variable that JAX traces as one hi-type value (flax.nnx's ``hijax=True``;
  see the module docstring): immutable inside transforms on jax >= 0.11.1 (flax.nnx
  0.12.12), mutable there on jax <= 0.11.0, whose JAX ``Box`` holds its state
  (flax.nnx 0.12.8).

  Built by ``nnx.Param(x, hijax=True)``, under ``nnx.var_defaults(hijax=True)``,
  by ``variable.copy(hijax=True)`` or ``nnx.with_vars(node, hijax=True)``.
  ``type(v)`` is ``HijaxVariable`` for every Variable type (as in flax), while
  ``isinstance(v, nnx.Param)`` and ``v.type`` answer for the held Variable's
  type. ``nnx.with_vars(node, hijax=False)`` gives ordinary Variables back.
  Outside transforms values are read and written as usual (``v[...]``,
  ``v.value``, ``v += 1``, ``v["key"] = x`` for dict values), and every handle
  sharing the state (``merge`` of a split) sees the write. Inside ``jax.jit``,
  ``jax.grad``, ``jax.lax.scan`` (as argument or capture) it is read as usual.
  On jax >= 0.11.1 ``jax.grad`` with respect to it gives a hijax Variable of
  gradients; on jax <= 0.11.0 it is written there too (the write reaches the
  caller, without gradient), and ``jax.grad`` with respect to it is refused.

  Raises:
    ImmutableVariableError: on jax >= 0.11.1, when written inside a JAX
      transformation, unless the write goes into its ``jax.Ref`` (``ref=True``).
    HijaxGradientError: on jax <= 0.11.0, when differentiated with respect to.
    JaxVersionError: when made on a jax without a hi-type API (jax < 0.10).

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> w = nnx.Param(jnp.array(3.0), hijax=True)
    >>> type(w).__name__, isinstance(w, nnx.Param), float(jax.jit(lambda w: w[...] ** 2)(w))
    ('HijaxVariable', True, 9.0)
    >>> count = nnx.Variable(jnp.array(0), hijax=True, ref=True)
    >>> @jax.jit
    ... def step():
    ...   count[...] += 1  # a captured ref-mode Variable: updated on every jax
    >>> step(); step()
    >>> int(count[...])
    2
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
    inner, draft = _draft(self)
    draft.value = new
    _put(self, inner, draft)

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
    inner, draft = _draft(self)
    setattr(draft, name, value)
    _put(self, inner, draft)

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

"""Variables: typed, mutable boxes around JAX values.

The type of a Variable is its collection: ``Param`` for trainable weights,
``BatchStat`` for running statistics, ``Cache`` for autoregressive caches,
``Intermediate`` for sown values, or any user subclass. Metadata given as
keyword arguments (``sharding``, ``tag``, anything else) travels with the
Variable through ``split``/``merge`` and transforms. This follows flax.nnx.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import jax
import numpy as np

from .. import _version
from .._errors import TraceContextError
from ..tracing._copy_links import AUX as _AUX
from ..tracing._copy_links import COPY_MARK as _COPY_MARK
from ..tracing._copy_links import GENERATION as _GENERATION
from ..tracing._copy_links import MAX_ORIGINS as _MAX_ORIGINS
from ..tracing._copy_links import PLACEHOLDER as _PLACEHOLDER
from ..tracing._copy_links import VariableRef as _VariableRef
from ..tracing._copy_links import link as _link_copy
from ..tracing._copy_links import placeholder_ref as _placeholder_ref
from ..tracing._lost_updates import PENDING as _PENDING
from ..tracing._lost_updates import STALE as _STALE
from ..tracing._lost_updates import VARIABLE as _LOST_UPDATES_VARIABLE
from ..tracing._lost_updates import WATCHING as _WATCHING
from ..tracing._lost_updates import check_flattened_variable as _check_flattened_variable
from ..tracing._lost_updates import check_variable as _check_variable
from ..tracing._lost_updates import note_write as _note_write
from ..tracing._traces import CURRENT as _CURRENT_TRACE
from ..tracing._traces import READ_REF as _READ_REF
from ..tracing._traces import check_trace, current_trace
from ..tracing._traces import entry as _trace_entry
from ._defaults import _DEFAULTS, _EAGER
from ._metadata import MetadataMethods
from ._refs import Ref

A = TypeVar("A")

_OWN_FIELDS = frozenset({"_value", "_metadata", "_trace"})


class VariableMetadata(Generic[A]):
  """A value paired with Variable metadata, produced by :func:`with_metadata`.

  Passing it to a Variable constructor unwraps it, merging the metadata.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> p = nnx.Param(nnx.VariableMetadata(jnp.ones(2), {"sharding": ("x",)}))
    >>> p.sharding
    ('x',)
  """

  __slots__ = ("value", "metadata")

  def __init__(self, value: A, metadata: dict[str, Any]):
    self.value = value
    self.metadata = dict(metadata)


def with_metadata(
  initializer: Callable[..., Any], **metadata: Any
) -> Callable[..., VariableMetadata]:
  """Wraps an initializer so the Variable built from its output gets ``metadata``.

  Args:
    initializer: any ``init(key, shape, dtype) -> array`` function.
    **metadata: metadata to attach, e.g. ``sharding=("embed", "mlp")``.

  Returns:
    An initializer returning :class:`VariableMetadata`; ``nnx.Param(init(...))``
    unwraps it.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> init = nnx.with_metadata(jax.nn.initializers.ones, sharding=(None, "model"))
    >>> p = nnx.Param(init(jax.random.key(0), (2, 3)))
    >>> p.sharding, p.value.shape
    ((None, 'model'), (2, 3))
  """

  def wrapped(*args, **kwargs):
    return VariableMetadata(initializer(*args, **kwargs), metadata)

  wrapped.__name__ = getattr(initializer, "__name__", "initializer")
  return wrapped


def new_variable(cls: type, value: Any, metadata: dict, trace: Any) -> Variable:
  """Builds a ``cls`` Variable directly (no ``__init__``): the fast path used by
  split, merge, pytree unflattening and gradients. ``metadata`` is not copied."""
  v: Variable = object.__new__(cls)
  d = v.__dict__
  d["_value"] = value
  d["_metadata"] = metadata
  d["_trace"] = trace
  return v


_Ref = Ref


def _write_ref(var: Variable, ref: Any, new: Any) -> None:
  """``ref[...] = new``; JAX's refusal (a batched value into a Ref shared by every
  batch member, a differentiated value into a Ref outside ``jax.grad``) is raised
  again naming the Variable and the fixes."""
  try:
    ref[...] = new
  except Exception as e:
    if "array reference" not in str(e):
      raise
    raise TraceContextError(
      f"Cannot write {type(var).__name__} of shape {tuple(ref.shape)} (a jax.Ref-backed"
      f" Variable) from this transformation: {e} Fix: inside jax.vmap /"
      " eqx.filter_vmap give the state a batch axis too (vmap the module with in_axes=0,"
      " or nnx.vmap with nnx.StateAxes), reduce over the batch axis first (BatchNorm's"
      " axis_name), or run the layer in evaluation mode (model.eval()); inside jax.grad"
      " write jax.lax.stop_gradient(value)."
    ) from None


def _read(v):
  """A stored value as an array: a ``jax.Ref`` (ref mode) is read with ``ref[...]``."""
  return v[...] if isinstance(v, _Ref) else v


def _read_var(var):
  """The value of the Variable ``var``, read out of its ``jax.Ref`` in ref mode.

  Raises LostUpdateError where a dropped update left ``var`` stale (see ``_lost_updates``)."""
  if _PENDING or _STALE:
    _check_variable(var)
  v = var.__dict__["_value"]
  return v[...] if isinstance(v, _Ref) else v


def _to_ref(value):
  return value if isinstance(value, _Ref) else jax.new_ref(jax.numpy.asarray(value))


def _unwrap(x):
  return _read_var(x) if isinstance(x, Variable) else x


TO_HIJAX: list = [None]
"""``[(variable) -> HijaxVariable]``: installed by ``_hijax``, which builds on this module."""

SHARD_ON_CREATE: list = [None]
"""``[(value, metadata) -> value]``: places a new Variable's value per its sharding
metadata (eager sharding); installed by ``nnx_eqx.spmd``, which this layer cannot import."""


class Variable(MetadataMethods, Generic[A]):
  """A mutable box holding a JAX value plus metadata; its type is its collection.

  A Variable stored as a Module attribute is a graph *leaf*: ``split`` emits its
  value once per distinct Variable object, so two attributes holding the same
  Variable share it after ``merge``. Arithmetic, comparison, indexing and
  ``@`` on a Variable act on its value; in-place operators (``+=``) update the
  value, so ``self.count += 1`` inside a module works as in flax.nnx.

  Args:
    value: the wrapped value (usually a ``jax.Array``), or a
      :class:`VariableMetadata`, whose metadata is merged in.
    **metadata: free-form metadata, read back as attributes
      (``v.sharding``); ``sharding`` (or flax 0.12's ``out_sharding``) holds
      axis names: under a mesh (``jax.set_mesh`` or ``mesh=`` metadata) the
      value is placed accordingly on creation, unless ``eager_sharding=False``
      or ``nnx.use_eager_sharding(False)`` (as flax.nnx 0.12). ``ref=True``
      (default: ``nnx.var_defaults().ref``) stores the value in a ``jax.Ref``
      (reads give arrays, writes update the ref in place); ``hijax=True``
      (default: ``nnx.var_defaults().hijax``) makes a hijax Variable, whose
      updates inside plain ``jax.jit``/``jax.grad``/``jax.lax.scan`` reach the
      caller (see ``nnx.variablelib.HijaxVariable``). ``get_metadata()`` reports
      ``hijax``, ``ref`` and ``eager_sharding`` besides the given metadata.

  Raises:
    TraceContextError: when ``value`` is set from a JAX trace other than the one
      the Variable was created in.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> count = nnx.Variable(jnp.array(0))
    >>> count += 1
    >>> int(count.value)
    1
    >>> w = nnx.Param(jnp.ones((2, 3)), sharding=(None, "model"))
    >>> (jnp.ones((1, 2)) @ w).shape, w.sharding
    ((1, 3), (None, 'model'))
  """

  __hash__ = object.__hash__  # identity: Variables are graph nodes.

  def __new__(cls, *args: Any, **metadata: Any):
    hijax = metadata.get("hijax")
    if not args or not (hijax if hijax is not None else _DEFAULTS["hijax"]):
      return object.__new__(cls)  # (no args: unpickling or copying builds the object)
    # a hijax Variable: an ordinary one, built as usual, held by a HijaxVariable
    # (whose ``__init__`` then does nothing)
    low = object.__new__(cls)
    cls.__init__(low, *args, **{**metadata, "hijax": False})
    return TO_HIJAX[0](low)

  def __init__(self, value: A, **metadata: Any):
    if isinstance(value, VariableMetadata):
      metadata = {**value.metadata, **metadata}
      value = value.value
    if isinstance(value, Variable):
      value = value.get_raw_value()  # (a hijax Variable's raw value is its held Variable's)
    metadata.pop("hijax", None)
    ref = metadata.pop("ref", None)
    eager = metadata.pop("eager_sharding", None)
    if eager is False:
      metadata["eager_sharding"] = False  # reported by get_metadata (True is the default)
    if ("sharding" in metadata or "out_sharding" in metadata) and (
      eager if eager is not None else _EAGER["eager_sharding"]
    ):
      shard = SHARD_ON_CREATE[0]
      if shard is not None:
        value = shard(value, metadata)
    if ref if ref is not None else _DEFAULTS["ref"]:
      value = _to_ref(value)
    d = self.__dict__
    d["_value"] = value
    d["_metadata"] = metadata
    d["_trace"] = current_trace()

  # -- value access -------------------------------------------------------
  @property
  def value(self) -> A:
    """The wrapped value (read out of the ``jax.Ref`` in ref mode)."""
    return _read_var(self)

  @value.setter
  def value(self, new: A) -> None:
    new = new._value if isinstance(new, Variable) else new
    d = self.__dict__
    old = d["_value"]
    if _STALE:  # (a new value ends a stale mark a dropped update left)
      _STALE.pop(id(self), None)
    if isinstance(old, _Ref) and not isinstance(new, _Ref):
      # a write into the Variable's jax.Ref: JAX itself orders it and carries it out
      # of any transform (a captured ref-mode Variable updated inside jax.grad or
      # jax.lax.scan, as in flax.nnx), so it is allowed from any trace
      _write_ref(self, old, new)
    else:
      check_trace(self._trace, f"{type(self).__name__}")
      if _COPY_MARK in d:  # a copy a JAX transform rebuilt: the update may be dropped
        _note_write(self)
      d["_value"] = new

  @property
  def ref(self) -> bool:
    """True in ref mode: the value is stored in a ``jax.Ref``."""
    return isinstance(self._value, _Ref)

  @property
  def hijax(self) -> bool:
    """False: an ordinary Variable (``HijaxVariable`` answers True)."""
    return False

  @classmethod
  def from_metadata(cls, value: Any, metadata: dict[str, Any]) -> Variable:
    """A ``cls`` Variable from a value and a metadata dict (flax spelling)."""
    return cls(value, **metadata)

  def get_value(self) -> A:
    """Returns the value (flax.nnx spelling).

    Subclasses may override it to transform what indexing (``v[...]``) reads;
    ``get_raw_value`` always returns the stored value.
    """
    return _read_var(self)

  def set_value(self, new: A) -> None:
    """Sets the value (flax.nnx spelling); same checks as ``.value = new``.

    Subclasses may override it to transform what item assignment
    (``v[...] = x``) stores; ``set_raw_value`` stores as given.
    """
    self.value = new

  def get_raw_value(self) -> A:
    """The stored value (the ``jax.Ref`` in ref mode), bypassing ``get_value`` overrides."""
    if _PENDING or _STALE:
      _check_variable(self)
    return self._value

  def set_raw_value(self, new: A) -> None:
    """Stores ``new`` as is, bypassing any ``set_value`` override."""
    self.value = new

  def __getitem__(self, idx):
    return self.get_value()[idx]  # type: ignore[index]

  def __delitem__(self, idx) -> None:
    value = self.get_value()
    value = type(value)(value)  # type: ignore[call-arg]
    del value[idx]  # type: ignore[attr-defined]
    self.set_value(value)

  def __contains__(self, item) -> bool:
    return item in self.get_value()  # type: ignore[operator]

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    """Calls the value (a Variable holding a callable proxies calls, as flax.nnx)."""
    return self.get_value()(*args, **kwargs)  # type: ignore[operator]

  def __setitem__(self, idx, new):
    value = _read(self.get_raw_value())
    if idx is Ellipsis and not hasattr(value, "at"):
      self.set_value(new)
    elif isinstance(value, (dict, list)):
      value = type(value)(value)
      value[idx] = _unwrap(new)
      self.set_value(value)  # type: ignore[arg-type]
    elif isinstance(value, jax.Array) or hasattr(value, "at"):
      self.set_value(value.at[idx].set(_unwrap(new)))  # type: ignore[union-attr]
    else:
      value = np.array(value)
      value[idx] = _unwrap(new)
      self.set_value(value)  # type: ignore[arg-type]

  # -- metadata -----------------------------------------------------------
  @property
  def metadata(self) -> dict[str, Any]:
    """A copy of the metadata dict."""
    return dict(self._metadata)

  def __getattr__(self, name: str):
    if name == "_metadata":
      # a Variable rebuilt without metadata (pytree unflattening allocates no
      # empty dict per Variable): its own empty dict, made on first use
      empty: dict = {}
      self.__dict__["_metadata"] = empty
      return empty
    if name.startswith("__"):
      raise AttributeError(name)
    md = self.__dict__.get("_metadata")
    if md is not None and name in md:
      return md[name]
    try:
      return getattr(self.__dict__["_value"], name)
    except (AttributeError, KeyError):
      raise AttributeError(
        f"{type(self).__name__} has no metadata or value attribute {name!r}"
      ) from None

  def __setattr__(self, name: str, value: Any) -> None:
    if name in _OWN_FIELDS:
      self.__dict__[name] = value
      return
    if name == "value" or isinstance(getattr(type(self), name, None), property):
      object.__setattr__(self, name, value)
      return
    check_trace(self._trace, f"metadata {name!r} of {type(self).__name__}")
    self._metadata[name] = value
    _version.bump()

  def add_axis(self, axis_index: int, axis_name: Any) -> None:
    """Called by ``nnx.vmap``/``nnx.scan`` (with ``transform_metadata``) after they
    stacked this Variable along ``axis_index`` and updated its sharding metadata.

    Does nothing; subclasses override it to react (as in flax.nnx 0.12).

    Raises:
      Nothing itself; overrides may raise.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> nnx.Param(jnp.ones(2)).add_axis(0, "layers") is None
      True
    """

  def remove_axis(self, axis_index: int, axis_name: Any) -> None:
    """Called by ``nnx.vmap``/``nnx.scan`` before they unstack this Variable along
    ``axis_index`` (the counterpart of :meth:`add_axis`); does nothing by default.

    Raises:
      Nothing itself; overrides may raise.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> nnx.Param(jnp.ones(2)).remove_axis(0, "layers") is None
      True
    """

  def replace(self, value: Any = None, **metadata: Any) -> Variable[A]:
    """Returns a new Variable of the same type with ``value`` and/or metadata replaced.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> nnx.Param(jnp.zeros(2), tag="a").replace(jnp.ones(2)).tag
      'a'
    """
    new = self.copy()
    if value is not None:
      new.__dict__["_value"] = _unwrap(value)
    new._metadata.update(metadata)
    return new

  def copy(self, *, ref: bool | None = None, hijax: bool | None = None) -> Variable[A]:
    """A shallow copy (copied metadata), owned by the current trace.

    Args:
      ref: ``True`` stores the copy's value in a new ``jax.Ref``, ``False`` in a
        plain array; ``None`` keeps the mode (a ref-mode copy gets its own ref).
      hijax: ``True`` makes the copy a hijax Variable (see
        ``nnx.variablelib.HijaxVariable``); ``None``/``False`` keep it ordinary.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> v = nnx.Param(jnp.ones(2))
      >>> v.copy(ref=True).ref, v.copy().ref, v.copy(hijax=True).hijax
      (True, False, True)
    """
    value = self._value
    if ref is None:
      ref = isinstance(value, _Ref)
    value = jax.new_ref(_read(value)) if ref else _read(value)
    new = new_variable(type(self), value, dict(self._metadata), current_trace())
    return TO_HIJAX[0](new) if hijax else new

  @property
  def type(self) -> type:
    """The Variable's type (its collection), as flax.nnx's ``variable.type``."""
    return type(self)

  # -- array-like protocol ------------------------------------------------
  @property
  def shape(self):
    return np.shape(_read_var(self))

  @property
  def dtype(self):
    return getattr(self._value, "dtype", None) or np.result_type(self._value)  # Refs have .dtype

  @property
  def ndim(self) -> int:
    return np.ndim(_read_var(self))

  @property
  def size(self) -> int:
    return int(np.size(_read_var(self)))

  def __array__(self, dtype=None, copy=None):
    return np.asarray(_read_var(self), dtype=dtype)

  def __jax_array__(self):
    # jax's array-like protocol: ``jnp.sin(param)`` reads the value, as in flax.nnx.
    return jax.numpy.asarray(_read_var(self))

  def __len__(self) -> int:
    return len(_read_var(self))  # type: ignore[arg-type]

  def __iter__(self):
    return iter(_read_var(self))  # type: ignore[call-overload]

  def __bool__(self) -> bool:
    return bool(_read_var(self))

  def __int__(self) -> int:
    return int(_read_var(self))  # type: ignore[call-overload]

  def __float__(self) -> float:
    return float(_read_var(self))  # type: ignore[arg-type]

  def __index__(self) -> int:
    return operator.index(_read_var(self))  # type: ignore[arg-type]

  def __getstate__(self) -> dict[str, Any]:
    # pickles and copies (``copy.copy`` included) leave out the aux data it
    # flattens with: a copy makes its own, and is not taken for a Variable
    # rebuilt from this one (see ``_copy_links``)
    d = self.__dict__
    if _AUX in d:
      d = {k: x for k, x in d.items() if k != _AUX}
    return d

  def _repr_pretty_(self, p, cycle):  # IPython
    p.text(repr(self))


def _binary(op, reflected=False):
  if reflected:

    def method(self, other):
      return op(_unwrap(other), _read_var(self))
  else:

    def method(self, other):
      return op(_read_var(self), _unwrap(other))

  return method


def _inplace(op):
  def method(self, other):
    self.value = op(_read_var(self), _unwrap(other))
    return self

  return method


_BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
  "add": operator.add,
  "sub": operator.sub,
  "mul": operator.mul,
  "truediv": operator.truediv,
  "floordiv": operator.floordiv,
  "mod": operator.mod,
  "pow": operator.pow,
  "matmul": operator.matmul,
  "and": operator.and_,
  "or": operator.or_,
  "xor": operator.xor,
  "lshift": operator.lshift,
  "rshift": operator.rshift,
}
for _name, _op in _BINARY_OPS.items():
  setattr(Variable, f"__{_name}__", _binary(_op))
  setattr(Variable, f"__r{_name}__", _binary(_op, reflected=True))
  setattr(Variable, f"__i{_name}__", _inplace(_op))

_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
  "lt": operator.lt,
  "le": operator.le,
  "gt": operator.gt,
  "ge": operator.ge,
  "eq": operator.eq,
  "ne": operator.ne,
}
for _name, _op in _COMPARISONS.items():
  setattr(Variable, f"__{_name}__", _binary(_op))


def _unary(op):
  def method(self):
    return op(_read_var(self))

  return method


_UNARY: dict[str, Callable[[Any], Any]] = {
  "neg": operator.neg,
  "pos": operator.pos,
  "abs": operator.abs,
  "invert": operator.invert,
}
for _name, _uop in _UNARY.items():
  setattr(Variable, f"__{_name}__", _unary(_uop))


class Param(Variable[A]):
  """A trainable parameter (collection ``params``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> isinstance(nnx.Param(jnp.ones(3)), nnx.Variable)
    True
  """

  collection = "params"
  """The Linen collection name of this type (``"params"``)."""


class BatchStat(Variable[A]):
  """A running statistic, e.g. BatchNorm's mean and variance (collection ``batch_stats``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.BatchStat(jnp.zeros(3)).value.shape
    (3,)
  """

  collection = "batch_stats"
  """The Linen collection name of this type (``"batch_stats"``)."""


class Cache(Variable[A]):
  """Per-call cached values, e.g. an attention KV cache (collection ``cache``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.Cache(jnp.zeros((4, 2))).shape
    (4, 2)
  """

  collection = "cache"
  """The Linen collection name of this type (``"cache"``)."""


class Intermediate(Variable[A]):
  """A value sown during a call for later inspection (collection ``intermediates``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.Intermediate((jnp.ones(2),)).value[0].shape
    (2,)
  """

  collection = "intermediates"
  """The Linen collection name of this type (``"intermediates"``)."""


class Perturbation(Intermediate[A]):
  """A zero added to an intermediate value by :meth:`Module.perturb`, so the
  gradient with respect to it is the gradient of that value (as flax.nnx).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> issubclass(nnx.Perturbation, nnx.Intermediate)
    True
  """

  collection = "perturbations"
  """The Linen collection name of this type (``"perturbations"``)."""


def _aux(v: Variable):
  md = v.__dict__.get("_metadata")
  return _metadata_aux(md) if md else ()


def _metadata_aux(md: dict):
  if _hashable_items(md):
    return tuple(sorted(md.items(), key=lambda kv: kv[0]))
  return _MetaBox(md)


_VALUE_KEY = jax.tree_util.GetAttrKey("value")


# A Param flattens with its metadata as aux data; any other Variable (state) with
# its own ``VariableRef``, which compares as that metadata, so a copy rebuilt
# from it in a JAX trace is linked to it (see ``_copy_links``).
# (a Param is never linked, so never stale: no checks)
def _param_flatten_with_keys(v: Variable):
  return ((_VALUE_KEY, v.__dict__["_value"]),), _aux(v)


def _param_flatten(v: Variable):  # a hot path: ``_aux`` inlined
  d = v.__dict__
  md = d.get("_metadata")
  return (d["_value"],), (_metadata_aux(md) if md else ())


def _state_flatten_with_keys(v: Any):
  return ((_VALUE_KEY, v.__dict__["_value"]),), _state_flatten(v)[1]


def _state_flatten(v: Any):  # a hot path: the checks and the aux data inlined
  if _PENDING or (_STALE and id(v) in _STALE):
    _check_flattened_variable(v)
  d = v.__dict__
  md = d.get("_metadata")
  meta = _metadata_aux(md) if md else ()
  if not _WATCHING[0]:  # (the watch is off: as a Param)
    return (d["_value"],), meta
  # its own aux data, made once: again where its metadata changed or a drop
  # started a new generation. Until then ``d[_AUX]`` holds the aux data it was
  # rebuilt from (a VariableRef to another Variable), or its metadata, where
  # ``d`` was unpickled, or nothing. (``_copy_links.variable_ref``, inlined:
  # every pytree map pays this once per state Variable it rebuilt.)
  ref = d.get(_AUX)
  gen = _GENERATION[0]
  if ref.__class__ is _VariableRef:
    target = ref()
    if target is v:
      if ref.gen == gen and ref.meta == meta:
        return (d["_value"],), ref
      target = None  # (its own, outdated: made again, from what it came from)
    elif d["_value"] is None:  # a placeholder: the aux data it shares
      stop = ref if target is _PLACEHOLDER else ref.stop
      if stop is None or stop.gen != gen or stop.meta != meta:
        stop = d[_AUX] = _placeholder_ref(ref, meta)  # (kept: found at once again)
      return (None,), stop
    if target is None:  # (temporaries gone: not kept)
      ref = ref.origin
      while ref is not None and ref() is None:
        ref = ref.origin
  else:
    ref = None
  own = d[_AUX] = _VariableRef(v)
  own.meta = meta
  own.gen = gen
  own.stop = None
  if ref is None or ref.depth >= _MAX_ORIGINS:  # (a chain of rebuilds is cut)
    own.origin = None
    own.depth = 0
  else:
    own.origin = ref
    own.depth = ref.depth + 1
  return (d["_value"],), own


class _MetaBox:
  """Aux data for metadata that is not hashable; compares by content."""

  __slots__ = ("items",)

  def __init__(self, md):
    self.items = dict(md)

  def __eq__(self, other):
    if not isinstance(other, _MetaBox):
      return NotImplemented  # (a state Variable's VariableRef compares as its _MetaBox)
    return self.items.keys() == other.items.keys() and all(
      self.items[k] is other.items[k] or self.items[k] == other.items[k] for k in self.items
    )

  def __hash__(self):
    return hash(tuple(sorted(self.items)))


def _hashable_items(md: dict) -> bool:
  try:
    hash(tuple(md.values()))
  except TypeError:
    return False
  return True


_new = object.__new__


def _make_unflatten(cls, state: bool):
  # a hot path: one call per Variable each time JAX rebuilds a tree holding it
  set_dict = dict_setter(cls)

  def unflatten_param(aux, children):
    ref = _READ_REF()
    e = _CURRENT_TRACE[0]
    if e[0] is not ref:
      e = _trace_entry(ref)
    d = {"_value": children[0], "_trace": e[1]}
    if aux:  # else its own empty metadata dict is made on first use (``__getattr__``)
      d["_metadata"] = dict(aux.items) if isinstance(aux, _MetaBox) else dict(aux)
    v = _new(cls)
    set_dict(v, d)
    return v

  def unflatten_state(aux, children):
    ref = _READ_REF()
    e = _CURRENT_TRACE[0]
    if e[0] is not ref:
      e = _trace_entry(ref)
    if aux.__class__ is _VariableRef:  # where its value came from (see ``_copy_links``)
      src = aux
      d = {"_value": children[0], "_trace": e[1], _AUX: src}
      aux = src.meta
    else:
      src = None
      d = {"_value": children[0], "_trace": e[1]}
    copy = e[2] and _WATCHING[0]
    if copy:  # rebuilt inside a JAX trace: a copy (see ``_lost_updates``)
      d[_COPY_MARK] = True
    if aux:
      d["_metadata"] = dict(aux.items) if isinstance(aux, _MetaBox) else dict(aux)
    v = _new(cls)
    set_dict(v, d)
    if copy and src is not None:
      _link_copy(v, src)
    return v

  return unflatten_state if state else unflatten_param


def dict_setter(cls):
  """The ``__dict__`` descriptor's setter of ``cls`` (no ``__setattr__`` lookup)."""
  for k in cls.__mro__:
    descr = k.__dict__.get("__dict__")
    if descr is not None and hasattr(descr, "__set__"):
      return descr.__set__
  return lambda obj, d: object.__setattr__(obj, "__dict__", d)


def register_variable_pytree(cls: type) -> None:
  """Registers a Variable subclass as a JAX pytree (one child: its value).

  A Param (or subclass) flattens with its metadata as aux data; any other
  Variable with a ``VariableRef`` to itself that compares as that metadata, so
  that dropped updates of its copies are reported (see ``_lost_updates``)."""
  if issubclass(cls, Param):
    jax.tree_util.register_pytree_with_keys(
      cls, _param_flatten_with_keys, _make_unflatten(cls, False), _param_flatten
    )
  else:
    jax.tree_util.register_pytree_with_keys(
      cls, _state_flatten_with_keys, _make_unflatten(cls, True), _state_flatten
    )


def _init_subclass(cls, **kwargs):
  super(Variable, cls).__init_subclass__(**kwargs)
  register_variable_pytree(cls)


Variable.__init_subclass__ = classmethod(_init_subclass)  # type: ignore[assignment]
for _cls in (Variable, Param, BatchStat, Cache, Intermediate, Perturbation):
  register_variable_pytree(_cls)
_LOST_UPDATES_VARIABLE[0] = Variable  # (``_lost_updates`` links copies of Variables)


def as_pure(tree: Any) -> Any:
  """``tree`` with every Variable replaced by its raw value (metadata dropped).

  Useful to compare or export States as plain arrays.

  Args:
    tree: any pytree (a State, a tuple of States, a list of Variables).

  Returns:
    The same structure with Variables swapped for their values.

  Raises:
    TypeError: never; non-Variable leaves are kept as they are.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> pure = nnx.as_pure(nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0))))
    >>> type(pure["kernel"]).__name__, pure["kernel"].shape
    ('ArrayImpl', (2, 3))
  """
  return jax.tree.map(
    lambda x: x.get_raw_value() if isinstance(x, Variable) else x,
    tree,
    is_leaf=lambda x: isinstance(x, Variable),
  )

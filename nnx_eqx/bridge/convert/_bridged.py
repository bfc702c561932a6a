"""Any NNX module as an ``eqx.Module`` with the same methods and outputs.

For an NNX class without a registered converter, ``nnx.to_eqx`` builds an
instance of an Equinox class made once per (NNX class, attribute layout),
subclassing :class:`NnxModule`. Attributes holding nodes become dynamic fields
(Params and raw arrays -> arrays, other Variables -> ``eqx.nn.StateIndex``,
submodules converted recursively); static attributes become static fields. A
static ``_nnx_spec`` field records each Variable's type and metadata, so
``nnx.from_eqx`` rebuilds the exact NNX module.

Each public method of the NNX class (and ``__call__``) is a method of the
Equinox class: it rebuilds the NNX module from the fields, calls the NNX
method, and, if the module has state, takes and returns an ``eqx.nn.State``:
``out, state = eqx_model(x, state)`` (or ``state=state``), as stateful Equinox
layers do, so ``eqx.nn.Sequential`` threads it through.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, ClassVar

import equinox as eqx
import jax.tree_util as jtu

from ...graph.api._functional import StaticValue, is_graph_node
from ...graph.pytree._flags import mode_attrs
from ...graph.tracing._traces import current_trace
from ...graph.variables._variables import Variable
from ...graph.walk._links import path_of
from ...graph.walk._node_types import LEAF_TYPES
from ...module._containers import Dict, List
from ...module._module import Module
from .._errors import MissingStateError
from ..walk._context import FromEqxContext, build_eqx, impl_of
from ..walk._eqx_state import is_index
from ..walk._iter import any_leaf, fold
from ..walk._to_eqx import ToEqxContext
from . import _modes
from ._forms import form_base
from ._pickling import made_class
from ._static import StaticField, box, is_hashable

_DUNDERS = frozenset({"__call__", "__getitem__", "__len__", "__iter__", "__contains__"})


class NnxModule(eqx.nn.StatefulLayer):
  """Base class of the Equinox modules made by generic conversion of an NNX module.

  ``nnx_type`` is the NNX class; ``nnx.from_eqx`` rebuilds an instance of it.
  ``is_stateful()`` is True when the module holds an ``eqx.nn.StateIndex``;
  then its methods take an ``eqx.nn.State`` last (or as ``state=``) and return
  ``(output, state)``.

  Raises:
    MissingStateError: a method of a stateful module is called without a State.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Count(nnx.Module):
    ...   def __init__(self):
    ...     self.n = nnx.BatchStat(jnp.array(0))
    ...   def __call__(self, x):
    ...     self.n += 1
    ...     return x * 2
    >>> model, state = nnx.to_eqx_with_state(Count())
    >>> y, state = model(jnp.ones(2), state)
    >>> isinstance(model, nnx.bridge.NnxModule), int(state.get(model.n))
    (True, 1)
  """

  nnx_type: ClassVar[type]

  def is_stateful(self) -> bool:
    return any(is_index(x) for x in jtu.tree_leaves(self, is_leaf=is_index))


_CLASSES: dict[tuple, type] = {}


def _members(nnx_type: type):
  mro = nnx_type.__mro__
  own = mro[: mro.index(Module)]
  seen: dict[str, Any] = {}
  for klass in reversed(own):
    for name, attr in vars(klass).items():
      if name.startswith("_") and name not in _DUNDERS:
        continue
      seen[name] = attr
  return seen.items()


def bridged_class(
  nnx_type: type, dynamic: tuple, static: tuple, boxed: tuple = (), modes: tuple = ()
) -> type:
  """The (cached) Equinox class for an NNX class with this attribute layout;
  the static fields named in ``boxed`` hold unhashable values (see ``_static``),
  and the mode attributes ``modes`` make an ``inference`` field (see ``_modes``)."""
  key = (nnx_type, dynamic, static, boxed, modes) if modes else (nnx_type, dynamic, static, boxed)
  cls = _CLASSES.get(key)
  if cls is not None:
    return cls
  mode_fields = (_modes.FIELD, _modes.BASE) if modes else ()
  base = form_base(nnx_type) or NnxModule  # (a public class of nnx_eqx: see _forms)
  named = nnx_type if base is NnxModule else base
  ns: dict[str, Any] = {
    "__annotations__": {
      **{k: Any for k in dynamic},
      **({_modes.FIELD: Any} if modes else {}),
      **{k: Any for k in static},
      **({_modes.BASE: Any} if modes else {}),
      "_nnx_spec": Any,
      "_nnx_meta": Any,
    },
    "_nnx_spec": eqx.field(static=True),
    "_nnx_meta": eqx.field(static=True),
    **{k: eqx.field(static=True) for k in static},
    **({_modes.BASE: eqx.field(static=True), "_nnx_mode_names": modes} if modes else {}),
    "nnx_type": nnx_type,
    "__module__": named.__module__,
    "__qualname__": named.__qualname__,
    "__doc__": f"Equinox form of the NNX module {nnx_type.__qualname__} (see nnx.to_eqx).",
  }
  for name, attr in _members(nnx_type):
    if name in mode_fields or name in modes:
      continue
    if isinstance(attr, property):
      ns[name] = _wrap_property(name)
    elif callable(attr) and not isinstance(attr, (staticmethod, classmethod, type)):
      ns[name] = _wrap_method(name, attr)
  cls = made_class(bridged_class, key, named.__name__, base, ns)
  for k in boxed:  # after the dataclass transform, which would take it for a default
    setattr(cls, k, StaticField(k))
  if modes:
    _modes.install(cls, modes)
  _CLASSES[key] = cls
  return cls


def _static(v: Any) -> Any:
  """``v``, or (if unhashable, e.g. a list) a ``StaticValue`` box comparing by content:
  Equinox hashes static fields."""
  try:
    hash(v)
  except TypeError:
    return StaticValue(v)
  return v


def _unstatic(v: Any) -> Any:
  return v.value if isinstance(v, StaticValue) else v


def _is_node(v: Any) -> bool:
  return isinstance(v, (Variable, *LEAF_TYPES)) or is_graph_node(v)


def _within(v: Any) -> list | None:
  """The children ``_dynamic`` looks into (any tuple, list or dict)."""
  if _is_node(v):
    return None
  if isinstance(v, (tuple, list)):
    return list(enumerate(v))
  if isinstance(v, dict):
    return list(v.items())
  return None


def _dynamic(v: Any) -> bool:
  return any_leaf(v, _within, _is_node)


def _spec_children(v: Any) -> list | None:
  if isinstance(v, Variable):
    return None
  t = type(v)
  if t is List:
    return list(enumerate(v))
  if t is Dict:
    return [(k, v[k]) for k in v]
  if is_graph_node(v) or isinstance(v, LEAF_TYPES):
    return None
  if isinstance(v, (tuple, list)):
    return list(enumerate(v))
  if t is dict:
    return list(v.items())
  return None


def _leaf_spec(v: Any, _at: Any) -> Any:
  if isinstance(v, Variable):
    return ("var", type(v), _static(tuple(sorted(v.metadata.items()))))
  if is_graph_node(v):
    return ("node",)
  if isinstance(v, LEAF_TYPES):
    return ("raw",)
  return ("static",)


def _container_spec(v: Any, specs: list) -> Any:
  t = type(v)
  if t is List:
    return ("list", tuple(specs))
  if t is Dict:
    return ("dict", tuple(zip(v, specs)))
  if isinstance(v, (tuple, list)):
    return ("seq", t, tuple(specs))
  return ("map", tuple(zip(v, specs)))


def _spec(v: Any) -> Any:
  """How ``nnx.from_eqx`` rebuilds the attribute ``v`` (a nested tuple)."""
  return fold(v, _spec_children, _leaf_spec, _container_spec)


def bridged_from_nnx(module: Any, ctx: ToEqxContext) -> NnxModule:
  """``nnx.to_eqx`` for an NNX module without a registered converter."""
  impl = impl_of(type(module))
  items = impl.children(module)
  meta = _static(impl.metadata(module))
  if isinstance(module, List):
    cls = bridged_class(type(module), ("items",), ())
    values = [ctx.convert(v, ctx.path + (k,)) for k, v in items]
    items_spec = (("items", ("seq", list, tuple(_spec(v) for _, v in items))),)
    return build_eqx(cls, items=values, _nnx_spec=items_spec, _nnx_meta=meta)
  modes = mode_attrs(module) or ()
  base = tuple((k, v) for k, v in items if k in modes)
  items = [(k, v) for k, v in items if k not in modes]
  dynamic = tuple(k for k, v in items if _dynamic(v))
  static = tuple(k for k, v in items if not _dynamic(v))
  boxed = tuple(k for k, v in items if k in static and not is_hashable(v))
  cls = bridged_class(type(module), dynamic, static, boxed, tuple(k for k, _ in base))
  fields = _modes.fields(base) if base else {}
  spec: list = []
  for k, v in items:
    if k in dynamic:
      fields[k] = ctx.convert(v, ctx.path + (k,))
      spec.append((k, _spec(v)))
    else:
      fields[k] = box(v) if k in boxed else v
  return build_eqx(cls, _nnx_spec=tuple(spec), _nnx_meta=meta, **fields)


def _rebuild(ctx: FromEqxContext, value: Any, spec: tuple, path: tuple) -> Any:
  """The NNX attribute for the Equinox field ``value`` that ``spec`` describes.

  Works with an explicit stack (the attribute may nest containers thousands of
  levels deep); a position's path is kept as (parent, key) links and spelt out
  only where a Variable, a module or a tie needs it.
  """

  def at(link: Any) -> tuple:
    return path + path_of(link)

  def tied(link: Any) -> Any:
    group = ctx._ties.get(at(link)) if ctx._ties else None
    return None if group is None else ctx._memo.get((group, "node"))

  def expand(elem: tuple) -> list | None:
    value, spec, link = elem
    kind = spec[0]
    if kind in ("list", "seq"):
      if kind == "list" and tied(link) is not None:
        return None
      specs = spec[1] if kind == "list" else spec[2]
      return [(i, (v, s, (link, jtu.SequenceKey(i)))) for i, (v, s) in enumerate(zip(value, specs))]
    if kind in ("dict", "map"):
      if kind == "dict" and tied(link) is not None:
        return None
      return [(k, (value[k], s, (link, jtu.DictKey(k)))) for k, s in spec[1]]
    return None

  def leaf(elem: tuple, _at: Any) -> Any:
    value, spec, link = elem
    kind = spec[0]
    if kind == "var":
      md = dict(_unstatic(spec[2]))
      return ctx.make_variable(value, at(link), spec[1], None, md)
    if kind == "node":
      return ctx.convert(value, at(link))
    if kind in ("raw", "static"):
      return value
    if kind in ("list", "dict"):
      return tied(link)
    raise AssertionError(spec)

  def build(elem: tuple, items: list) -> Any:
    _, spec, link = elem
    kind = spec[0]
    if kind == "list":
      return ctx.tied_node(at(link) if ctx._ties else path, lambda: List(items))
    if kind == "dict":
      keys = [k for k, _ in spec[1]]
      return ctx.tied_node(at(link) if ctx._ties else path, lambda: Dict(dict(zip(keys, items))))
    if kind == "seq":
      t = spec[1]
      return items if t is list else (tuple(items) if t is tuple else t(*items))
    return dict(zip([k for k, _ in spec[1]], items))

  return fold((value, spec, None), expand, leaf, build)


def bridged_to_nnx(b: NnxModule, ctx: FromEqxContext) -> Any:
  """``nnx.from_eqx`` for an :class:`NnxModule`: the NNX module it stands for."""
  nnx_type = type(b).nnx_type
  impl = impl_of(nnx_type)
  obj = impl.create(nnx_type, _unstatic(getattr(b, "_nnx_meta")), current_trace())
  children: list[tuple[Any, Any]] = []
  spec = dict(getattr(b, "_nnx_spec"))
  if isinstance(obj, List):
    path = ctx.path + (jtu.GetAttrKey("items"),)
    values = _rebuild(ctx, getattr(b, "items"), spec["items"], path)
    children = list(enumerate(values))
  else:
    modes = getattr(type(b), "_nnx_mode_names", ())
    for name in [*type(b).__annotations__]:
      if name in ("_nnx_spec", "_nnx_meta") or (modes and name in (_modes.FIELD, _modes.BASE)):
        continue
      value = getattr(b, name)
      if name in spec:
        children.append(
          (name, _rebuild(ctx, value, spec[name], ctx.path + (jtu.GetAttrKey(name),)))
        )
      else:
        children.append((name, value))
    if modes:
      children.extend(b.__dict__[_modes.BASE])
  impl.set_children(obj, children)
  if modes:
    _modes.rebuild(b, obj)
  return obj


# --------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------
@functools.cache
def _takes_key(fn: Any) -> bool:
  """Whether ``fn`` has a parameter named ``key``."""
  try:
    return "key" in inspect.signature(fn).parameters
  except (TypeError, ValueError):
    return False


def call_nnx(root: eqx.Module, stateful: bool, name: str, fn: Any, args: tuple, kwargs: dict):
  """Rebuilds the NNX module of ``root``, calls its method ``name``, returns
  ``out`` or, when ``stateful``, ``(out, state)``."""
  state = None
  if stateful:
    if "state" in kwargs:
      state = kwargs.pop("state")
    elif args and isinstance(args[-1], eqx.nn.State):
      state, args = args[-1], args[:-1]
    else:
      raise MissingStateError(
        f"{type(root).__name__}.{name}: this module (converted from NNX) keeps state"
        " in an eqx.nn.State, and none was given. Fix: call it as"
        " `out, state = model(..., state)` with the State from"
        " `nnx.to_eqx_with_state`."
      )
  if "key" in kwargs and not _takes_key(fn):
    del kwargs["key"]  # Equinox passes `key=` to every layer; NNX methods rarely take it
  ctx = FromEqxContext(state)
  module = ctx.convert(root, ())
  out = getattr(module, name)(*args, **kwargs)
  if state is None:
    return out
  for link in ctx.links:
    state = state.set(link.state_index, link.read())
  return out, state


def _wrap_method(name: str, fn: Any):
  @functools.wraps(fn)
  def method(self, *args, **kwargs):
    return call_nnx(self, self.is_stateful(), name, fn, args, kwargs)

  return method


def _wrap_property(name: str) -> property:
  def fget(self):
    return getattr(FromEqxContext(None).convert(self, ()), name)

  return property(fget)

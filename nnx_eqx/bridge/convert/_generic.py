"""Any ``eqx.Module`` subclass as an NNX module with the same fields and methods.

For an Equinox class ``T`` without a registered converter, ``nnx.from_eqx``
builds an instance of a subclass of :class:`EqxModule` made once per ``T``:
every field becomes an attribute (inexact arrays -> ``Param``, other arrays ->
``Variable``, ``StateIndex`` -> :class:`nnx.bridge.EqxState`, static fields
static, submodules converted recursively), and every method, property and
``__call__`` of ``T`` is available. A method runs ``T``'s own code on an
Equinox view of the module's current values, so it computes exactly what the
original computes; under ``nnx.jit``/``nnx.grad`` the view is built from the
traced values, so gradients reach the Variables.

Methods that take a ``key`` also accept ``rngs=`` (an ``nnx.Rngs``, whose
``"dropout"`` stream gives the key, an ``nnx.RngStream`` or a key) when their
own signature has no ``rngs``; an explicit ``key`` wins. Called with no key,
converted Dropouts in the view draw from their streams (``nnx.from_eqx(model,
rngs=...)``).

Methods that take an ``eqx.nn.State`` (parameter ``state``) keep working: the
state lives in the module's Variables, the view gets a fresh ``State`` built from
them, and the updated values are written back. Pass any placeholder (e.g.
``None``) for ``state``; it is returned where Equinox returns the new State.
Called without it, the method returns its output without the State.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, ClassVar

import equinox as eqx
import jax.tree_util as jtu

from ...graph.pytree._flags import register_flag
from ...module._module import Module
from .._errors import BridgeError, UnconvertibleFieldError
from ..walk import _registry
from ..walk._context import FromEqxContext, build_eqx, impl_of, is_array
from ..walk._eqx_state import EqxState, fmt_path, write_back
from ..walk._to_eqx import ToEqxContext
from ._bridged import NnxModule, bridged_from_nnx, bridged_to_nnx
from ._convert import to_eqx_parts
from ._pickling import made_class
from ._random import draw_key

_DUNDERS = frozenset({"__call__", "__getitem__", "__len__", "__iter__", "__contains__"})


class EqxModule(Module):
  """Base class of the NNX modules made by generic conversion of an Equinox module.

  ``eqx_type`` is the Equinox class; ``nnx.to_eqx`` rebuilds an instance of it.

  Raises:
    BridgeError: a method with a ``state`` parameter is given an
      ``eqx.nn.State``: the state lives in the module's Variables (pass None).

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Affine(eqx.Module):
    ...   w: jnp.ndarray
    ...   n: int = eqx.field(static=True)
    ...   def __call__(self, x): return self.w * x + self.n
    >>> m = nnx.from_eqx(Affine(jnp.full(2, 2.0), 1))
    >>> isinstance(m, nnx.bridge.EqxModule), type(m.w).__name__, m(jnp.ones(2)).tolist()
    (True, 'Param', [3.0, 3.0])
  """

  eqx_type: ClassVar[type]


class StaticBox:
  """Holds a static field value that contains arrays (so NNX keeps it static)."""

  __slots__ = ("value",)

  def __init__(self, value: Any):
    self.value = value


_CLASSES: dict[type, type] = {}


def _members(eqx_type: type):
  """(name, attribute) of the methods/properties ``eqx_type`` defines, most derived last."""
  mro = eqx_type.__mro__
  own = mro[: mro.index(eqx.Module)]
  fields = {f.name for f in dataclasses.fields(eqx_type)}
  seen: dict[str, Any] = {}
  for klass in reversed(own):
    for name, attr in vars(klass).items():
      if name in fields or (name.startswith("__") and name not in _DUNDERS):
        continue
      seen[name] = attr
  return seen.items()


def nnx_class(eqx_type: type) -> type:
  """The (cached) NNX class for generic conversions of ``eqx_type``."""
  cls = _CLASSES.get(eqx_type)
  if cls is not None:
    return cls
  ns: dict[str, Any] = {
    "eqx_type": eqx_type,
    "__module__": eqx_type.__module__,
    "__qualname__": eqx_type.__qualname__,
    "__doc__": f"NNX form of the Equinox module {eqx_type.__qualname__} (see nnx.from_eqx).",
  }
  for name, attr in _members(eqx_type):
    if isinstance(attr, (staticmethod, classmethod)):
      ns[name] = attr
    elif isinstance(attr, property):
      ns[name] = _wrap_property(name, attr)
    elif callable(attr):
      ns[name] = _wrap_method(name, attr)
  cls = made_class(nnx_class, (eqx_type,), eqx_type.__name__, EqxModule, ns)
  if "inference" in {f.name for f in dataclasses.fields(eqx_type)}:
    register_flag(cls)  # its mode is part of its pytree view (see _pytree_flags)
  _CLASSES[eqx_type] = cls
  return cls


def _view(module: EqxModule):
  model, state, links, _ = to_eqx_parts(module, view=True)
  return model, state, links


def _wrap_property(name: str, prop: property) -> property:
  def fget(self):
    return getattr(_view(self)[0], name)

  return property(fget, doc=prop.__doc__)


def _wrap_method(name: str, fn: Any):
  @functools.wraps(fn)
  def method(self, *args, **kwargs):
    if "rngs" in kwargs:
      args, kwargs = _rngs_to_key(type(self).eqx_type, name, args, kwargs)
    view, state, links = _view(self)
    bound = getattr(view, name)
    if state is None:
      return bound(*args, **kwargs)
    return _stateful_call(type(self).eqx_type, name, bound, args, kwargs, state, links)

  return method


@functools.cache
def _signature(eqx_type: type, name: str) -> inspect.Signature | None:
  try:
    return inspect.signature(getattr(eqx_type, name))
  except (TypeError, ValueError):
    return None


def _rngs_to_key(eqx_type: type, name: str, args: tuple, kwargs: dict) -> tuple:
  """``rngs=`` for a method that takes ``key`` but no ``rngs``: one key drawn
  from it (its ``"dropout"`` stream) is passed as ``key``, unless a key is given."""
  sig = _signature(eqx_type, name)
  if sig is None or "rngs" in sig.parameters or "key" not in sig.parameters:
    return args, kwargs
  kwargs = dict(kwargs)
  rngs = kwargs.pop("rngs")
  ba = sig.bind_partial(None, *args, **kwargs)
  if ba.arguments.get("key") is None and rngs is not None:
    ba.arguments["key"] = draw_key(rngs, None, f"{eqx_type.__name__}.{name}")
  return ba.args[1:], ba.kwargs


def check_placeholder(state: Any, where: str) -> None:
  """Raises if an ``eqx.nn.State`` is passed to an NNX module (its state is in Variables)."""
  if isinstance(state, eqx.nn.State):
    raise BridgeError(
      f"{where}: got an eqx.nn.State, but this NNX module keeps its state in its own"
      " Variables (BatchStat, EqxState, ...). Fix: pass `None` (or any placeholder)"
      " for `state`; it is returned unchanged. To use an eqx.nn.State, convert back"
      " with `nnx.to_eqx_with_state`, or build the module with"
      " `nnx.from_eqx(model, state)`."
    )


def _stateful_call(eqx_type, name, bound, args, kwargs, state, links):
  sig = _signature(eqx_type, name)
  if sig is None or "state" not in sig.parameters:
    return bound(*args, **kwargs)
  ba = sig.bind_partial(None, *args, **kwargs)
  passed = "state" in ba.arguments
  placeholder = ba.arguments.get("state")
  check_placeholder(placeholder, f"{eqx_type.__name__}.{name}")
  ba.arguments["state"] = state
  out = bound(*ba.args[1:], **ba.kwargs)
  leaves, treedef = jtu.tree_flatten(out, is_leaf=lambda x: isinstance(x, eqx.nn.State))
  found = [i for i, leaf in enumerate(leaves) if isinstance(leaf, eqx.nn.State)]
  if not found:
    return out
  new_state = leaves[found[-1]]
  write_back(links, new_state)
  if passed:
    for i in found:
      leaves[i] = placeholder
    return jtu.tree_unflatten(treedef, leaves)
  if isinstance(out, tuple) and out and out[-1] is new_state:
    return out[0] if len(out) == 2 else out[:-1]
  return out


def generic_to_nnx(value: eqx.Module, ctx: FromEqxContext) -> EqxModule:
  """``nnx.from_eqx`` for an Equinox module without a registered converter."""
  if isinstance(value, NnxModule):
    return bridged_to_nnx(value, ctx)
  cls = nnx_class(type(value))
  out = cls()
  d = vars(value)
  for f in dataclasses.fields(type(value)):
    if f.name not in d:
      continue
    v = d[f.name]
    if f.metadata.get("static", False):
      has_arrays = any(is_array(x) for x in jtu.tree_leaves(v))
      setattr(out, f.name, StaticBox(v) if has_arrays else v)
    else:
      setattr(out, f.name, ctx.child(f.name))
  return out


def generic_to_eqx(module: EqxModule, ctx: ToEqxContext) -> eqx.Module:
  """``nnx.to_eqx`` for an :class:`EqxModule`: an instance of its Equinox class."""
  eqx_type = type(module).eqx_type
  children = dict(impl_of(type(module)).children(module))
  fields = dataclasses.fields(eqx_type)
  extra = sorted(set(children) - {f.name for f in fields})
  if extra:
    raise UnconvertibleFieldError(
      f"nnx.to_eqx: {fmt_path(ctx.path)} has attribute(s) {extra} that are not"
      f" fields of the Equinox class {eqx_type.__qualname__} it was converted from."
      " Fix: delete them before converting, or convert a module of your own NNX class."
    )
  values = {}
  for f in fields:
    if f.name not in children:
      continue
    v = children[f.name]
    if f.metadata.get("static", False):
      values[f.name] = v.value if isinstance(v, StaticBox) else v
    else:
      values[f.name] = ctx.convert(v, ctx.path + (f.name,), state_types=(EqxState,))
  return build_eqx(eqx_type, **values)


def _any_to_eqx(module: Any, ctx: ToEqxContext) -> eqx.Module:
  """``nnx.to_eqx`` for an NNX module without a registered converter."""
  if isinstance(module, EqxModule):
    return generic_to_eqx(module, ctx)
  return bridged_from_nnx(module, ctx)


_registry.GENERIC.update(to_nnx=generic_to_nnx, to_eqx=_any_to_eqx)

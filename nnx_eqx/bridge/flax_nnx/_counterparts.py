"""flax.nnx objects that have an nnx_eqx class of their own: converted to it, not held.

A flax ``Optimizer`` becomes an ``nnx.Optimizer`` (a ``ModelAndOptimizer`` nnx_eqx's,
over the converted model) and a flax metric (``Average``,
``Welford``, ``Accuracy``, ``MultiMetric``) nnx_eqx's metric of the same name, with
the same settings and state, so what runs next is nnx_eqx's own code on the same
values: an optimizer's optax state (the same arrays, in nnx_eqx's ``OptState``
Variables at the same paths) and step make the next updates those flax would have
made. :func:`to_flax_counterpart` is the mirror image. Only these exact classes are
converted this way; a subclass is a flax Module like any other (``from_flax`` holds
it, and runs its own code).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import optax

from ...graph import State, Variable, state, update
from ...module import Dict
from ...training import Optimizer
from ...training import metrics as nnx_metrics
from ...training.optimizer import ModelAndOptimizer
from .._errors import FlaxConversionError
from ._import import flax_nnx
from ._types import flax_type, nnx_type, to_flax_variable, to_nnx_variable

Convert = Callable[[Any], Any]
"""``nnx.from_flax`` or ``nnx.to_flax``, for what an object holds (a model)."""

_SETTINGS = {"Average": ("argname",), "Welford": ("argname",), "Accuracy": ("threshold", "argname")}
"""The constructor arguments of each paired metric, kept as attributes on both sides."""


def _metric_pairs() -> list[tuple[type, type]]:
  """``(flax class, nnx_eqx class)`` of the metrics both libraries define."""
  flax_nnx()  # (FlaxNotInstalledError, naming the extra, without flax)
  from flax.nnx.training import metrics as flax_metrics  # optional: the `flax` extra

  names = (*_SETTINGS, "MultiMetric")
  return [(getattr(flax_metrics, n), getattr(nnx_metrics, n)) for n in names]


def _paired(obj: Any, side: int) -> type | None:
  """The other library's class for an object of exactly one paired metric class."""
  for pair in _metric_pairs():
    if type(obj) is pair[side]:
      return pair[1 - side]
  return None


# -- filters ------------------------------------------------------------------------------
def _filter(f: Any, convert_type: Any, where: str) -> Any:
  """A ``wrt`` filter in the other library's terms: Variable classes paired, tuples
  element by element; ``...``, booleans, None and tag strings mean the same in both.

  Raises:
    FlaxConversionError: another kind of filter (a predicate, a filter object), whose
      meaning depends on the library's own classes.
  """
  if isinstance(f, type):
    return convert_type(f)
  if isinstance(f, (tuple, list)):
    return type(f)(_filter(x, convert_type, where) for x in f)
  if f is Ellipsis or f is None or isinstance(f, (bool, str)):
    return f
  raise FlaxConversionError(
    f"The optimizer's wrt filter {f!r} ({where}) is neither a Variable class, a tuple of"
    " them, `...`, a bool, None nor a tag string, so it has no counterpart in the other"
    " library. Fix: build the optimizer with a Variable class as wrt (e.g. nnx.Param)."
  )


# -- optax states -------------------------------------------------------------------------
def _opt_state_from_flax(tree: Any) -> Any:
  fnnx = flax_nnx()

  def leaf(x: Any) -> Any:
    if isinstance(x, fnnx.Variable):
      return to_nnx_variable(x)
    if isinstance(x, fnnx.State):
      return State.from_flat_path(
        [
          (p, to_nnx_variable(v) if isinstance(v, fnnx.Variable) else v)
          for p, v in fnnx.to_flat_state(x)
        ]
      )
    return x

  return jax.tree.map(leaf, tree, is_leaf=lambda x: isinstance(x, (fnnx.Variable, fnnx.State)))


def _opt_state_to_flax(tree: Any) -> Any:
  fnnx = flax_nnx()

  def leaf(x: Any) -> Any:
    if isinstance(x, Variable):
      return to_flax_variable(x)
    if isinstance(x, State):
      return fnnx.from_flat_state(
        [(p, to_flax_variable(v) if isinstance(v, Variable) else v) for p, v in x.flat_state()]
      )
    return x

  return jax.tree.map(leaf, tree, is_leaf=lambda x: isinstance(x, (Variable, State)))


def _optimizer_from_flax(obj: Any, convert: Convert) -> Optimizer:
  wrt = _filter(obj.wrt, nnx_type, "of the flax optimizer")
  # built with no optax state, then given flax's transformation, step and optax state
  if type(obj) is flax_nnx().ModelAndOptimizer:
    opt: Optimizer = ModelAndOptimizer(convert(obj.model), optax.identity(), wrt=wrt)
  else:
    opt = Optimizer(Dict(), optax.identity(), wrt=wrt, graph=obj.graph)
  opt.tx = obj.tx
  opt.step.value = obj.step.get_value()
  vars(opt)["opt_state"] = _opt_state_from_flax(obj.opt_state)  # as Optimizer.__init__ keeps it
  return opt


def _optimizer_to_flax(opt: Optimizer, convert: Convert) -> Any:
  fnnx = flax_nnx()
  wrt = _filter(opt.wrt, flax_type, "of the nnx_eqx optimizer")
  if isinstance(opt, ModelAndOptimizer):
    out = fnnx.ModelAndOptimizer(convert(opt.model), optax.identity(), wrt=wrt)
  else:
    out = fnnx.Optimizer(fnnx.Dict(), optax.identity(), wrt=wrt, graph=opt.graph)
  out.tx = opt.tx
  out.step = to_flax_variable(opt.step)
  out.opt_state = fnnx.data(_opt_state_to_flax(opt.opt_state))
  return out


# -- metrics ------------------------------------------------------------------------------
def _metric_from_flax(obj: Any, ours: Any, convert: Convert) -> Any | None:
  if ours is nnx_metrics.MultiMetric:
    kids: dict[str, Any] = {
      n: from_flax_counterpart(getattr(obj, n), convert) for n in obj._metric_names
    }
    return None if None in kids.values() else ours(**kids)
  out = ours(**{k: getattr(obj, k) for k in _SETTINGS[ours.__name__]})
  fnnx = flax_nnx()
  update(
    out,
    State.from_flat_path([(p, to_nnx_variable(v)) for p, v in fnnx.to_flat_state(fnnx.state(obj))]),
  )
  return out


def _metric_to_flax(obj: Any, theirs: type, convert: Convert) -> Any | None:
  fnnx = flax_nnx()
  if type(obj) is nnx_metrics.MultiMetric:
    kids = {n: to_flax_counterpart(getattr(obj, n), convert) for n in obj._metric_names}
    return None if None in kids.values() else theirs(**kids)
  out = theirs(**{k: getattr(obj, k) for k in _SETTINGS[theirs.__name__]})
  flat = [(p, to_flax_variable(v)) for p, v in state(obj).flat_state()]
  fnnx.update(out, fnnx.from_flat_state(flat))
  return out


# -- entry points -------------------------------------------------------------------------
def from_flax_counterpart(obj: Any, convert: Convert) -> Any | None:
  """nnx_eqx's own object for a flax ``Optimizer`` (or ``ModelAndOptimizer``, whose
  model goes through ``convert``, i.e. ``nnx.from_flax``) or metric (see the module
  docstring); None for any other object (and for a ``MultiMetric`` holding a metric
  of another class).

  Raises:
    FlaxConversionError: the optimizer's ``wrt`` filter has no nnx_eqx counterpart.
  """
  fnnx = flax_nnx()
  if type(obj) in (fnnx.Optimizer, fnnx.ModelAndOptimizer):
    return _optimizer_from_flax(obj, convert)
  ours = _paired(obj, 0)
  return None if ours is None else _metric_from_flax(obj, ours, convert)


def to_flax_counterpart(obj: Any, convert: Convert) -> Any | None:
  """flax's own object for an ``nnx.Optimizer`` (or ``ModelAndOptimizer``, whose model
  goes through ``convert``, i.e. ``nnx.to_flax``) or metric; None for any other object.

  Raises:
    FlaxConversionError: the optimizer's ``wrt`` filter has no flax counterpart.
    FlaxNotInstalledError: flax is not installed.
  """
  if type(obj) in (Optimizer, ModelAndOptimizer):
    return _optimizer_to_flax(obj, convert)
  theirs = _paired(obj, 1)
  return None if theirs is None else _metric_to_flax(obj, theirs, convert)

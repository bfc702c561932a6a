"""``nnx.capture``: collect what a call sows and perturbs, as States (flax.nnx 0.12)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from ..graph.api import _functional as _graph
from ..graph.state._state import State
from ..graph.variables._variables import Variable
from ._capture_slots import CAPTURES
from ._module import Module
from ._pytree import data


def capture(
  fn: Any,
  *var_types: type[Variable],
  init: State | None = None,
  method_outputs: type[Variable] | None = None,
) -> Callable[..., Any]:
  """Wraps ``fn`` so a call also returns what its modules sow, by module path.

  While the wrapped call runs, ``Module.sow(T, name, value)`` on any module
  reachable from the root stores into a capture of type ``T`` (when ``T`` is
  one of ``var_types``) instead of an attribute, and ``Module.perturb`` adds
  a perturbation (zeros unless ``init`` gives one). The captures are module
  state, so they pass through nnx.jit/grad/vmap/scan inside the call; they
  are removed afterwards, leaving the modules as they were.

  Args:
    fn: a function whose first argument is the root module, a bound method of
      a Module, or a Module (its ``__call__``). A Variable type here instead
      makes ``capture`` a decorator factory: ``nnx.capture(nnx.Intermediate)(f)``.
    *var_types: the Variable types to capture and return, in order.
    init: a State (e.g. perturbations returned by an earlier capture) whose
      entries seed the captures at their module paths; differentiate with
      respect to it to get the gradients of perturbed values.
    method_outputs: if given, every public method (and ``__call__``) of the
      modules sows its output under its own name with this Variable type for
      the duration of the call.

  Returns:
    A function returning ``out`` when no type is captured, ``(out, state)``
    for one type and ``(out, *states)`` for several; each State is nested by
    module path, each entry a Variable of its type holding the sown value
    (a tuple for the default reduction).

  Raises:
    TypeError: if the root (``fn``'s first argument) is not a Module.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class M(nnx.Module):
    ...   def __init__(self):
    ...     self.lin = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    ...   def __call__(self, x):
    ...     y = self.lin(x)
    ...     self.sow(nnx.Intermediate, "y", y)
    ...     return y
    >>> m = M()
    >>> out, inter = nnx.capture(m, nnx.Intermediate)(jnp.ones((1, 2)))
    >>> inter["y"].value[0].shape, hasattr(m, "y")
    ((1, 3), False)
  """
  if isinstance(fn, type) and issubclass(fn, Variable):
    types = (fn, *var_types)
    return lambda f: capture(f, *types, init=init, method_outputs=method_outputs)
  bound = fn.__self__ if inspect.ismethod(fn) and isinstance(fn.__self__, Module) else None
  if isinstance(fn, Module):
    bound = fn

  @functools.wraps(fn)
  def wrapper(*args: Any, **kwargs: Any) -> Any:
    root = bound if bound is not None else (args[0] if args else None)
    if not isinstance(root, Module):
      raise TypeError(
        f"nnx.capture: the root must be a Module (the first argument of the function, a"
        f" bound method's instance or the Module itself), got {type(root).__name__}."
        " Fix: pass the model first, or capture model.method."
      )
    seeds = _seeds(init)
    modules = list(_graph.iter_modules(root))
    for path, m in modules:
      held: dict[type, dict] = {t: {} for t in var_types}
      for name, var in seeds.get(tuple(path), {}).items():
        held.setdefault(type(var), {})[name] = var.value
      setattr(m, CAPTURES, data(tuple(t(d) for t, d in held.items())))
    patched = _patch_methods({type(m) for _, m in modules}, method_outputs)
    try:
      out = fn(*args, **kwargs)
    finally:
      _unpatch(patched)
      states = _collect(root, var_types)
    if not var_types:
      return out
    return (out, states[0]) if len(var_types) == 1 else (out, *states)

  return wrapper


def _seeds(init: State | None) -> dict[tuple, dict[str, Variable]]:
  """Module path -> {name: Variable} from an ``init`` State."""
  out: dict[tuple, dict[str, Variable]] = {}
  if init is None:
    return out
  for path, var in init.to_flat_dict().items():
    if isinstance(var, Variable):
      out.setdefault(tuple(path[:-1]), {})[path[-1]] = var
  return out


def _collect(root: Module, var_types: tuple) -> list[State]:
  """One State per captured type from the modules' captures, which are removed."""
  nested: dict[type, dict] = {t: {} for t in var_types}
  for path, m in list(_graph.iter_modules(root)):
    slots = m.__dict__.get(CAPTURES)
    if slots is None:
      continue
    for slot in slots:
      if type(slot) in nested and slot.value:
        node = nested[type(slot)]
        for key in path:
          node = node.setdefault(key, {})
        node.update({k: type(slot)(v) for k, v in slot.value.items()})
    delattr(m, CAPTURES)
  return [State(_sorted(nested[t])) for t in var_types]


def _sorted(tree: dict) -> dict:
  """Keys in sorted order at every level (integers first), as flax.nnx's States come."""
  keys = sorted(tree, key=lambda k: (isinstance(k, str), k))
  return {k: _sorted(tree[k]) if type(tree[k]) is dict else tree[k] for k in keys}


def _public_methods(cls: type) -> Iterator[tuple[str, Any]]:
  for name, fn in list(cls.__dict__.items()):
    if callable(fn) and not isinstance(fn, (type, staticmethod, classmethod)):
      if name == "__call__" or not name.startswith("_"):
        yield name, fn


def _patch_methods(classes: set, variable_type: type[Variable] | None) -> list:
  """Makes each public method of ``classes`` sow its output; returns the undo list."""
  if variable_type is None:
    return []
  undo = []
  for cls in classes:  # the library's layers too (their outputs are sown, as in flax.nnx)
    for name, fn in _public_methods(cls):
      undo.append((cls, name, fn))
      setattr(cls, name, _sowing(name, fn, variable_type))
  return undo


def _sowing(name: str, fn: Callable, variable_type: type[Variable]) -> Callable:
  @functools.wraps(fn)
  def method(self: Module, *args: Any, **kwargs: Any) -> Any:
    out = fn(self, *args, **kwargs)
    self.sow(variable_type, name, out)
    return out

  return method


def _unpatch(undo: list) -> None:
  for cls, name, fn in undo:
    setattr(cls, name, fn)

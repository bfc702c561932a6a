"""Process-wide defaults for the ``graph=`` and ``graph_updates=`` keywords.

flax.nnx 0.12 lets every graph function and lifted transform run in *graph
mode* (shared references allowed, today's behaviour) or *tree mode* (plain
pytree semantics), and lets lifted transforms skip propagating structural
updates (``graph_updates=False``). nnx_eqx always keeps sharing, so both modes
give the same results for graphs without shared references; the keywords are
accepted everywhere flax accepts them and their defaults live here, beside
the default of ``capture_noop=`` of ``Module.sow``/``Module.perturb`` (flax's
``nnx_sow_capture_noop`` config flag).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from ._tree_mode import TreeChecked, check_call_args

F = TypeVar("F", bound=Callable[..., Any])

_VALUES: dict[str, bool] = {"graph": True, "graph_updates": True, "sow_capture_noop": False}


class _Setting:
  """Sets a default now; as a context manager or decorator, restores it after."""

  _name = ""

  def __init__(self, value: bool, /):
    if not isinstance(value, bool):
      raise TypeError(f"{type(self).__name__} expects a bool, got {value!r}.")
    self._previous = _VALUES[self._name]
    self._value = value
    _VALUES[self._name] = value

  def __enter__(self):
    return self

  def __exit__(self, *exc) -> None:
    _VALUES[self._name] = self._previous

  def __call__(self, fn: F) -> F:
    _VALUES[self._name] = self._previous
    name, value = self._name, self._value

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      previous = _VALUES[name]
      _VALUES[name] = value
      try:
        return fn(*args, **kwargs)
      finally:
        _VALUES[name] = previous

    return wrapper  # type: ignore[return-value]

  @classmethod
  def current_value(cls) -> bool:
    """The default in force now."""
    return _VALUES[cls._name]


class set_graph_mode(_Setting):
  """Sets the default of ``graph=`` (True: graph mode, False: tree mode).

  Call it to change the default, use it as a context manager to change it for
  a block, or as a decorator to change it while a function runs.

  Raises:
    TypeError: if ``value`` is not a bool.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.set_graph_mode(False):
    ...   nnx.set_graph_mode.current_value()
    False
    >>> nnx.set_graph_mode.current_value()
    True
  """

  _name = "graph"


class set_graph_updates(_Setting):
  """Sets the default of ``graph_updates=`` for lifted transforms.

  Raises:
    TypeError: if ``value`` is not a bool.

  Example:
    >>> import nnx_eqx as nnx
    >>> @nnx.set_graph_updates(False)
    ... def f():
    ...   return nnx.set_graph_updates.current_value()
    >>> f(), nnx.set_graph_updates.current_value()
    (False, True)
  """

  _name = "graph_updates"


class set_sow_capture_noop(_Setting):
  """Sets the default of ``capture_noop=`` of ``Module.sow`` and ``Module.perturb``.

  With True, ``sow`` and ``perturb`` outside :func:`nnx.capture` do nothing
  (``perturb`` returns its value unchanged) instead of storing a Variable on
  the module. The default is False. This is flax.nnx 0.12.12's
  ``flax.config.update('nnx_sow_capture_noop', ...)``; like
  :class:`set_graph_mode` it works as a call, a context manager or a decorator.

  Raises:
    TypeError: if ``value`` is not a bool.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> with nnx.set_sow_capture_noop(True):
    ...   m.sow(nnx.Intermediate, "y", jnp.ones(2))
    >>> hasattr(m, "y"), nnx.set_sow_capture_noop.current_value()
    (False, False)
  """

  _name = "sow_capture_noop"


def get_graph_mode() -> bool:
  """The current default of ``graph=``.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.get_graph_mode()
    True
  """
  return _VALUES["graph"]


def resolve(graph: bool | None, graph_updates: bool | None = None) -> tuple[bool, bool]:
  """Fills unset ``graph``/``graph_updates`` keywords from the defaults."""
  return (
    _VALUES["graph"] if graph is None else graph,
    _VALUES["graph_updates"] if graph_updates is None else graph_updates,
  )


def accepts_graph_keywords(fn: F, tree_check: str | None = None) -> F:
  """Wraps a function so it accepts ``graph=``/``graph_updates=``.

  A function with both parameters of its own is returned as is; one with a
  ``graph`` parameter of its own (the graph API: ``split``,
  ``state``, ``clone``, ...) receives the resolved mode, so that tree mode can
  reject shared references; for the others (lifted transforms) the keywords
  are accepted: nnx_eqx keeps sharing in every mode, so they do not change the
  result for graphs without shared references, and in tree mode the graph
  nodes among the arguments may not share objects (flax.nnx's "Duplicate
  Param"): ``tree_check="callable"`` checks the arguments of each call of the
  transformed function ``fn`` returns (and ``fn``'s own arguments after the
  first, as ``jit_partial``'s) and that it returns no input Variable;
  ``"carry"`` does the same but lets the outputs be inputs (a scan returns
  its carry); ``"call"`` checks ``fn``'s arguments (a transform that runs at
  once, as ``cond``).

  A function with a ``graph_updates`` parameter but none named ``graph``
  (``jit``, ``eval_shape``) receives ``graph and graph_updates`` resolved, the
  tree-mode checks above applying as for the others.
  """
  params = inspect.signature(fn).parameters
  if "graph_updates" in params and "graph" in params:  # it resolves both keywords itself
    return fn
  # A transform with a ``graph_updates`` parameter alone receives it resolved:
  # graph updates happen in graph mode only.
  takes_updates = "graph_updates" in params
  if "graph" in params:

    @functools.wraps(fn)
    def graph_wrapper(*args, graph: bool | None = None, graph_updates: bool | None = None, **kw):
      return fn(*args, graph=_VALUES["graph"] if graph is None else graph, **kw)

    graph_wrapper.__signature__ = _with_graph_keywords(fn)  # type: ignore[attr-defined]
    return graph_wrapper  # type: ignore[return-value]
  first = next(iter(params), None)
  name = fn.__name__

  @functools.wraps(fn)
  def wrapper(*args, graph: bool | None = None, graph_updates: bool | None = None, **kwargs):
    graph_on = _VALUES["graph"] if graph is None else graph
    tree = tree_check is not None and not graph_on
    if tree and tree_check == "call":
      check_call_args(args, kwargs, name)
    if takes_updates:
      kwargs["graph_updates"] = graph_on and (
        _VALUES["graph_updates"] if graph_updates is None else graph_updates
      )
    out = fn(*args, **kwargs)
    if not tree or tree_check == "call":
      return out
    outputs = tree_check == "callable"
    if not args and first not in kwargs:  # a decorator: check what it makes
      return lambda f: _tree_checked(out(f), name, (), outputs)
    return _tree_checked(out, name, args[1:], outputs)

  wrapper.__signature__ = _with_graph_keywords(fn)  # type: ignore[attr-defined]
  return wrapper  # type: ignore[return-value]


def _with_graph_keywords(fn: Callable) -> inspect.Signature:
  """``fn``'s signature with the keyword-only ``graph=None``/``graph_updates=None``
  the wrappers above take, so ``inspect.signature`` and ``help`` show them."""
  sig = inspect.signature(fn)
  params = [p for p in sig.parameters.values() if p.name not in ("graph", "graph_updates")]
  extra = [
    inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation="bool | None")
    for n in ("graph", "graph_updates")
  ]
  at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
  return sig.replace(parameters=params[:at] + extra + params[at:])


def _tree_checked(transformed: Any, name: str, bound_args: tuple, outputs: bool) -> Any:
  """Tree mode for a lifted transform: the node arguments (bound ones, as
  ``jit_partial``'s, now; call arguments at each call) may not share objects."""
  check_call_args(bound_args, {}, name)
  return TreeChecked(transformed, name, outputs)

"""Module: the base class of every layer and model.

Modules are ordinary mutable Python classes. Attributes holding Variables,
arrays, Modules, or lists/tuples/dicts of them are graph *nodes*; everything
else is *static* and lives in the GraphDef. Modules may share submodules and
Variables and may form cycles. Every Module subclass is a JAX pytree whose
leaves are its distinct Variable values (shared ones once), so ``jax.jit``,
``eqx.filter_jit`` and ``jax.tree.map`` accept Modules directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from ..graph._errors import NnxError, UnknownAttributeError, type_names
from ..graph.api import _functional as _graph
from ..graph.pytree._flags import INFERENCE
from ..graph.state._filters import Filter, to_predicate
from ..graph.state._state import State
from ..graph.variables._variables import Intermediate, Perturbation, Variable
from ..graph.walk._graph_mode import get_graph_mode, set_sow_capture_noop
from ..graph.walk._tree_mode import check_pytree_classes
from ._capture_slots import CAPTURES, capture_slot
from ._pytree import PYTREE_IMPL, Pytree

M = TypeVar("M", bound="Module")
_MISSING = object()

SEED_HOOKS: dict[str, Callable[..., Any]] = {}
"""``"pure"``: the seed-era ``nnx.Pure`` that ``partition`` returns. It lives in
``nnx_eqx.legacy``, which builds on this layer and registers it here."""


class SowError(NnxError, ValueError):
  """``Module.sow`` found an attribute that is not a Variable of the requested type."""


class Module(Pytree):
  """Base class for all neural network layers and models (as flax.nnx.Module).

  Subclasses set attributes in ``__init__``; no ``super().__init__()`` call is
  needed. Use the functional API (``nnx.split``/``nnx.merge``) or the lifted
  transforms (``nnx.jit``, ``nnx.grad``) to cross JAX transforms.

  Raises:
    TraceContextError: when an attribute is set from a JAX trace other than
      the one the Module was created in.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> class Count(nnx.Variable): pass
    >>> class Linear(nnx.Module):
    ...   def __init__(self, din, dout, *, rngs):
    ...     self.w = nnx.Param(jax.random.uniform(rngs.params(), (din, dout)))
    ...     self.b = nnx.Param(jnp.zeros((dout,)))
    ...     self.count = Count(jnp.array(0))
    ...   def __call__(self, x):
    ...     self.count += 1
    ...     return x @ self.w + self.b
    >>> model = Linear(2, 3, rngs=nnx.Rngs(0))
    >>> model(jnp.ones((1, 2))).shape, int(model.count.value)
    ((1, 3), 1)
  """

  _nnx_containerize = True
  _nnx_container = False  # nnx.List / nnx.Dict: plain containers, not layers
  # Equinox's flag over the mode attributes (``deterministic``, ``use_running_average``,
  # ``inference``); it is what ``eqx.nn.inference_mode`` sets (see ``_pytree_flags``).
  inference = INFERENCE

  def clone(self: M) -> M:
    """A deep copy with the same sharing."""
    return _graph.clone(self)

  def sow(
    self,
    variable_type: type[Variable],
    name: str,
    value: Any,
    reduce_fn: Callable[[Any, Any], Any] = lambda acc, x: acc + (x,),
    init_fn: Callable[[], Any] = tuple,
    capture_noop: bool | None = None,
  ) -> None:
    """Stores ``value`` in attribute ``name`` as a ``variable_type`` Variable.

    The first call stores ``reduce_fn(init_fn(), value)`` (by default a 1-tuple);
    later calls reduce into it. Retrieve with ``nnx.pop(m, nnx.Intermediate)``.
    Inside :func:`nnx.capture` the value goes to the capture of
    ``variable_type`` instead (and nowhere when that type is not captured).
    With ``capture_noop=True`` a call outside :func:`nnx.capture` does nothing;
    ``None`` takes the default of :class:`nnx.set_sow_capture_noop` (False), as
    flax.nnx 0.12.12's ``nnx_sow_capture_noop`` flag.

    Raises:
      SowError: (a ``ValueError``) if ``name`` holds something that is not a
        ``variable_type`` Variable.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
      >>> m.sow(nnx.Intermediate, "y", jnp.ones(2)); m.sow(nnx.Intermediate, "y", jnp.ones(2))
      >>> len(m.y.value)
      2
    """
    slot = capture_slot(self, variable_type)
    if slot is not None or CAPTURES in self.__dict__:  # inside nnx.capture
      if slot is not None:
        held = slot.value
        slot.value = {**held, name: reduce_fn(held[name] if name in held else init_fn(), value)}
      return
    if set_sow_capture_noop.current_value() if capture_noop is None else capture_noop:
      return
    current = self.__dict__.get(name, _MISSING)
    if current is _MISSING:
      setattr(self, name, variable_type(reduce_fn(init_fn(), value)))
    elif isinstance(current, variable_type):
      current.value = reduce_fn(current.value, value)
    else:
      want, got = type_names(variable_type, type(current))
      expected = (
        f"to be of type {want}, got {got}"
        if isinstance(current, Variable)
        else f"to be a Variable, got {got}"
      )
      raise SowError(
        f"sow: expected attribute {name!r} of {type(self).__name__} {expected}. Fix: sow"
        " under another name or delete the attribute first."
      )

  def perturb(
    self,
    name: str,
    value: Any,
    variable_type: type[Variable] = Perturbation,
    capture_noop: bool | None = None,
  ) -> Any:
    """Returns ``value`` plus a perturbation stored under ``name`` (zeros at first).

    Differentiating a loss with respect to the perturbations (captured with
    :func:`nnx.capture`, then passed back as its ``init=``) gives the gradient
    of the loss with respect to the intermediate ``value`` (as flax.nnx). Use
    the returned value, not ``value``, afterwards.

    Args:
      name: the key of the perturbation.
      value: an array or pytree of arrays.
      variable_type: the Variable type that holds it (``nnx.Perturbation``).
      capture_noop: True: outside :func:`nnx.capture`, return ``value``
        unchanged and store nothing; ``None``: the default of
        :class:`nnx.set_sow_capture_noop` (False), as flax.nnx 0.12.12.

    Raises:
      SowError: outside nnx.capture, if ``name`` holds a non-``variable_type``.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> class M(nnx.Module):
      ...   def __call__(self, x):
      ...     return 3 * self.perturb("x", x)
      >>> _, perturbations = nnx.capture(M(), nnx.Perturbation)(jnp.ones(2))
      >>> perturbations["x"].value.tolist()
      [0.0, 0.0]
    """
    slot = capture_slot(self, variable_type)
    if slot is not None:
      held = slot.value
      if name not in held:
        slot.value = held = {**held, name: jax.tree.map(jnp.zeros_like, value)}
      return jax.tree.map(jnp.add, held[name], value)
    if CAPTURES in self.__dict__:  # captured, but not this type: no perturbation
      return value
    if set_sow_capture_noop.current_value() if capture_noop is None else capture_noop:
      return value
    current = self.__dict__.get(name, _MISSING)
    if current is _MISSING:
      setattr(self, name, variable_type(jax.tree.map(jnp.zeros_like, value)))
      current = self.__dict__[name]
    elif not isinstance(current, variable_type):
      want, got = type_names(variable_type, type(current))
      raise SowError(
        f"perturb: expected attribute {name!r} of {type(self).__name__} to be a"
        f" {want}, got {got}. Fix: perturb under"
        " another name."
      )
    return jax.tree.map(jnp.add, current.value, value)

  def modules(self) -> Iterator[tuple[tuple, Module]]:
    """Yields ``(path, module)`` for this module and every submodule."""
    return _graph.iter_modules(self)

  iter_modules = modules

  def iter_children(self) -> Iterator[tuple[str, Module]]:
    """Yields ``(name, module)`` for the direct submodules (see :func:`iter_children`)."""
    return iter_children(self)

  # -- flags ----------------------------------------------------------------
  def set_attributes(
    self,
    *filters: Filter,
    raise_if_not_found: bool = True,
    graph: bool | None = None,
    **attributes: Any,
  ) -> None:
    """Sets ``attributes`` on every submodule that already has them.

    Args:
      *filters: only modules matching these filters (types, predicates) are
        changed; none means all.
      raise_if_not_found: raise if some attribute exists on no module.
      graph: accepted for flax compatibility (graph and tree mode agree here).
      **attributes: e.g. ``deterministic=True``.

    Raises:
      UnknownAttributeError: (an ``AttributeError`` and ``ValueError``) if
        ``raise_if_not_found`` and an attribute name is not an attribute of any
        selected module (the name is given).

    Example:
      >>> import nnx_eqx as nnx
      >>> d = nnx.Dropout(0.5)
      >>> d.set_attributes(deterministic=True)
      >>> d.deterministic
      True
    """
    del graph
    preds = [to_predicate(f) for f in filters]
    found: set[str] = set()
    for path, m in _graph.iter_modules(self):
      if preds and not any(p(path, m) for p in preds):
        continue
      for k, v in attributes.items():
        if k in m.__dict__:
          setattr(m, k, v)
          found.add(k)
    missing = set(attributes) - found
    if raise_if_not_found and missing:
      raise UnknownAttributeError(
        "set_attributes: Could not find at least one instance of the following"
        f" attributes: {sorted(missing)} (no module has the attribute(s) {sorted(missing)})."
        " Fix: check the spelling, or pass raise_if_not_found=False."
      )

  def train(self, **attributes: Any) -> None:
    """Training mode: ``deterministic=False``, ``use_running_average=False``.

    Modules converted from Equinox that keep Equinox's ``inference`` flag
    (e.g. ``eqx.nn.SpectralNorm``) get ``inference=False``.
    """
    flags = {"deterministic": False, "use_running_average": False, "inference": False}
    self.set_attributes(raise_if_not_found=False, **{**flags, **attributes})

  def eval(self, **attributes: Any) -> None:
    """Evaluation mode: ``deterministic=True``, ``use_running_average=True``.

    Modules converted from Equinox that keep Equinox's ``inference`` flag
    (e.g. ``eqx.nn.SpectralNorm``) get ``inference=True``, as
    ``eqx.nn.inference_mode`` would give them.
    """
    flags = {"deterministic": True, "use_running_average": True, "inference": True}
    self.set_attributes(raise_if_not_found=False, **{**flags, **attributes})

  # -- seed-era API (after flax.nnx's, as the reference lists them) -------
  def partition(self, *filters: Filter):
    """Seed-era split: ``state, moduledef = m.partition()`` or
    ``(params, rest), moduledef = m.partition(nnx.Param, ...)``.

    Raises:
      FilterError: if the filters do not cover every leaf.

    Example:
      >>> import nnx_eqx as nnx
      >>> (params, rest), moduledef = nnx.Linear(2, 3, rngs=nnx.Rngs(0)).partition(nnx.Param, ...)
      >>> sorted(params)
      ['bias', 'kernel']
    """
    graphdef, *states = _graph.split_as(self, filters, snapshot=True)
    return SEED_HOOKS["pure"](states[0] if len(states) == 1 else tuple(states), graphdef.as_seed())

  def get_state(self) -> State:
    """A snapshot State of every leaf (seed-era ``nnx.state(m)``, new Variable objects)."""
    return _graph.state_as(self, (), snapshot=True)

  def get_moduledef(self):
    """The seed-era moduledef: ``nnx.graphdef(m)`` whose ``apply`` keeps the seeds'
    ``(out, (state, moduledef))`` order."""
    return _graph.graphdef(self).as_seed()

  def filter(self, first: Filter, /, *filters: Filter):
    """Filtered snapshot State(s), non-exhaustive (seed-era ``nnx.state(m, *f)``)."""
    return _graph.state_as(self, (first, *filters), snapshot=True)

  def update_state(self, *states: State) -> None:
    """Writes States into this module in place (seed-era ``nnx.update``)."""
    _graph.update(self, *states)

  def pop_state(self, first: Filter, /, *filters: Filter):
    """Removes and returns the matching leaves (seed-era ``nnx.pop``)."""
    return _graph.pop(self, first, *filters)

  def for_each(self, module_type: type, fn: Callable[[Module], Any]) -> None:
    """Calls ``fn`` on every submodule (self included) that is a ``module_type``."""
    for _, m in _graph.iter_modules(self):
      if isinstance(m, module_type):
        fn(m)  # type: ignore[arg-type]


MODULE_IMPL = PYTREE_IMPL


def iter_children(node: Any, /, *, graph: bool | None = None) -> Iterator[tuple[str, Module]]:
  """Yields ``(name, module)`` for each attribute of ``node`` holding a Module, by name.

  Containers (``nnx.List``/``nnx.Dict``) are not children themselves: the
  Modules inside them are reached with ``nnx.iter_modules``.

  Args:
    node: a Module.
    graph: False (tree mode) refuses a node whose class is declared
      ``pytree=False``; otherwise the modes agree.

  Raises:
    AttributeError: if ``node`` has no ``__dict__``.
    GraphModeRequiredError: in tree mode, for a ``pytree=False`` node.

  Example:
    >>> import nnx_eqx as nnx
    >>> class Block(nnx.Module):
    ...   def __init__(self):
    ...     self.lin = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
    ...     self.drop = nnx.Dropout(0.5)
    >>> [name for name, _ in nnx.iter_children(Block())]
    ['drop', 'lin']
  """
  if graph is False or (graph is None and not get_graph_mode()):
    check_pytree_classes([node], [()], "iter_children")
  d = node.__dict__
  for k in sorted(d):
    v = d[k]
    if not k.startswith("_nnx_") and isinstance(v, Module) and not v._nnx_container:
      yield k, v


def iter_module_children(
  node: Any, /, *, graph: bool | None = None
) -> Iterator[tuple[Any, Module]]:
  """Yields ``(key, module)`` for each direct child of ``node`` that is a Module,
  containers (``nnx.List``, ``nnx.Sequential``) included, as flax.nnx does.

  Args:
    node: a graph node (Module, ``nnx.List``, ...).
    graph: False (tree mode) refuses a node whose class is declared ``pytree=False``.

  Returns:
    An iterator of ``(key, module)``, keys sorted (attribute names, or list indices).

  Raises:
    GraphModeRequiredError: in tree mode, for a ``pytree=False`` node.

  Example:
    >>> import nnx_eqx as nnx
    >>> seq = nnx.Sequential(nnx.Linear(1, 2, rngs=nnx.Rngs(0)), nnx.Dropout(0.5))
    >>> [(k, type(m).__name__) for k, m in nnx.iter_module_children(seq)]
    [('layers', 'List')]
    >>> [(k, type(m).__name__) for k, m in nnx.iter_module_children(seq.layers)]
    [(0, 'Linear'), (1, 'Dropout')]
  """
  if graph is False or (graph is None and not get_graph_mode()):
    check_pytree_classes([node], [()], "iter_module_children")
  for path, child in _graph.iter_graph(node):
    if len(path) == 1 and isinstance(child, Module):
      yield path[0], child


def first_from(*args: Any, error_msg: str) -> Any:
  """The first argument that is not None (as flax.nnx.module.first_from).

  Args:
    *args: candidate values, in order of precedence.
    error_msg: the message of the error raised when all are None.

  Returns:
    The first non-None argument.

  Raises:
    ValueError: with ``error_msg``, if every argument is None.

  Example:
    >>> from nnx_eqx.module import first_from
    >>> first_from(None, 0.5, 0.1, error_msg="no rate")
    0.5
  """
  for arg in args:
    if arg is not None:
      return arg
  raise ValueError(error_msg)


__all__ = ["Module", "Intermediate"]

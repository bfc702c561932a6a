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

from ..graph import _graph, _node_types, _version
from ..graph._errors import NnxError, UnknownAttributeError
from ..graph._filters import Filter, to_predicate
from ..graph._graph import NodeImpl, is_node
from ..graph._repr import module_repr, treescope_module
from ..graph._state import State
from ..graph._tracing import check_trace, current_trace
from ..graph._variables import Intermediate, Variable

M = TypeVar("M", bound="Module")
_MISSING = object()

CONTAINERS: dict[type, Callable[[Any], Any]] = {}
"""``{list: nnx.List, dict: nnx.Dict}``: the container Modules that plain lists and
dicts of nodes become. ``_containers`` subclasses Module, so it registers them here."""

SEED_HOOKS: dict[str, Callable[..., Any]] = {}
"""``"pure"``: the seed-era ``nnx.Pure`` that ``partition`` returns. It lives in
``nnx_eqx.legacy``, which builds on this layer and registers it here."""


def _is_array(x) -> bool:
  return isinstance(x, _node_types.LEAF_TYPES)  # read at call time: leaf types can be registered


def _contains_node(x) -> bool:
  if is_node(x) or _is_array(x):
    return True
  if isinstance(x, (list, tuple)):
    return any(_contains_node(e) for e in x)
  if isinstance(x, dict):
    return any(_contains_node(e) for e in x.values())
  return False


def _containerize(value):
  """Lists/dicts that hold nodes become nnx.List/nnx.Dict, so that mutating them
  is seen as a structural change (keeping graph caches correct)."""
  wrap = CONTAINERS.get(type(value))
  if wrap is not None and _contains_node(value):
    return wrap(value)
  return value


class Module:
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

  def __new__(cls, *args, **kwargs):
    obj = object.__new__(cls)
    obj.__dict__["_nnx_trace"] = current_trace()
    return obj

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    _graph.register_pytree(cls)

  def __setattr__(self, name: str, value: Any) -> None:
    d = self.__dict__
    if name.startswith("_nnx_"):
      d[name] = value
      return
    check_trace(d["_nnx_trace"], f"attribute {name!r} of {type(self).__name__}")
    value = _containerize(value)
    if d.get("_nnx_in_graph"):
      old = d.get(name, _MISSING)
      if old is not value and not (_is_array(old) and _is_array(value)):
        _version.bump()
    object.__setattr__(self, name, value)

  def __delattr__(self, name: str) -> None:
    d = self.__dict__
    check_trace(d["_nnx_trace"], f"attribute {name!r} of {type(self).__name__}")
    if d.get("_nnx_in_graph"):
      _version.bump()
    object.__delattr__(self, name)

  def __repr__(self) -> str:
    return module_repr(self)

  def __treescope_repr__(self, path, subtree_renderer):
    return treescope_module(self, path, subtree_renderer)

  # -- seed-era API ---------------------------------------------------------
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
    graphdef, *states = _graph.split(self, *filters)
    return SEED_HOOKS["pure"](states[0] if len(states) == 1 else tuple(states), graphdef)

  def get_state(self) -> State:
    """The State of every leaf (seed-era name of ``nnx.state(m)``)."""
    return _graph.state(self)

  def get_moduledef(self):
    """The GraphDef (seed-era name of ``nnx.graphdef(m)``)."""
    return _graph.graphdef(self)

  def filter(self, first: Filter, /, *filters: Filter):
    """Filtered State(s), non-exhaustive (seed-era name of ``nnx.state(m, *f)``)."""
    return _graph.state(self, first, *filters)

  def update_state(self, *states: State) -> None:
    """Writes States into this module in place (seed-era ``nnx.update``)."""
    _graph.update(self, *states)

  def pop_state(self, first: Filter, /, *filters: Filter):
    """Removes and returns the matching leaves (seed-era ``nnx.pop``)."""
    return _graph.pop(self, first, *filters)

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
  ) -> None:
    """Stores ``value`` in attribute ``name`` as a ``variable_type`` Variable.

    The first call stores ``reduce_fn(init_fn(), value)`` (by default a 1-tuple);
    later calls reduce into it. Retrieve with ``nnx.pop(m, nnx.Intermediate)``.

    Raises:
      NnxError: if ``name`` holds something that is not a ``variable_type``.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
      >>> m.sow(nnx.Intermediate, "y", jnp.ones(2)); m.sow(nnx.Intermediate, "y", jnp.ones(2))
      >>> len(m.y.value)
      2
    """
    current = self.__dict__.get(name, _MISSING)
    if current is _MISSING:
      setattr(self, name, variable_type(reduce_fn(init_fn(), value)))
    elif isinstance(current, variable_type):
      current.value = reduce_fn(current.value, value)
    else:
      raise NnxError(
        f"sow: attribute {name!r} of {type(self).__name__} holds a"
        f" {type(current).__name__}, expected a {variable_type.__name__}. Fix: sow"
        " under another name or delete the attribute first."
      )

  def for_each(self, module_type: type, fn: Callable[[Module], Any]) -> None:
    """Calls ``fn`` on every submodule (self included) that is a ``module_type``."""
    for _, m in _graph.iter_modules(self):
      if isinstance(m, module_type):
        fn(m)  # type: ignore[arg-type]

  def modules(self) -> Iterator[tuple[tuple, Module]]:
    """Yields ``(path, module)`` for this module and every submodule."""
    return _graph.iter_modules(self)

  iter_modules = modules

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


def _module_children(obj) -> list:
  d = obj.__dict__
  return [(k, d[k]) for k in sorted(d) if not k.startswith("_nnx_")]


def _module_create(cls, meta, trace):
  obj = object.__new__(cls)
  obj.__dict__["_nnx_trace"] = trace
  return obj


def _module_set_children(obj, items) -> None:
  obj.__dict__.update(items)


def _module_set_key(obj, key, value) -> None:
  obj.__dict__[key] = value


def _module_clear(obj) -> None:
  d = obj.__dict__
  for k in [k for k in d if not k.startswith("_nnx_")]:
    del d[k]


MODULE_IMPL = NodeImpl(
  children=_module_children,
  create=_module_create,
  set_children=_module_set_children,
  metadata=lambda obj: None,
  set_key=_module_set_key,
  clear=_module_clear,
)
_graph._MODULE_IMPL_HOLDER[0] = MODULE_IMPL
_graph.register_graph_node_type(Module, MODULE_IMPL)
_graph.register_pytree(Module)

__all__ = ["Module", "Intermediate"]

"""``nnx.from_flax``: a live flax.nnx object as an nnx_eqx one."""

from __future__ import annotations

from typing import Any

from ...graph import State, Variable
from ...module import Dict, List, Module, Rngs
from .._errors import FlaxConversionError
from . import _tree
from ._counterparts import from_flax_counterpart
from ._flax_module import FLAGS, FlaxModule, nnx_leaf, reserved
from ._import import describe, flax_nnx, flax_side, is_flax_object, is_linen
from ._types import to_nnx_variable


def _from_module(obj: Any) -> FlaxModule:
  fnnx = flax_nnx()
  graphdef, st = fnnx.split(obj)
  kids = _tree.children(_tree.nest(fnnx.to_flat_state(st)), reserved, nnx_leaf, Dict, List)
  return FlaxModule(graphdef, type(obj), kids, _flags_of(fnnx, obj, graphdef))


def _flags_of(fnnx: Any, obj: Any, graphdef: Any) -> tuple[str, ...]:
  """The mode flags some Module of ``obj`` has (see ``FLAGS``)."""
  attributes = getattr(graphdef, "attributes", None)  # flax 0.12: [(name, attr), ...]
  if isinstance(attributes, list) and attributes:  # (empty from a tree-mode split)
    names = {a[0] for a in attributes if isinstance(a, tuple) and a}
  else:  # another layout of flax's GraphDef: look at the Modules themselves
    names = {k for _, m in fnnx.iter_modules(obj) for k in vars(m)}
  return tuple(k for k in FLAGS if k in names)


def _from_rngs(obj: Any) -> Rngs:
  fnnx = flax_nnx()
  streams: dict = {}
  for p, v in fnnx.to_flat_state(fnnx.state(obj)):
    streams.setdefault(p[0], {})[p[-1]] = v.get_value()
  rngs = Rngs(**{name: s["key"] for name, s in streams.items()})
  for name, s in streams.items():
    getattr(rngs, name).count.value = s["count"]
  return rngs


def _variables(x: Any) -> list:
  fnnx = flax_nnx()
  if not fnnx.graph.is_graph_node(x):
    return []
  return [v for _, v in fnnx.to_flat_state(fnnx.state(x))]


def _element(x: Any) -> Any:
  fnnx = flax_nnx()
  return from_flax(x) if fnnx.graph.is_graph_node(x) or isinstance(x, fnnx.Variable) else x


def from_flax(obj: Any) -> Any:
  """Converts a live flax.nnx object into the nnx_eqx object that runs its program.

  * A flax ``Module`` (any class: nested Modules, ``nnx.List``/``nnx.Dict``, shared
    references, ``BatchNorm``, ``Dropout``, ``Rngs`` inside) becomes a
    :class:`FlaxModule`: nnx_eqx's state of it is the flax state, path for path, in
    Variables of the paired types with the same metadata, and calling it runs flax's
    own code on those values. This wrapping, rather than a rebuild from nnx_eqx
    layers, is the design because it keeps two things a rebuild cannot: a method
    that uses flax's transforms itself (``flax.nnx.scan`` over stacked layers in
    ``__call__``) gets flax objects as it expects, and every result is bitwise
    flax's, since the same flax code traces the same program. Sharing lives in the
    flax ``GraphDef``: a tied weight is one Variable (at flax's first path), used
    wherever flax uses it, so its gradient sums every use. State updates (batch
    statistics, RNG counts) are written back as in flax, also under ``nnx.jit``,
    ``nnx.grad`` and the other nnx_eqx transforms.
  * A flax ``Rngs`` becomes an ``nnx.Rngs`` with the same keys and counts (it draws
    the same keys).
  * A root flax ``nnx.List`` becomes an ``nnx.List`` of its elements, each converted
    (they must share no Variable; a Module holding the list has no such limit).
  * A flax ``State`` becomes an ``nnx.State`` with the same paths; a flax
    ``Variable`` an nnx_eqx Variable. Types pair by name (``flax.nnx.Param`` ->
    ``nnx.Param``, ``BatchStat``, ``Cache``, ``RngKey``, ...); a user subclass gets
    an nnx_eqx subclass of the same name, and :func:`to_flax` gives the flax class back.
  * A Module made by :func:`to_flax` gives back the nnx_eqx module it holds.
  * A flax ``Optimizer`` becomes an ``nnx.Optimizer`` with the same ``tx``, step and
    optax state (the same arrays, at the model's paths), so ``opt.update(m, grads)``
    with ``m = nnx.from_flax(flax_model)`` resumes training where flax left it,
    bitwise; flax's ``Average``, ``Welford``, ``Accuracy`` and ``MultiMetric`` become
    nnx_eqx's, with their state.

  The result holds new Variables over the flax object's arrays (of any shape and
  dtype; nothing is copied): training it leaves the flax object as it was, and
  :func:`to_flax` of it gives the trained flax Module.

  Args:
    obj: a flax.nnx ``Module`` (or other flax graph node, e.g. an ``Optimizer``),
      ``Rngs``, ``State`` or ``Variable``.

  Returns:
    A :class:`FlaxModule`, an ``nnx.Rngs``, an ``nnx.State``, an nnx_eqx Variable, an
    ``nnx.Optimizer`` or metric, or (for a :func:`to_flax` Module) the nnx_eqx module
    it holds.

  Raises:
    FlaxConversionError: ``obj`` is a flax Linen module (use flax's own
      ``flax.nnx.bridge``), an object of another library, a flax object whose state
      cannot be held, a root list whose elements share a Variable, or an optimizer
      whose ``wrt`` filter has no nnx_eqx counterpart (the path and the reason are
      named).
    FlaxNotInstalledError: flax is not installed (an ``ImportError`` naming
      ``pip install 'nnx_eqx[flax]'``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> f = flax_nnx.Linear(3, 2, rngs=flax_nnx.Rngs(0))
    >>> m = nnx.from_flax(f)
    >>> type(m).__name__, sorted(nnx.state(m, nnx.Param))
    ('FlaxModule', ['bias', 'kernel'])
    >>> bool((m(jnp.ones(3)) == f(jnp.ones(3))).all())
    True
  """
  if is_linen(obj):
    raise FlaxConversionError(
      f"nnx.from_flax converts flax.nnx objects; got the Linen module {describe(obj)}."
      " Fix: make it a flax.nnx Module with flax's own Linen bridge first"
      " (`flax.nnx.bridge.ToNNX(linen_module, rngs=...)` then"
      " `flax.nnx.bridge.lazy_init(...)`), and convert that."
    )
  if not is_flax_object(obj):
    if isinstance(obj, (Module, State, Variable)):
      raise FlaxConversionError(
        f"nnx.from_flax expects a flax.nnx object, got the nnx_eqx {describe(obj)}, which"
        " needs no conversion. Fix: use it as it is (nnx.to_flax makes a flax.nnx Module)."
      )
    raise FlaxConversionError(
      f"nnx.from_flax expects a flax.nnx Module, Rngs, State or Variable, got"
      f" {describe(obj)}. Fix: pass the flax.nnx model (for Equinox models, nnx.from_eqx)."
    )
  fnnx = flax_nnx()
  if isinstance(obj, flax_side().NnxEqxModule):
    return obj.to_nnx()
  if isinstance(obj, fnnx.Variable):
    return to_nnx_variable(obj)
  if isinstance(obj, fnnx.State):
    return State.from_flat_path([(p, nnx_leaf(p, v)) for p, v in fnnx.to_flat_state(obj)])
  if isinstance(obj, fnnx.Rngs):
    return _from_rngs(obj)
  if type(obj) is fnnx.List:  # integer keys cannot be a FlaxModule's attributes
    return List(_tree.each(list(obj), _element, _variables))
  native = from_flax_counterpart(obj, from_flax)  # an Optimizer or metric: nnx_eqx's own class
  if native is not None:
    return native
  if fnnx.graph.is_graph_node(obj):
    return _from_module(obj)
  raise FlaxConversionError(
    f"nnx.from_flax cannot convert {describe(obj)} at root: it is neither a flax.nnx"
    " Module (graph node), Rngs, State nor Variable. Fix: pass the Module that holds it."
  )

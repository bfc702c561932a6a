"""``Optimizer``: an optax optimizer whose state lives in the module graph (as flax.nnx 0.11+).

The optax state is built from, and updated with, a State of the selected
parameters' raw values (as flax.nnx), so ``opt_state`` mirrors the model's paths
(``opt.opt_state[0].mu.layers[0]["kernel"]``) and label trees made with
``nnx.map_state`` fit ``optax.partition``. Its array leaves
are stored as ``OptState`` Variables inside the optax containers (tuples,
named tuples, dicts), which the graph engine walks, so ``nnx.split``,
``nnx.merge`` and ``nnx.jit`` carry the optimizer state like any other state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ..graph._errors import StateMismatchError, refuse_other_library
from ..graph.api import _functional as _graph
from ..graph.api._graph_state import GraphState
from ..graph.state._filters import Filter, filter_name
from ..graph.state._state import State
from ..graph.variables._variables import Param, Variable
from ..graph.walk._graph_mode import resolve
from ..module._module import Module


class OptState(Variable):
  """A Variable holding optimizer state (the step counter and optax state leaves).

  Example:
    >>> import jax, optax, nnx_eqx as nnx
    >>> opt = nnx.Optimizer(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), optax.adam(1e-3))
    >>> len(jax.tree.leaves(nnx.state(opt, nnx.OptState)))  # step, count, mu and nu of 2 params
    6
  """


class OptArray(OptState):
  """An optax state leaf that does not correspond to a parameter (e.g. a count).

  Example:
    >>> import optax, nnx_eqx as nnx
    >>> opt = nnx.Optimizer(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), optax.adam(1e-3))
    >>> type(opt.opt_state[0].count).__name__
    'OptArray'
  """


class OptVariable(OptState):
  """An optax state leaf shaped like a parameter (e.g. a moment); it carries a
  copy of that parameter's metadata (e.g. ``sharding``).

  Example:
    >>> import optax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, kernel_metadata={"sharding": (None, "model")}, rngs=nnx.Rngs(0))
    >>> mu = nnx.Optimizer(model, optax.adam(1e-3)).opt_state[0].mu
    >>> type(mu["kernel"]).__name__, mu["kernel"].sharding
    ('OptVariable', (None, 'model'))
  """


def _is_var(x) -> bool:
  return isinstance(x, Variable)


def _value(x) -> Any:
  return x.value if isinstance(x, Variable) else x


def _raw_state(state: State) -> State:
  """``state`` with raw values in place of Variables (the form optax sees)."""
  return State.from_flat_path({p: _value(v) for p, v in state.to_flat_dict().items()})


def _get(tree: Mapping, path: tuple) -> Any:
  for k in path:
    tree = tree[k]
  return tree


def _dict_suffix(keypath) -> tuple:
  """The trailing run of dict keys of a JAX key path, as a plain tuple."""
  out: list = []
  for k in reversed(keypath):
    if not isinstance(k, jax.tree_util.DictKey):
      break
    out.append(k.key)
  return tuple(reversed(out))


def _opt_metadata(md: dict) -> dict:
  """A parameter's metadata for its optimizer state: an ``optimizer_sharding`` entry
  (flax.nnx 0.12) replaces its sharding names, so the state is placed by it."""
  if "optimizer_sharding" not in md:
    return md
  md = {k: v for k, v in md.items() if k != "sharding"}
  md["out_sharding"] = md.pop("optimizer_sharding")
  return md


def _to_opt_state(state: Any, params: Mapping[tuple, Variable]) -> Any:
  """Wraps every array leaf of an optax state in an ``OptState`` Variable."""

  def wrap(keypath, leaf):
    suffix = _dict_suffix(keypath)
    for i in range(len(suffix)):
      p = params.get(suffix[i:])
      if p is not None and jnp.shape(leaf) == p.shape:
        return OptVariable(leaf, **_opt_metadata(p._metadata))
    return OptArray(leaf)

  return jax.tree_util.tree_map_with_path(wrap, state)


def to_opt_state(tree: Any) -> Any:
  """``tree`` with each Variable replaced by an ``OptVariable`` holding its value and
  metadata and each other leaf by an ``OptArray`` (as flax.nnx.training.optimizer).

  Args:
    tree: a pytree, e.g. what ``tx.init(nnx.state(model, nnx.Param))`` returns.

  Returns:
    The same structure with ``OptState`` Variables as leaves.

  Raises:
    TypeError: never.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.training.optimizer import to_opt_state
    >>> out = to_opt_state({"m": nnx.Param(jnp.zeros(2), sharding=("a",)), "count": jnp.zeros(())})
    >>> type(out["m"]).__name__, out["m"].sharding, type(out["count"]).__name__
    ('OptVariable', ('a',), 'OptArray')
  """

  def convert(x: Any) -> Any:
    if _is_var(x):
      return OptVariable(x.value, **x._metadata)
    return OptArray(x)

  return jax.tree.map(convert, tree, is_leaf=_is_var)


def _flat_grads(grads: Any) -> dict:
  if _graph.is_node(grads):  # gradients as a copy of the model (tree-mode nnx.grad)
    grads = _graph.state(grads)
  if isinstance(grads, GraphState):
    grads = grads._state
  if isinstance(grads, State):
    return grads.to_flat_dict()
  if isinstance(grads, Mapping):
    return State(grads).to_flat_dict()
  raise StateMismatchError(
    f"Optimizer.update: grads must be a State (from nnx.grad), a Module of gradients or a"
    f" nested dict, got"
    f" {type(grads).__name__}. Fix: pass the gradients returned by"
    " `nnx.grad(loss_fn)(model)`."
  )


def _standard_promotion():
  """optax relies on standard dtype promotion (e.g. ``decay ** count`` with an int
  count); run it so even when a user enabled ``jax_numpy_dtype_promotion='strict'``."""
  return jax.numpy_dtype_promotion("standard")


def _fmt(p) -> str:
  return "/".join(map(str, p))


class Optimizer(Module):
  """An optax optimizer for the ``wrt`` Variables of a model (as flax.nnx.Optimizer).

  Args:
    model: the model whose Variables are optimized.
    tx: an optax ``GradientTransformation`` (or ``...ExtraArgs``).
    wrt: filter selecting the optimized Variables (default ``nnx.Param``; flax.nnx
      0.11+ requires it to be given); it should match the ``wrt`` given to ``nnx.grad``.
    graph: flax.nnx's mode keyword (default from ``nnx.set_graph_mode``). In tree
      mode (``False``) the model may not share Variables between paths, as
      flax.nnx's tree-mode ``nnx.state`` requires; nnx_eqx's optimizer works the
      same way in both modes otherwise.

  Attributes:
    step: ``OptState`` Variable, number of updates applied (uint32).
    opt_state: the optax state; its array leaves are ``OptState`` Variables.
    tx: the transformation; wrt: the filter.

  The optimizer is a Module, so it can be passed to ``nnx.jit`` next to the
  model; the updates to both are written back. optax runs under standard dtype
  promotion (it relies on it), even when ``jax_numpy_dtype_promotion`` is strict.

  ``wrt`` may also select raw ``jax.Array`` attributes (graph leaves that are not
  Variables, as flax.nnx 0.12 allows): their optax state is held in ``OptArray``
  Variables and ``update`` writes their new values back into the model.

  Raises:
    WrongLibraryError: if ``model`` is an ``eqx.Module`` (convert it with
      ``nnx.from_eqx``: an optimizer over it would hold no parameters).
    StateMismatchError: from ``update``, if the gradients lack a selected path.
    SharedReferenceError: in tree mode (``graph=False``), at construction and in
      ``update``, if the model holds one Variable at two paths.

  Example:
    >>> import jax.numpy as jnp, optax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    >>> @nnx.jit
    ... def step(model, opt, x, y):
    ...   loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    ...   opt.update(model, grads)
    ...   return loss
    >>> x, y = jnp.ones((4, 2)), jnp.zeros((4, 1))
    >>> losses = [float(step(model, opt, x, y)) for _ in range(3)]
    >>> losses[2] < losses[0], int(opt.step.value)
    (True, 3)
  """

  opt_state: Any

  def __init__(
    self,
    model: Any,
    tx: optax.GradientTransformation,
    *,
    wrt: Filter = Param,
    graph: bool | None = None,
  ):
    refuse_other_library("nnx.Optimizer", model, arg="model")
    self.graph = graph
    self.step = OptState(jnp.array(0, dtype=jnp.uint32))
    self.tx = tx
    self.wrt = wrt
    self._check_tree_mode(model)
    flat = _graph.variables(model, wrt).to_flat_dict()
    params = State.from_flat_path({p: _value(v) for p, v in flat.items()})
    with _standard_promotion():
      state = tx.init(params)
    # Stored directly and marked as data: a top-level dict must stay a plain dict (not an
    # nnx.Dict) so that its leaves are read and written the same way as those of tuple states.
    variables = {p: v for p, v in flat.items() if _is_var(v)}
    self.__dict__["opt_state"] = _to_opt_state(state, variables)
    self.__dict__["_nnx_marks"] = {**(self.__dict__.get("_nnx_marks") or {}), "opt_state": True}

  def _check_tree_mode(self, model: Any) -> None:
    if not resolve(getattr(self, "graph", None))[0]:
      _graph.state(model, self.wrt, graph=False)  # raises on shared Variables

  def update(self, model: Any, grads: Any, /, **kwargs: Any) -> Any:
    """Applies one optax step to ``model``'s ``wrt`` Variables, in place.

    Computes ``updates, opt_state = tx.update(grads, opt_state, params, **kwargs)``
    and ``params = optax.apply_updates(params, updates)`` on States of raw values,
    writes the new values into the model and the optimizer, and increments ``step``.

    Args:
      model: the model given at construction (or one of the same structure).
      grads: a State (from ``nnx.grad``) or nested dict holding at least the
        ``wrt`` paths of the model; other paths are ignored.
      **kwargs: extra arguments of ``tx.update`` (e.g. ``value``, ``value_fn``
        for ``GradientTransformationExtraArgs``); States are converted to dicts.

    Returns:
      The optax updates shaped like the parameters: a State of arrays when
      ``grads`` is a State, else nested dicts.

    Raises:
      WrongLibraryError: if ``model`` is an ``eqx.Module``.
      StateMismatchError: if ``grads`` lacks a path of the optimized Variables
        (the paths are named), or is not a State or dict.

    Example:
      >>> import jax.numpy as jnp, optax, nnx_eqx as nnx
      >>> model = nnx.Linear(2, 1, use_bias=False, rngs=nnx.Rngs(0))
      >>> opt = nnx.Optimizer(model, optax.sgd(0.5))
      >>> grads = nnx.grad(lambda m: m(jnp.ones((1, 2))).sum())(model)   # d/dkernel = 1
      >>> before = model.kernel.value
      >>> updates = opt.update(model, grads)
      >>> updates["kernel"].tolist(), int(opt.step.value)   # -learning rate * grads
      ([[-0.5], [-0.5]], 1)
      >>> bool((model.kernel.value == before + updates["kernel"]).all())   # applied
      True
    """
    refuse_other_library("Optimizer.update", model, arg="model")
    self._check_tree_mode(model)
    flat = _graph.variables(model, self.wrt).to_flat_dict()
    gflat = _flat_grads(grads)
    missing = [p for p in flat if p not in gflat]
    if missing:
      shown = ", ".join(_fmt(p) for p in missing[:8])
      raise StateMismatchError(
        f"Optimizer.update: grads lack the paths {shown} of the optimized Variables"
        f" (wrt={filter_name(self.wrt)}). Fix: compute the grads with the same filter, e.g."
        " `nnx.grad(loss_fn, wrt=<the optimizer's wrt>)(model)`."
      )
    params = State.from_flat_path({p: _value(v) for p, v in flat.items()})
    g = State.from_flat_path({p: _value(gflat[p]) for p in flat})
    opt_vars, opt_def = jax.tree.flatten(self.opt_state, is_leaf=_is_var)
    opt_pure = jax.tree.unflatten(opt_def, [v.value for v in opt_vars])
    extra = {k: _raw_state(v) if isinstance(v, State) else v for k, v in kwargs.items()}
    with _standard_promotion():
      updates, new_state = self.tx.update(g, opt_pure, params, **extra)
      new_params = optax.apply_updates(params, updates)
    raw = {}
    for p, v in flat.items():
      if _is_var(v):
        v.value = _get(new_params, p)
      else:
        raw[p] = _get(new_params, p)
    if raw:  # raw array leaves (as flax.nnx 0.12 allows) are written back through the graph
      _graph.update(model, State.from_flat_path(raw))
    for v, new in zip(opt_vars, opt_def.flatten_up_to(new_state)):  # type: ignore[attr-defined]
      v.value = new
    self.step.value = self.step.value + 1
    return updates if isinstance(grads, State) else updates.to_pure_dict()


class ModelAndOptimizer(Optimizer):
  """An :class:`Optimizer` that holds its model: ``update(grads)`` steps ``self.model``.

  Args:
    model: the model to optimize.
    tx: an optax transformation.
    wrt: filter of the optimized Variables (default ``nnx.Param``).

  Raises:
    GraphStructureError: if ``wrt`` selects raw arrays.

  Example:
    >>> import jax.numpy as jnp, optax, nnx_eqx as nnx
    >>> state = nnx.ModelAndOptimizer(nnx.Linear(2, 1, rngs=nnx.Rngs(0)), optax.sgd(0.1))
    >>> grads = nnx.grad(lambda m: m(jnp.ones((1, 2))).sum())(state.model)
    >>> _ = state.update(grads); int(state.step.value)
    1
  """

  def __init__(self, model: Any, tx: Any, *, wrt: Filter = Param):
    super().__init__(model, tx, wrt=wrt)
    self.model = model

  def update(self, grads: Any, /, **kwargs: Any) -> Any:  # type: ignore[override]
    """One optax step on ``self.model`` (see :meth:`Optimizer.update`)."""
    return super().update(self.model, grads, **kwargs)

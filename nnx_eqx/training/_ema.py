"""``EMA``: an exponential moving average of a model's Variables, and
``ModelAndOptimizer``, an Optimizer that keeps its model."""

from __future__ import annotations

from typing import Any

import jax

from ..graph import _graph
from ..graph._filters import Filter
from ..graph._variables import Param, Variable
from ..module._containers import Dict
from ..module._module import Module
from ._optimizer import Optimizer


def _nested_dict(flat: dict) -> Dict:
  root: dict = {}
  for path, v in flat.items():
    d = root
    for k in path[:-1]:
      d = d.setdefault(k, {})
    d[path[-1]] = v

  def build(d: dict) -> Dict:
    return Dict({k: build(v) if isinstance(v, dict) else v for k, v in d.items()})

  return build(root)


class EMA(Module):
  """A shadow copy of a model's Variables, moved towards the model on each ``update``:
  ``ema = decay * ema + (1 - decay) * new``.

  ``ema.params`` mirrors the model's paths (``ema.params.kernel``);
  ``ema.apply_to(model)`` returns a copy of the model that uses the EMA's
  Variables, so it follows every later update.

  Args:
    params: the model (any graph node) whose Variables are averaged.
    decay: the decay rate in ``[0, 1]``.
    only: filter selecting the averaged Variables (default: all).
    graph: accepted for flax compatibility.

  Raises:
    StateMismatchError: from ``update`` if the new model lacks a tracked path.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(1, 1, use_bias=False, rngs=nnx.Rngs(0))
    >>> ema = nnx.EMA(model, decay=0.5)
    >>> start = model.kernel.value
    >>> model.kernel.value = start + 2.0
    >>> ema.update(model)
    >>> (ema.params.kernel.value - start).tolist()
    [[1.0]]
  """

  def __init__(self, params: Any, decay: float, *, only: Filter = ..., graph: bool | None = None):
    self.decay = decay
    self.only = only
    flat = _graph.variables(params, only).flat_state()
    self.params = _nested_dict({p: v.copy() for p, v in flat.items() if isinstance(v, Variable)})

  def _tracked(self) -> dict:
    return _graph.variables(self.params).flat_state()

  def update(self, updates: Any) -> None:
    """Moves every tracked Variable towards its value in ``updates`` (a model or State)."""
    if isinstance(updates, Module):
      new = _graph.variables(updates, self.only).flat_state()
    else:
      new = dict(_graph._flat_of([updates]))
    decay = self.decay
    for path, var in self._tracked().items():
      value = new[path].value if isinstance(new[path], Variable) else new[path]
      var.value = jax.tree.map(lambda e, n: decay * e + (1 - decay) * n, var.value, value)

  def apply_to(self, model: Any) -> Any:
    """A copy of ``model`` whose tracked Variables *are* this EMA's Variables."""
    new = _graph.clone(model)
    nodes = dict(_graph.iter_graph(new))
    for path, var in self._tracked().items():
      parent = nodes[path[:-1]]
      if isinstance(parent, Module):
        setattr(parent, path[-1], var)
      else:
        parent[path[-1]] = var
    return new


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

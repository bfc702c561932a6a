"""``EMA``: an exponential moving average of a model's Variables (flax.nnx.training.ema)."""

from __future__ import annotations

from typing import Any

import jax

from ..graph.api import _functional as _graph
from ..graph.state._filters import Filter
from ..graph.variables._variables import Variable
from ..module._containers import Dict, List
from ..module._module import Module


def _nested_dict(flat: dict) -> Dict | List:
  root: dict = {}
  for path, v in flat.items():
    d = root
    for k in path[:-1]:
      d = d.setdefault(k, {})
    d[path[-1]] = v

  def build(d: dict) -> Dict | List:
    children = {k: build(v) if isinstance(v, dict) else v for k, v in d.items()}
    if children and all(isinstance(k, int) for k in children):
      # integer keys (nnx.List / nnx.Sequential layers): an nnx.List, indexed as in the model
      if sorted(children) == list(range(len(children))):
        return List([children[i] for i in range(len(children))])
    return Dict({str(k) if isinstance(k, int) else k: v for k, v in children.items()})

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
    >>> model.kernel.value = jnp.zeros((1, 1))
    >>> ema = nnx.EMA(model, decay=0.5)
    >>> model.kernel.value = jnp.full((1, 1), 2.0)
    >>> ema.update(model)  # 0.5 * 0.0 + 0.5 * 2.0
    >>> ema.params.kernel.value.tolist()
    [[1.0]]
  """

  def __init__(self, params: Any, decay: float, *, only: Filter = ..., graph: bool | None = None):
    self.decay = decay
    self.only = only
    flat = _graph.variables(params, only).to_flat_dict()
    self.params = _nested_dict({p: v.copy() for p, v in flat.items() if isinstance(v, Variable)})

  def _tracked(self) -> dict:
    return _graph.variables(self.params).to_flat_dict()

  def update(self, updates: Any) -> None:
    """Moves every tracked Variable towards its value in ``updates`` (a model or State)."""
    if isinstance(updates, Module):
      new = _graph.variables(updates, self.only).to_flat_dict()
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

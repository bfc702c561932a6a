"""``cached_partial``: bind graph arguments to a function once.

nnx_eqx already caches each graph's walk (GraphDef and leaf list) while the
graph is unchanged, so binding is all that is left to do: the bound graph
nodes are replaced by clones that hold the *same* Variables, so value updates
made through the clones are seen by the originals.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from .._errors import GraphModeRequiredError
from ..variables._variables import Variable
from ..walk import _graph_mode
from ..walk._node_types import is_graph_node
from ..walk._walk import unflatten, walk


def _clone_keeping_variables(x: Any) -> Any:
  if not is_graph_node(x):
    return x
  w = walk(x)
  reuse = {i: obj for i, obj in enumerate(w.nodes) if isinstance(obj, Variable)}
  return unflatten(w.graphdef, w.leaf_objects(), reuse=reuse)


def cached_partial(
  f: Callable[..., Any],
  *cached_args: Any,
  graph: bool | None = None,
  graph_updates: bool | None = None,
) -> Callable[..., Any]:
  """``f`` with its first arguments bound; graph nodes among them are cloned
  once, the clones sharing the originals' Variables.

  Args:
    f: a function (usually a lifted transform such as an ``nnx.jit`` step).
    *cached_args: the leading arguments to bind (pytrees of graph nodes and
      other values).
    graph: must be (or default to) True.
    graph_updates: must be (or default to) True.

  Returns:
    A function of the remaining arguments: ``g(*args, **kw) = f(*cached, *args, **kw)``.

  Raises:
    GraphModeRequiredError: (a ``ValueError``) in tree mode or with
      ``graph_updates=False``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> @nnx.jit
    ... def step(model, x):
    ...   model.bias.value += 1.0
    ...   return model(x)
    >>> cached = nnx.cached_partial(step, model)
    >>> _ = cached(jnp.ones((1, 2))); _ = cached(jnp.ones((1, 2)))
    >>> model.bias.value.tolist()
    [2.0, 2.0, 2.0]
  """
  graph, graph_updates = _graph_mode.resolve(graph, graph_updates)
  if not graph or not graph_updates:
    raise GraphModeRequiredError(
      f"cached_partial is a graph-mode-only API and requires graph_updates=True; got"
      f" graph={graph}, graph_updates={graph_updates}. Fix: call it outside"
      " `nnx.set_graph_mode(False)`/`nnx.set_graph_updates(False)`, or bind the"
      " arguments with `functools.partial`."
    )
  bound = jax.tree.map(
    _clone_keeping_variables,
    cached_args,
    is_leaf=lambda x: is_graph_node(x) or isinstance(x, Variable),
  )

  @functools.wraps(f)
  def bound_call(*args: Any, **kwargs: Any) -> Any:
    return f(*bound, *args, **kwargs)

  return bound_call

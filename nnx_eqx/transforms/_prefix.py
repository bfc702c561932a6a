"""``nnx.prefix``: per-leaf axes or shardings computed from filters (as flax.nnx.prefix).

The result is what the lifted transforms take as ``in_axes``/``out_axes``
(:func:`nnx.vmap`, :func:`nnx.scan`, :func:`nnx.pmap`), ``in_shardings``
(:func:`nnx.jit`) or ``in_specs`` (:func:`nnx.shard_map`): for each graph
node (Module, Rngs) a :class:`StateAxes` with one exact-path entry per leaf,
for a Variable or array its value, and containers keep their structure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax

from ..graph import _graph
from ..graph._filters import Filter, filter_name, to_predicate
from ..graph._node_types import is_node
from ..graph._variables import Variable
from ._axes import AtPath, StateAxes
from ._errors import AxisSpecError, fmt_path


def _key(k) -> Any:
  for attr in ("key", "name", "idx"):
    if hasattr(k, attr):
      return getattr(k, attr)
  return k


def _prefix_fn(filter_map: Mapping[Filter, Any] | Callable) -> Callable:
  if not isinstance(filter_map, Mapping):
    return filter_map
  items = [(to_predicate(f), f, v) for f, v in filter_map.items()]

  def fn(path: tuple, leaf: Any) -> Any:
    for pred, _, value in items:
      if pred(path, leaf):
        return value
    names = ", ".join(filter_name(f) for _, f, _ in items)
    raise AxisSpecError(
      f"nnx.prefix: no filter matches the leaf at {fmt_path(path)} ({type(leaf).__name__});"
      f" filters: {names}. Fix: add a catch-all entry, e.g. `...: None`."
    )

  return fn


def prefix(node: Any, filter_map: Mapping[Filter, Any] | Callable, /) -> Any:
  """Replaces every leaf of ``node`` by a prefix value (axis, sharding, spec).

  Args:
    node: a Module, Variable, or a pytree of them and arrays.
    filter_map: ``{filter: value}`` (the first matching filter decides, in
      order), or a callable ``(path, leaf) -> value``. Paths start at
      ``node`` (e.g. ``(0, 'kernel')`` inside a tuple).

  Returns:
    ``node``'s structure with each graph node replaced by a
    :class:`StateAxes` (an entry per leaf path) and each Variable or array
    by its value.

  Raises:
    AxisSpecError: (a ValueError) a leaf matches no filter.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> axes = nnx.prefix(m, {nnx.PathContains("kernel"): 0, ...: None})
    >>> axes.map_prefix(("kernel",), m.kernel), axes.map_prefix(("bias",), m.bias)
    (0, None)
    >>> nnx.prefix({"a": nnx.Param(jnp.ones(2)), "b": jnp.ones(3)}, lambda p, x: p[0])
    {'a': 'a', 'b': 'b'}
  """
  fn = _prefix_fn(filter_map)

  def one(jax_path, x):
    path = tuple(_key(k) for k in jax_path)
    if isinstance(x, Variable):
      return fn(path, x)
    if is_node(x):
      w = _graph.walk_uncached((x,))
      return StateAxes(
        [(AtPath(p[1:]), fn(path + p[1:], o)) for p, o in zip(w.paths, w.leaf_objects())]
      )
    return fn(path, x)

  is_leaf = lambda x: isinstance(x, Variable) or is_node(x)  # noqa: E731
  return jax.tree_util.tree_map_with_path(one, node, is_leaf=is_leaf)


__all__ = ["prefix"]

"""``nnx.traversals`` (as flax.nnx.traversals): flatten nested mappings to
``{path_tuple: leaf}`` and back.

Used with ``State.to_pure_dict()`` and checkpoints: a nested dict of arrays
becomes a flat dict keyed by paths, and ``unflatten_mapping`` rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

IsLeafCallable = Callable[[tuple, Mapping], bool]


class _EmptyNode:
  """The marker ``flatten_mapping(keep_empty_nodes=True)`` puts for an empty mapping."""

  def __repr__(self) -> str:
    return "empty_node"


empty_node = _EmptyNode()


def _check_mapping(xs: Any, fn: str) -> None:
  if not isinstance(xs, Mapping):
    raise TypeError(f"{fn} expects a Mapping, got {type(xs).__qualname__}.")


def flatten_to_sequence(
  xs: Mapping, /, *, is_leaf: IsLeafCallable | None = None
) -> list[tuple[tuple, Any]]:
  """The leaves of a nested mapping as ``(path_tuple, leaf)`` pairs, in order.

  Empty mappings are dropped.

  Args:
    xs: a nested mapping.
    is_leaf: ``is_leaf(path, mapping)`` True stops the descent at ``mapping``.

  Returns:
    A list of ``(path, leaf)``.

  Raises:
    TypeError: if ``xs`` is not a Mapping.

  Example:
    >>> from nnx_eqx import traversals
    >>> traversals.flatten_to_sequence({"foo": 1, "bar": {"a": 2, "b": {}}})
    [(('foo',), 1), (('bar', 'a'), 2)]
  """
  _check_mapping(xs, "flatten_to_sequence")
  out: list[tuple[tuple, Any]] = []

  def visit(x: Any, prefix: tuple) -> None:
    if not isinstance(x, Mapping) or (is_leaf is not None and is_leaf(prefix, x)):
      out.append((prefix, x))
      return
    for k, v in x.items():
      visit(v, (*prefix, k))

  visit(xs, ())
  return out


def flatten_mapping(
  xs: Mapping,
  /,
  *,
  keep_empty_nodes: bool = False,
  is_leaf: IsLeafCallable | None = None,
  sep: str | None = None,
) -> dict[Any, Any]:
  """Flattens a nested mapping to ``{path: leaf}`` (as flax.nnx.traversals).

  Args:
    xs: a nested mapping.
    keep_empty_nodes: keep empty sub-mappings as :data:`empty_node` leaves.
    is_leaf: ``is_leaf(path, mapping)`` True stops the descent at ``mapping``.
    sep: if given, keys are ``sep``-joined strings instead of tuples.

  Returns:
    The flat dict.

  Raises:
    TypeError: if ``xs`` is not a Mapping.

  Example:
    >>> from nnx_eqx import traversals
    >>> traversals.flatten_mapping({"foo": 1, "bar": {"a": 2, "b": {}}})
    {('foo',): 1, ('bar', 'a'): 2}
    >>> traversals.flatten_mapping({"bar": {"a": 2, "b": {}}}, keep_empty_nodes=True, sep="/")
    {'bar/a': 2, 'bar/b': empty_node}
  """
  _check_mapping(xs, "flatten_mapping")

  def key(path: tuple) -> Any:
    return path if sep is None else sep.join(map(str, path))

  out: dict[Any, Any] = {}

  def visit(x: Any, prefix: tuple) -> None:
    if not isinstance(x, Mapping) or (is_leaf is not None and is_leaf(prefix, x)):
      out[key(prefix)] = x
      return
    if not x and keep_empty_nodes and prefix:
      out[key(prefix)] = empty_node
    for k, v in x.items():
      visit(v, (*prefix, k))

  visit(xs, ())
  return out


def unflatten_mapping(xs: Any, /, *, sep: str | None = None) -> dict[Any, Any]:
  """Rebuilds the nested dict that :func:`flatten_mapping` flattened.

  Args:
    xs: ``{path: leaf}`` or a sequence of ``(path, leaf)`` pairs; ``empty_node``
      leaves become empty dicts.
    sep: if given, the keys are ``sep``-joined strings to split.

  Returns:
    The nested dict.

  Raises:
    TypeError: if ``xs`` is neither a Mapping nor a sequence of pairs.

  Example:
    >>> from nnx_eqx import traversals
    >>> traversals.unflatten_mapping({("foo",): 1, ("bar", "a"): 2})
    {'foo': 1, 'bar': {'a': 2}}
    >>> traversals.unflatten_mapping({"bar/a": 2}, sep="/")
    {'bar': {'a': 2}}
  """
  if isinstance(xs, Mapping):
    items: Any = xs.items()
  elif isinstance(xs, Sequence):
    items = xs
  else:
    raise TypeError(
      f"unflatten_mapping expects a Mapping or a sequence of (path, leaf), got {type(xs).__name__}."
    )
  out: dict[Any, Any] = {}
  for path, value in items:
    if sep is not None:
      path = tuple(path.split(sep))
    if value is empty_node:
      value = {}
    d = out
    for k in path[:-1]:
      d = d.setdefault(k, {})
    d[path[-1]] = value
  return out

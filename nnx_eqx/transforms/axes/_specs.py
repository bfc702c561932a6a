"""Axis specifications of lifted transforms: ``Carry``, ``StateAxes`` and the
helpers that resolve ``in_axes``/``out_axes`` to one axis per leaf.

An axis spec is an ``int`` (map/scan over that axis), ``None`` (broadcast),
``nnx.Carry`` (scan/loop carry) or a :class:`StateAxes` that gives Module
state an axis per filter. ``in_axes`` is a pytree prefix of the argument
tuple, ``out_axes`` one of the output, as in ``jax.vmap``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import jax

from ...graph._errors import fmt_path
from ...graph.api._prefix import TreeState, tree_prefix_entries
from ...graph.state._diff_state import DiffState
from ...graph.state._filters import Filter, filter_name, to_predicate
from ...graph.state._state import State
from ...graph.variables._variables import Variable
from ...graph.walk._duplicates import shared_variable_paths
from ...graph.walk._node_types import is_node
from .._errors import AxisSpecError, InconsistentAliasingError
from ..lifting import _lift


class _Marker(type):
  """Gives a marker class (used as a value, never instantiated) the repr users
  write it with, so messages that print an axis spec read as the code."""

  def __repr__(cls) -> str:
    return f"nnx.{cls.__name__}"


class Carry(metaclass=_Marker):
  """Marks the carry argument (in ``in_axes``) and output (in ``out_axes``) of
  :func:`nnx.scan`, or state carried across steps (in :class:`StateAxes`).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
    ... def cumsum(c, x):
    ...   return c + x, c + x
    >>> cumsum(jnp.array(0.0), jnp.arange(4.0))[1].tolist()
    [0.0, 1.0, 3.0, 6.0]
  """


class StateAxes(Mapping):
  """Per-filter axes for the state of a Module argument (as flax.nnx.StateAxes).

  Each leaf of the Module gets the axis of the first filter that matches it:
  an ``int`` (mapped/scanned over that axis), ``None`` (broadcast: the same
  value for every index) or ``nnx.Carry`` (scan only: carried across steps).

  Args:
    filter_axes: a mapping (or iterable of pairs) from filters to axes.

  Raises:
    UnknownFilterError: if a key is not a valid filter.

  Example:
    >>> import nnx_eqx as nnx
    >>> axes = nnx.StateAxes({nnx.Param: 0, ...: None})
    >>> axes[nnx.Param], len(axes)
    (0, 2)
  """

  __slots__ = ("_filters", "_axes", "_preds")

  def __init__(self, filter_axes: Mapping[Filter, Any] | Iterable[tuple[Filter, Any]], /):
    if isinstance(filter_axes, State):  # one exact-path filter per leaf of the State
      filter_axes = [(AtPath(p), a) for p, a in filter_axes.to_flat_dict().items()]
    items = tuple(filter_axes.items() if isinstance(filter_axes, Mapping) else filter_axes)
    self._filters = tuple(f for f, _ in items)
    self._axes = tuple(a for _, a in items)
    self._preds = tuple(to_predicate(f) for f in self._filters)

  @property
  def filters(self) -> tuple:
    return self._filters

  @property
  def axes(self) -> tuple:
    return self._axes

  def __getitem__(self, key):
    return self._axes[self._filters.index(key)]

  def __iter__(self) -> Iterator:
    return iter(self._filters)

  def __len__(self) -> int:
    return len(self._filters)

  def __eq__(self, other):
    return (
      isinstance(other, StateAxes) and self._filters == other._filters and self._axes == other._axes
    )

  def __hash__(self):
    return hash((self._filters, self._axes))

  def __repr__(self):
    inner = ", ".join(
      f"{filter_name(f)}: {_axis_name(a)}" for f, a in zip(self._filters, self._axes)
    )
    return f"nnx.StateAxes({{{inner}}})"

  def axis_for(self, path: tuple, leaf: Any, where: str) -> Any:
    """The axis of the leaf at ``path`` (first matching filter).

    Raises:
      AxisSpecError: if no filter matches; ``where`` names the argument.
    """
    for pred, axis in zip(self._preds, self._axes):
      if pred(path, leaf):
        return axis
    raise AxisSpecError(
      f"{where}: no filter of {self!r} matches the state at {fmt_path(path)}"
      f" ({type(leaf).__name__}). Fix: add a catch-all entry, e.g. `...: None`."
    )

  def map_prefix(self, path: tuple, variable: Any) -> Any:
    """The axis of the state at ``path`` (flax's name for :meth:`axis_for`).

    Raises:
      AxisSpecError: if no filter matches.
    """
    return self.axis_for(path, variable, type(self).__name__)


class AtPath:
  """Filter matching the state at exactly one path (what a State of axes
  given to :class:`StateAxes` turns into)."""

  __slots__ = ("path",)

  def __init__(self, path: tuple):
    self.path = tuple(path)

  def __call__(self, path: tuple, value: Any) -> bool:
    return tuple(path) == self.path

  def __eq__(self, other):
    return isinstance(other, AtPath) and other.path == self.path

  def __hash__(self):
    return hash(("AtPath", self.path))

  def __repr__(self):
    return f"AtPath({fmt_path(self.path)!r})"


class PathAxes(StateAxes):
  """StateAxes with one exact path per leaf, looked up in a dict: what a
  prefix made by :func:`nnx.prefix` turns into."""

  __slots__ = ("_by_path",)

  def __init__(self, entries: Iterable[tuple[tuple, Any]], /):
    entries = [(tuple(p), a) for p, a in entries]
    super().__init__([(AtPath(p), a) for p, a in entries])
    self._by_path = dict(entries)

  def axis_for(self, path: tuple, leaf: Any, where: str) -> Any:
    try:
      return self._by_path[tuple(path)]
    except KeyError:
      return super().axis_for(path, leaf, where)


def node_spec(spec: Any) -> Any:
  """``spec`` as the transforms read it: a :class:`TreeState` (graph-mode
  :func:`nnx.prefix`), a graph node made by tree-mode ``nnx.prefix``, or a
  State of prefix values (for a State argument, as flax.nnx) becomes a
  :class:`PathAxes`; other values are returned as they are.

  Raises:
    AxisSpecError: for a Variable, or a graph node not made by ``nnx.prefix``.
  """
  if isinstance(spec, TreeState):
    flat = spec.state.to_flat_dict() if isinstance(spec.state, State) else {(): spec.state}
    return PathAxes([*flat.items(), *spec.aliases.items()])
  if isinstance(spec, State) and not _holds_variables(spec):  # a State of prefix values
    return PathAxes(spec.to_flat_dict().items())
  if isinstance(spec, Variable):
    raise AxisSpecError(
      f"Variables prefixes are not supported (got {type(spec).__name__} as a prefix)."
      " Fix: use its axis (an int or None), or nnx.prefix(...) of the arguments."
    )
  if is_node(spec):
    entries = tree_prefix_entries(spec)
    if entries is None:
      raise AxisSpecError(
        f"Graph nodes are not allowed as prefixes (got a {type(spec).__name__})."
        " Fix: use an int or None, nnx.StateAxes({filter: axis}), or nnx.prefix(node, ...)."
      )
    return PathAxes(entries)
  return spec


def _holds_variables(state: State) -> bool:
  return any(isinstance(v, Variable) for v in state.to_flat_dict().values())


def _axis_name(a) -> str:
  return repr(a)  # nnx.Carry, an int or None


def is_axis_leaf(x) -> bool:
  # Graph nodes (Variables included) are leaves: node_spec reads or refuses them.
  return x is None or x is Carry or isinstance(x, (int, StateAxes, TreeState)) or is_node(x)


class NodeMarker:
  """Stands for the ``k``-th graph node of an argument tuple (a pytree leaf)."""

  __slots__ = ("k",)

  def __init__(self, k: int):
    self.k = k


def _count_leaves(tree) -> int:
  return len(jax.tree_util.tree_leaves(tree, is_leaf=is_node))


def broadcast_prefix(prefix: Any, tree: Any, name: str, is_leaf=is_axis_leaf) -> list:
  """One axis spec per leaf of ``tree`` (graph nodes count as leaves);
  ``is_leaf`` tells which values of ``prefix`` are specs.

  Raises:
    AxisSpecError: if ``prefix`` is not a pytree prefix of ``tree``.
  """
  if isinstance(prefix, list):
    prefix = tuple(prefix)
  specs: list = []

  def take(spec, sub):
    specs.extend([node_spec(spec)] * _count_leaves(sub))

  try:
    jax.tree_util.tree_map(take, prefix, tree, is_leaf=is_leaf)
  except (ValueError, TypeError) as e:
    raise AxisSpecError(
      f"{name}={prefix!r} is not a pytree prefix of the value it describes"
      f" ({type(tree).__name__} of {_count_leaves(tree)} leaves): {e}. Fix: give one"
      f" entry per argument (a tuple as long as the arguments), or a single axis for all."
    ) from None
  return specs


def arg_specs(split: _lift.ArgSplit, rest: tuple, prefix: Any, name: str) -> tuple[list, list]:
  """Resolves ``in_axes`` over the arguments: ``(per-node specs, per-rest-leaf specs)``.

  Rest leaves are ordered as ``jax.tree_util.tree_leaves(rest)``.
  """
  n_nodes = len(split.arg_of_node)
  marked = _lift.join_args(split, rest, [NodeMarker(k) for k in range(n_nodes)])
  if not isinstance(prefix, (tuple, list)) or is_axis_leaf(prefix):
    specs = broadcast_prefix(prefix, marked, name)
  else:
    prefix = tuple(prefix)
    if len(prefix) != len(marked):
      raise AxisSpecError(
        f"{name} has {len(prefix)} entries but the function got {len(marked)} positional"
        f" arguments. Fix: give one entry per argument, e.g. {name}=(0, None)."
      )
    specs = broadcast_prefix(prefix, marked, name)
  flat = jax.tree_util.tree_leaves(marked, is_leaf=is_node)
  node_specs: list = [None] * n_nodes
  rest_specs: list = []
  for x, s in zip(flat, specs):
    if isinstance(x, NodeMarker):
      node_specs[x.k] = s
    else:
      rest_specs.append(s)
  return node_specs, rest_specs


def resolve(spec: Any, path: tuple, leaf: Any, where: str) -> Any:
  """The axis of one Module leaf given its node's spec."""
  if isinstance(spec, StateAxes):
    return spec.axis_for(path, leaf, where)
  return spec


def aliasing_error(transform: str, name: str, var: Any, lines: list[str]) -> Exception:
  body = "\n".join(f"  {line}" for line in lines)
  return InconsistentAliasingError(
    f"{transform}: Inconsistent aliasing detected. The following nodes have different"
    f" prefixes ({name}); one {type(var).__name__} is reached by all these paths:\n{body}\n"
    "Fix: give every path to a shared object the same prefix (e.g. one nnx.StateAxes for"
    " both), or pass it once."
  )


def check_aliasing(split, node_specs: list, w: Any, name: str, transform: str) -> None:
  """Raises if a shared Variable of the walked arguments ``w`` gets different
  prefixes (``node_specs``, one per node argument) along its paths.

  Raises:
    InconsistentAliasingError: listing each path with its prefix.
  """
  for i, paths in shared_variable_paths(w.graphdef.defn).items():
    var = w.nodes[i]
    got = [
      resolve(node_specs[p[0]], p[1:], var, f"{name} of argument {split.arg_of_node[p[0]]}")
      for p in paths
    ]
    if any(g != got[0] for g in got[1:]):
      lines = [
        f"argument {split.arg_of_node[p[0]]}, state {fmt_path(p[1:])}: {g!r}"
        for p, g in zip(paths, got)
      ]
      raise aliasing_error(transform, name, var, lines)


def leaf_axes(split, node_specs: list, paths, objs, name: str) -> list:
  """Per Module leaf (walk order), its resolved axis."""
  out = []
  for p, o in zip(paths, objs):
    k = p[0]
    where = f"{name} of argument {split.arg_of_node[k]}"
    out.append(resolve(node_specs[k], p[1:], o, where))
  return out


def check_no_carry(specs: Iterable, name: str, transform: str) -> None:
  """Raises if ``nnx.Carry`` appears where ``transform`` does not support it."""
  for s in specs:
    if s is Carry or (isinstance(s, StateAxes) and Carry in s.axes):
      raise AxisSpecError(
        f"{name} of {transform} contains nnx.Carry, which only nnx.scan supports."
        " Fix: use an int axis or None."
      )


PREFIX_KEYWORDS = ("in_axes", "out_axes", "in_shardings", "out_shardings", "in_specs", "argnums")


def check_prefix_keywords(kwargs: dict, graph: bool, transform: str) -> None:
  """Checks the prefix arguments a transform is built with (``in_axes``,
  ``in_shardings``, ``argnums``, ...), so a wrong one fails at once.

  Raises:
    AxisSpecError: for a Variable or an arbitrary graph node used as a prefix,
      and in tree mode (``graph=False``) for StateAxes, StateSharding or
      DiffState (which describe a graph's state: use ``nnx.prefix``).
  """
  for name in PREFIX_KEYWORDS:
    if name not in kwargs:
      continue
    leaves = jax.tree_util.tree_leaves(
      kwargs[name], is_leaf=lambda x: is_axis_leaf(x) or isinstance(x, DiffState)
    )
    for leaf in leaves:
      described = isinstance(leaf, (StateAxes, DiffState)) and not isinstance(leaf, PathAxes)
      if not graph and described:
        raise AxisSpecError(
          f"nnx.{transform}(graph=False): {name} cannot contain `{type(leaf).__name__}`"
          " objects: tree mode reads prefixes as plain pytrees. Fix: use"
          " nnx.prefix(node, {filter: value}, graph=False) for the argument, or graph mode."
        )
      if not isinstance(leaf, DiffState):
        node_spec(leaf)

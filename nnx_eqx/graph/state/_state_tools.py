"""Function forms of State views that flax.nnx 0.12 exposes at top level."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...traversals import unflatten_mapping
from .._errors import StateMismatchError
from ..variables._variables import Variable
from ._filters import Filter, PathIn
from ._state import FlatState, State


def to_flat_state(state: State | dict) -> FlatState:
  """The ``(path, leaf)`` pairs of a State, in its traversal order.

  Args:
    state: a State (or a nested dict, wrapped into one).

  Returns:
    A :class:`FlatState`: a sequence of ``(path_tuple, leaf)`` (``len`` is the
    number of leaves) with ``.paths`` and ``.leaves``.

  Raises:
    TypeError: if ``state`` is neither a State nor a dict.

  Example:
    >>> import nnx_eqx as nnx
    >>> flat = nnx.to_flat_state(nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0))))
    >>> [p for p, _ in flat]
    [('bias',), ('kernel',)]
  """
  if isinstance(state, dict):
    state = State(state)
  if not isinstance(state, State):
    raise TypeError(f"to_flat_state expects a State, got {type(state).__name__}.")
  return state.flat_state()


def from_flat_state(flat_state: Any) -> State:
  """Inverse of :func:`to_flat_state`: a nested State from ``(path, leaf)`` pairs
  (``flat_state``: a FlatState or any iterable of them).

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.from_flat_state([(("a", "b"), 1)]).a.b
    1
  """
  return State.from_flat_path(flat_state)


def map_state(f: Callable[[tuple, Any], Any], state: State) -> State:
  """A new State with ``f(path, leaf)`` in place of each leaf (as flax.nnx.map_state).

  Args:
    f: called with each leaf's path tuple and leaf (a Variable or raw value).
    state: the State to map.

  Returns:
    A State of the same paths holding ``f``'s results. Returning plain labels
    gives the label tree ``optax.partition`` expects.

  Raises:
    TypeError: if ``state`` is not a State (or dict).

  Example:
    >>> import nnx_eqx as nnx
    >>> params = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), nnx.Param)
    >>> labels = nnx.map_state(lambda path, v: "decay" if path[-1] == "kernel" else "none", params)
    >>> labels.kernel, labels.bias
    ('decay', 'none')
  """
  flat = to_flat_state(state)
  return from_flat_state([(path, f(path, leaf)) for path, leaf in flat])


def to_pure_dict(state: State, extract_fn: Callable[[Any], Any] | None = None) -> dict:
  """``state.to_pure_dict()``: nested dicts of raw values.

  With ``extract_fn`` (as flax.nnx's), each leaf (a Variable, or a raw value) is
  replaced by ``extract_fn(leaf)`` instead of its value.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.to_pure_dict(nnx.State({"w": nnx.Param(jnp.ones(1))}))["w"].shape
    (1,)
    >>> nnx.to_pure_dict(nnx.State({"w": nnx.Param(jnp.ones(1))}), type)
    {'w': <class 'nnx_eqx.Param'>}
  """
  if extract_fn is None:
    return state.to_pure_dict()
  return unflatten_mapping({path: extract_fn(leaf) for path, leaf in to_flat_state(state)})


def diff(state: State, other: State) -> State:
  """The leaves of ``state`` whose paths ``other`` lacks.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.statelib.diff(nnx.State({"a": 1, "b": 2}), nnx.State({"a": 3})).to_pure_dict()
    {'b': 2}
  """
  known = other.to_flat_dict()
  return State.from_flat_path((p, v) for p, v in state.to_flat_dict().items() if p not in known)


def _maybe_int(key: Any) -> Any:
  try:
    return int(key)
  except (TypeError, ValueError):
    return key


def _flat_pure(d: Mapping, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
  out: list = []
  for k, v in d.items():
    if isinstance(v, Mapping) and not isinstance(v, State):
      out.extend(_flat_pure(v, (*prefix, k)))
    else:
      out.append(((*prefix, k), v))
  return out


def replace_by_pure_dict(
  state: State, pure_dict: Mapping, replace_fn: Callable[[Any, Any], Any] | None = None
) -> None:
  """Writes the raw values of a nested plain dict into ``state``, in place.

  Keys that are strings of integers (as checkpoints store sequence indices)
  also match integer keys.

  Args:
    state: the State to update.
    pure_dict: nested dicts of raw values (e.g. from ``nnx.to_pure_dict``).
    replace_fn: ``(current leaf, raw value) -> new leaf``; by default a
      Variable's value is replaced and other leaves are replaced outright.

  Raises:
    StateMismatchError: naming a key path of ``pure_dict`` that ``state`` lacks.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> s = nnx.State({"layers": {0: {"w": nnx.Param(jnp.ones(1))}}})
    >>> nnx.replace_by_pure_dict(s, {"layers": {"0": {"w": jnp.zeros(1)}}})
    >>> s["layers"][0]["w"].value.tolist()
    [0.0]
  """
  flat = state.to_flat_dict()
  for path, value in _flat_pure(pure_dict):
    key = path if path in flat else tuple(map(_maybe_int, path))
    if key not in flat:
      raise StateMismatchError(
        f"replace_by_pure_dict: key path {path} is not in the State. Fix: produce the dict"
        " with `nnx.to_pure_dict` from a State of the same model."
      )
    cur = flat[key]
    if replace_fn is None and isinstance(cur, Variable):
      cur.__dict__["_value"] = value
      continue
    node = state
    for k in key[:-1]:
      node = node[k]
    node[key[-1]] = replace_fn(cur, value) if replace_fn is not None else value


def split_state(state: State, first: Filter, /, *filters: Filter) -> Any:
  """``state.split(...)`` as a function: partitions the leaves by filters,
  which must cover every leaf (``...`` last collects the rest).

  Raises:
    FilterError: if some leaf matches no filter (its path is named).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> s = nnx.State({"w": nnx.Param(jnp.ones(1)), "y": nnx.Intermediate(jnp.ones(1))})
    >>> inter, rest = nnx.split_state(s, nnx.Intermediate, ...)
    >>> list(inter), list(rest)
    (['y'], ['w'])
  """
  return state.split(first, *filters)


def filter_state(state: State, first: Filter, /, *filters: Filter) -> Any:
  """``state.filter(...)`` as a function: the leaves matching the filters
  (others are dropped).

  Raises:
    UnknownFilterError: if a filter is not a valid filter.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> s = nnx.State({"w": nnx.Param(jnp.ones(1)), "y": nnx.Intermediate(jnp.ones(1))})
    >>> list(nnx.filter_state(s, nnx.Param))
    ['w']
  """
  return state.filter(first, *filters)


def merge_state(state: State, /, *states: State) -> State:
  """``State.merge`` as a function: one State from several (later ones win).

  Example:
    >>> import nnx_eqx as nnx
    >>> sorted(nnx.merge_state(nnx.State({"a": 1}), nnx.State({"b": 2})))
    ['a', 'b']
  """
  return State.merge(state, *states)


def restore_int_paths(pure_dict: Mapping) -> dict:
  """A nested dict whose string keys that spell integers (as checkpoints
  store sequence indices) are integers again.

  Example:
    >>> import nnx_eqx as nnx
    >>> nnx.restore_int_paths({"layers": {"0": {"w": 1}}, "a": 2})
    {'layers': {0: {'w': 1}}, 'a': 2}
  """
  return {
    _maybe_int(k): restore_int_paths(v) if isinstance(v, Mapping) else v
    for k, v in pure_dict.items()
  }


def create_path_filters(state: State) -> dict[PathIn, Any]:
  """Groups the paths of ``state`` by value: ``{nnx.PathIn(*paths): value}``, one entry
  per distinct (hashable) value, Variables read through their value (as flax.nnx's
  ``statelib.create_path_filters``; e.g. a State of PartitionSpecs becomes filters
  selecting the Variables of each spec).

  Args:
    state: a State whose leaves (or Variables' values) are hashable.

  Returns:
    A dict from a ``PathIn`` filter over the paths holding a value to that value.

  Raises:
    TypeError: if a value is not hashable (arrays are not).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> specs = nnx.get_partition_spec(nnx.state(m))
    >>> [(sorted(f.paths), v) for f, v in nnx.statelib.create_path_filters(specs).items()]
    [([('bias',), ('kernel',)], P())]
  """
  groups: dict[Any, list[tuple]] = {}
  for path, value in to_flat_state(state):
    groups.setdefault(value._value if isinstance(value, Variable) else value, []).append(path)
  return {PathIn(*paths): value for value, paths in groups.items()}

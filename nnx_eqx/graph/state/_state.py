"""State: the nested-mapping pytree that ``split`` returns.

A ``State`` maps attribute names (``str``) and sequence indices (``int``) to
either sub-States or leaves. Leaves are Variables (or raw arrays); as a JAX
pytree a State's leaves are the Variables' values, so ``jax.tree.map`` and
``jax.jit`` see plain arrays.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, overload

import jax

from .._errors import FilterError, StateMismatchError
from ..variables._variables import Variable
from ._filters import Filter, filter_name, to_predicate

Path = tuple


class State(MutableMapping):
  """A nested mapping from keys to sub-States or leaves (Variables or arrays).

  Args:
    mapping: a (possibly nested) mapping, or ``(key, value)`` pairs; nested plain
      dicts become States.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> s = nnx.State({"l1": {"kernel": nnx.Param(jnp.ones((2, 3)))}})
    >>> s.l1.kernel.value.shape
    (2, 3)
    >>> [p for p, _ in s.to_flat_dict().items()]
    [('l1', 'kernel')]
    >>> jax.tree.map(lambda x: x * 2, s).l1.kernel.value[0, 0].item()
    2.0
  """

  __slots__ = ("_mapping",)

  def __init__(self, mapping: Mapping | Iterable[tuple[Any, Any]] | None = None, /):
    m: dict = {}
    if mapping is not None:
      for k, v in mapping.items() if isinstance(mapping, Mapping) else mapping:
        m[k] = State(v) if isinstance(v, Mapping) and not isinstance(v, State) else v
    object.__setattr__(self, "_mapping", m)

  @classmethod
  def _from_dict(cls, m: dict) -> State:
    s = object.__new__(cls)
    object.__setattr__(s, "_mapping", m)
    return s

  # -- mapping protocol ---------------------------------------------------
  def __getitem__(self, key):
    return self._mapping[key]

  def __setitem__(self, key, value):
    self._mapping[key] = State(value) if isinstance(value, dict) else value

  def __delitem__(self, key):
    del self._mapping[key]

  def __iter__(self) -> Iterator:
    return iter(self._mapping)

  def __len__(self) -> int:
    return len(self._mapping)

  def __getattr__(self, key):
    try:
      return self._mapping[key]
    except KeyError:
      raise AttributeError(f"State has no key {key!r}; keys are {list(self._mapping)}") from None

  def __setattr__(self, key, value):
    self[key] = value

  def __eq__(self, other):
    if isinstance(other, State):
      return self._mapping == other._mapping
    if isinstance(other, Mapping):  # a plain dict compares by items, as any Mapping
      return dict(self.items()) == dict(other.items())
    return NotImplemented

  __hash__ = None  # type: ignore[assignment]

  def __reduce__(self):
    return type(self)._from_dict, (self._mapping,)

  # -- flat views ---------------------------------------------------------
  def to_flat_dict(self) -> dict[Path, Any]:
    """Returns ``{path: leaf}`` in traversal (sorted-graph) order."""
    out: dict = {}
    _flatten_into(self._mapping, (), out)
    return out

  def flat_state(self) -> FlatState:
    """The leaves as a :class:`FlatState` of ``(path, leaf)`` pairs, in traversal
    order (as flax.nnx ``State.flat_state``; ``to_flat_dict`` gives a dict).

    Raises:
      Nothing: every State can be flattened.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> s = nnx.State({"b": nnx.Param(jnp.ones(2)), "a": {"c": 1}})
      >>> [(p, type(v).__name__) for p, v in s.flat_state()]
      [(('a', 'c'), 'int'), (('b',), 'Param')]
    """
    out: dict = {}
    _flatten_into(self._mapping, (), out, ordered=True)
    return FlatState(list(out.items()))

  @classmethod
  def from_flat_path(cls, flat: Mapping[Path, Any] | Any) -> State:
    """Builds a nested State from ``{path: leaf}`` or an iterable of ``(path, leaf)``.

    Example:
      >>> import nnx_eqx as nnx
      >>> nnx.State.from_flat_path({("a", "b"): 1}).a.b
      1
    """
    items = flat.items() if isinstance(flat, Mapping) else flat
    root: dict = {}
    for path, leaf in items:
      d = root
      for k in path[:-1]:
        sub = d.get(k)
        if sub is None:
          sub = d[k] = {}
        d = sub
      d[path[-1]] = leaf
    return _wrap(root)

  # -- filtering ----------------------------------------------------------
  def filter(self, first: Filter, /, *filters: Filter):
    """Selects leaves by filters; leaves matching none are dropped (no error).

    Returns one State for one filter, a tuple of States for several. A leaf goes
    to the first filter that matches it.

    Raises:
      UnknownFilterError: if a filter is not a valid filter.
    """
    parts = _partition(self.to_flat_dict(), (first, *filters), exhaustive=False)
    return parts[0] if not filters else tuple(parts)

  def split(self, first: Filter, /, *filters: Filter):
    """Partitions the leaves by filters, which must cover every leaf.

    Returns one State for one filter, a tuple of States for several.

    Raises:
      FilterError: if some leaf matches no filter; the message lists its path.
        Add ``...`` as the last filter to collect the rest.
    """
    parts = _partition(self.to_flat_dict(), (first, *filters), exhaustive=True)
    return parts[0] if not filters else tuple(parts)

  @staticmethod
  def merge(state: State, /, *states: State) -> State:
    """Merges several States into one (later ones win on the same path).

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> a = nnx.State({"x": nnx.Param(jnp.ones(1))})
      >>> b = nnx.State({"y": nnx.BatchStat(jnp.ones(1))})
      >>> sorted(nnx.State.merge(a, b))
      ['x', 'y']
    """
    flat: dict = {}
    for s in (state, *states):
      flat.update(s.to_flat_dict())
    return State.from_flat_path(flat)

  # -- pure dicts ---------------------------------------------------------
  def to_pure_dict(self) -> dict:
    """Nested plain dict of raw values (Variables unwrapped), e.g. for serialisation.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> nnx.State({"w": nnx.Param(jnp.ones(1))}).to_pure_dict()["w"].shape
      (1,)
    """
    return {
      k: v.to_pure_dict() if isinstance(v, State) else (v._value if isinstance(v, Variable) else v)
      for k, v in self._mapping.items()
    }

  def replace_by_pure_dict(self, pure: Mapping, path: Path = ()) -> None:
    """Replaces leaf values in place from a nested plain dict of the same structure.

    Raises:
      StateMismatchError: if ``pure`` has a key this State lacks (the message
        names the path).
    """
    for k, v in pure.items():
      if k not in self._mapping:
        raise StateMismatchError(
          f"replace_by_pure_dict: key path {path + (k,)} is not in this State"
          f" (its keys at {path} are {list(self._mapping)}). Fix: produce the"
          " dict with `state.to_pure_dict()` from a State of the same model."
        )
      cur = self._mapping[k]
      if isinstance(cur, State):
        cur.replace_by_pure_dict(v, path + (k,))
      elif isinstance(cur, Variable):
        cur.__dict__["_value"] = v
      else:
        self._mapping[k] = v

  # -- seed-era API (after flax.nnx's, as the reference lists them) -------
  def partition(self, first: Filter, /, *filters: Filter):
    """Seed-era alias of :meth:`split`."""
    return self.split(first, *filters)


def _wrap(d: dict) -> State:
  """Wraps nested plain dicts into States, iteratively (graphs may be very deep)."""
  order: list[tuple[dict, object]] = []
  stack: list[tuple[dict, object]] = [(d, None)]
  while stack:
    cur, key_parent = stack.pop()
    order.append((cur, key_parent))
    for k, v in cur.items():
      if type(v) is dict:
        stack.append((v, (cur, k)))
  root = None
  for cur, key_parent in reversed(order):
    st = State._from_dict(cur)
    if key_parent is None:
      root = st
    else:
      parent, k = key_parent  # type: ignore[misc]
      parent[k] = st
  return root  # type: ignore[return-value]


def _flatten_into(m: dict, prefix: Path, out: dict, ordered: bool = False) -> None:
  """Adds ``{path: leaf}`` of a nested mapping to ``out`` iteratively, in insertion
  order, or ``ordered`` as the paths sort (see :func:`_path_sort_key`).

  The keys of the enclosing States are kept in one list, so a nested State
  costs O(1) and a leaf O(len(path)): linear in the nodes plus the keys made.
  Ordering sorts each State's keys, not whole paths (which would cost their
  common prefixes at every comparison).
  """

  def items(m: dict) -> Iterator:
    return iter(sorted(m.items(), key=_item_sort_key) if ordered else m.items())

  stack: list = [items(m)]
  keys = list(prefix)
  while stack:
    for k, v in stack[-1]:
      if isinstance(v, State):
        stack.append(items(v._mapping))
        keys.append(k)
        break
      out[(*keys, k)] = v
    else:
      stack.pop()
      if stack:
        keys.pop()


def _partition(flat: dict, filters: tuple, exhaustive: bool) -> list[State]:
  if exhaustive:
    check_catch_all_last(filters)
  preds = [to_predicate(f) for f in filters]
  buckets: list[list] = [[] for _ in preds]
  missing = []
  for path, leaf in flat.items():
    for i, p in enumerate(preds):
      if p(path, leaf):
        buckets[i].append((path, leaf))
        break
    else:
      missing.append((path, leaf))
  if exhaustive and missing:
    raise non_exhaustive_error(missing, filters)
  return [State.from_flat_path(b) for b in buckets]


def check_catch_all_last(filters: tuple) -> None:
  """Raises if a catch-all filter (``...`` or ``True``) is not the last one:
  the filters after it could never match.

  Raises:
    FilterError: naming the position of the catch-all.
  """
  for i, f in enumerate(filters[:-1]):
    if f is Ellipsis or f is True:
      raise FilterError(
        f"`...` or `True` can only be used as the last filters, got {filter_name(f)} at"
        f" position {i} of {len(filters)}. Fix: move it to the end; the filters after it"
        " would never match."
      )


def non_exhaustive_error(missing: list, filters: tuple) -> FilterError:
  """Builds the error for leaves that no filter matched."""
  shown = ", ".join(f"{'/'.join(map(str, p))} ({type(v).__name__})" for p, v in missing[:8])
  more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
  names = ", ".join(filter_name(f) for f in filters)
  return FilterError(
    f"Non-exhaustive filters, got a non-empty remainder: filters ({names}) do not cover"
    f" every leaf; not matched: {shown}{more}."
    " Fix: add a filter for them, or `...` as the last filter to collect the rest."
  )


def _state_flatten_with_keys(s: State):
  m = s._mapping
  keys = tuple(m)
  return tuple((jax.tree_util.DictKey(k), m[k]) for k in keys), keys


def _state_flatten(s: State):
  m = s._mapping
  keys = tuple(m)
  return tuple(m[k] for k in keys), keys


def _state_unflatten(keys, children):
  return State._from_dict(dict(zip(keys, children)))


jax.tree_util.register_pytree_with_keys(
  State, _state_flatten_with_keys, _state_unflatten, _state_flatten
)


_INT_STR = itertools.repeat((int, str))
_STR = itertools.repeat(str)


def _path_sort_key(path: Path) -> tuple:
  """Sorts paths as flax does (``sorted``), with ints and strs at one position comparable."""
  if all(map(isinstance, path, _INT_STR)):  # the usual case, without a Python loop
    return tuple(zip(map(isinstance, path, _STR), path))
  return tuple(map(_key_sort_key, path))


def _key_sort_key(k: Any) -> tuple:
  return (isinstance(k, str), k) if isinstance(k, int | str) else (True, str(k))


def _item_sort_key(item: tuple) -> tuple:
  return _key_sort_key(item[0])


class FlatState(Sequence):
  """The leaves of a graph as ``(path, leaf)`` pairs, in the GraphDef's order.

  What ``nnx.graphlib.flatten`` returns; ``nnx.graphlib.unflatten`` and
  ``nnx.merge`` accept it. A pytree whose leaves are the leaves. ``sort=True``
  orders the pairs by path (flax.nnx's keyword; there it is required).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> flat = nnx.graphlib.FlatState([(("a",), 1), (("b", 0), 2)])
    >>> flat.paths, flat.leaves, flat[1]
    ((('a',), ('b', 0)), (1, 2), (('b', 0), 2))
    >>> flat.to_nested_state()["b"][0]
    2
    >>> nnx.graphlib.FlatState([(("b",), 1), (("a",), 2)], sort=True).paths
    (('a',), ('b',))
  """

  __slots__ = ("_paths", "_leaves")

  def __init__(self, items: Iterable[tuple[tuple, Any]], /, *, sort: bool = False):
    pairs = sorted(items, key=lambda item: item[0]) if sort else list(items)
    self._paths = tuple(p for p, _ in pairs)
    self._leaves = tuple(v for _, v in pairs)

  @classmethod
  def from_sorted_keys_values(cls, paths: Iterable[tuple], leaves: Iterable[Any]) -> FlatState:
    """A FlatState from parallel sequences of paths and leaves."""
    return cls(zip(paths, leaves))

  @property
  def paths(self) -> tuple:
    """The paths, in order."""
    return self._paths

  @property
  def leaves(self) -> tuple:
    """The leaves (Variables or raw values), in order."""
    return self._leaves

  @overload
  def __getitem__(self, i: int) -> tuple[tuple, Any]: ...

  @overload
  def __getitem__(self, i: slice) -> FlatState: ...

  def __getitem__(self, i):
    if isinstance(i, slice):
      return FlatState(zip(self._paths[i], self._leaves[i]))
    return self._paths[i], self._leaves[i]

  def __len__(self) -> int:
    return len(self._leaves)

  def __iter__(self) -> Iterator[tuple[tuple, Any]]:
    return iter(zip(self._paths, self._leaves))

  def __repr__(self) -> str:
    return f"FlatState({list(self)!r})"

  def to_nested_state(self) -> State:
    """The same leaves as a nested State keyed by the paths."""
    return State.from_flat_path(zip(self._paths, self._leaves))


jax.tree_util.register_pytree_node(
  FlatState,
  lambda f: (f.leaves, f.paths),
  lambda paths, leaves: FlatState.from_sorted_keys_values(paths, leaves),
)

"""``nnx.split_rngs``: give each index of a vmap/scan its own PRNG keys.

Splitting a stream draws one key from it (its count advances by exactly 1),
splits that key into ``splits`` keys and sets the stream's key to them, with a
count of zeros per key. ``restore_rngs`` (or leaving the context / decorated
call) puts the drawn-from key and the advanced count back, so after a split
call every split stream has advanced by exactly 1, whatever happened inside.
This follows flax.nnx.split_rngs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp

from ...graph._sentinel import MISSING as _MISSING
from ...graph.api._functional import iter_graph
from ...graph.state._filters import Filter, to_predicate
from ...graph.variables._variables import Variable
from ...module._rngs import RngStream
from ..lifting import _lift


class SplitBackups:
  """The streams a :func:`split_rngs` call changed, with their previous state.

  Iterable of ``(stream, key, count)``; a context manager that restores them
  on exit (see :func:`restore_rngs`).
  """

  def __init__(self, backups: list):
    self.backups = backups

  def __iter__(self) -> Iterator:
    return iter(self.backups)

  def __enter__(self) -> SplitBackups:
    return self

  def __exit__(self, *exc) -> None:
    restore_rngs(self)


def restore_rngs(backups: SplitBackups) -> None:
  """Puts back the keys and counts saved by :func:`split_rngs`.

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(0)
    >>> backups = nnx.split_rngs(rngs, splits=3)
    >>> rngs.default.key.shape
    (3,)
    >>> nnx.restore_rngs(backups)
    >>> rngs.default.key.shape, int(rngs.default.count.value)
    ((), 1)
  """
  for stream, key, count in backups:
    stream.key.value = key
    stream.count.value = count


def _streams(node: Any, predicate) -> list[RngStream]:
  _, nodes, _ = _lift.split_args(node if isinstance(node, tuple) else (node,))
  seen: set[int] = set()
  found = []
  for n in nodes:
    if isinstance(n, RngStream):
      items = [((), n)]
    else:
      items = list(iter_graph(n)) if not _is_variable(n) else []
    for path, obj in items:
      if isinstance(obj, RngStream) and id(obj) not in seen:
        if predicate((*path, "key"), obj.key) and predicate((*path, "count"), obj.count):
          seen.add(id(obj))
          found.append(obj)
  return found


def backup_keys(node: Any, /, *, graph: bool | None = None) -> SplitBackups:
  """The current key and count of every RngStream in ``node`` (as flax.nnx.backup_keys),
  to put back later with :func:`restore_rngs`.

  Args:
    node: any graph node holding Rngs.
    graph: accepted for flax compatibility.

  Returns:
    A :class:`SplitBackups` (also a context manager that restores on exit).

  Raises:
    TypeError: never.

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(0)
    >>> backups = nnx.rnglib.backup_keys(rngs)
    >>> _ = rngs.default(), rngs.default()
    >>> nnx.restore_rngs(backups)
    >>> int(rngs.default.count.value)
    0
  """
  seen: set[int] = set()
  backups = []
  for _, obj in iter_graph(node):
    if isinstance(obj, RngStream) and id(obj) not in seen:
      seen.add(id(obj))
      backups.append((obj, obj.key.value, obj.count.value))
  return SplitBackups(backups)


def _is_variable(x) -> bool:
  return isinstance(x, Variable)


def _split(node: Any, splits: int | tuple[int, ...], only: Filter, squeeze: bool) -> SplitBackups:
  if squeeze and splits != 1:
    raise ValueError(f"split_rngs: squeeze=True needs splits=1, got splits={splits}.")
  pred = to_predicate(only)
  backups = []
  for stream in _streams(node, pred):
    key = stream()
    backups.append((stream, stream.key.value, stream.count.value))
    keys = jax.random.split(key, splits)
    shape = tuple(stream.count.value.shape)
    if squeeze:
      keys = keys[0]
    else:
      shape = ((splits,) if isinstance(splits, int) else tuple(splits)) + shape
    stream.key.value = keys
    stream.count.value = jnp.zeros(shape, jnp.uint32)
  return SplitBackups(backups)


def split_rngs(
  node: Any = _MISSING,
  /,
  *,
  splits: int | tuple[int, ...],
  only: Filter = ...,
  squeeze: bool = False,
) -> Any:
  """Splits the keys of the Rngs streams in ``node`` for a vmap/scan (as flax.nnx).

  Each selected stream draws one key (count + 1) and gets ``splits`` keys
  derived from it, with zero counts of the same shape; map or scan over them
  with axis 0. Called with a node, it splits now and returns
  :class:`SplitBackups` (a context manager that restores the streams).
  Without a node it is a decorator: the streams found in the call's
  arguments are split for the call and restored after it, so every split
  stream advances by exactly 1 per call.

  Args:
    node: a graph node (Rngs, Module, or a tuple of them); omit for a decorator.
    splits: number (or shape) of keys per stream.
    only: filter selecting streams; it sees ``(path + ('key',), stream.key)``,
      so a stream name (tag) such as ``'params'`` works.
    squeeze: with ``splits=1``, keep the key's shape (a fresh key, no new axis).

  Returns:
    ``SplitBackups`` (with a node) or a decorator.

  Raises:
    TraceContextError: if the streams were created in another JAX trace.
    ValueError: if ``squeeze`` is used with ``splits != 1``.

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(params=0, dropout=1)
    >>> with nnx.split_rngs(rngs, splits=4, only="dropout"):
    ...   rngs.params.key.shape, rngs.dropout.key.shape
    ((), (4,))
    >>> rngs.dropout.key.shape, int(rngs.dropout.count.value)
    ((), 1)
  """
  if node is not _MISSING:
    return _split(node, splits, only, squeeze)

  def decorator(f: Callable) -> Callable:
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
      with _split((*args, kwargs), splits, only, squeeze):
        return f(*args, **kwargs)

    return wrapper

  return decorator

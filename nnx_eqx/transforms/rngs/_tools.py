"""Rewriting the RNG streams of a graph: ``with_rngs``, ``fork_rngs``, ``reseed``.

``with_rngs`` and ``fork_rngs`` (outside in-place graph mode) return a *copy*
of their input in which selected ``RngStream`` objects are replaced by split,
broadcast or forked streams; the copy is made by :func:`recursive_map`, which
rebuilds every graph node, Variable and container once (sharing and cycles
kept). ``reseed`` resets streams in place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ...graph._sentinel import MISSING as _MISSING
from ...graph.api._functional import iter_graph, node_impl, walk
from ...graph.state._filters import Filter, filter_name, to_predicate
from ...graph.tracing._traces import current_trace
from ...graph.variables._variables import Variable
from ...graph.walk import _graph_mode
from ...graph.walk._tree_mode import check_tree_mode
from ...module._rngs import Rngs, RngStream
from . import _split as _rng_split


def recursive_map(f: Callable[[tuple, Any], Any], node: Any, *, graph: bool | None = None) -> Any:
  """Rebuilds ``node`` bottom-up, replacing every object ``x`` at ``path`` by ``f(path, x)``.

  Graph nodes, lists, tuples and dicts are copied (each shared object once, so
  sharing survives); ``f`` sees the copy after its children were mapped.
  Variables and other objects are passed to ``f`` as they are, so the new
  structure shares the original's Variables unless ``f`` replaces them (as in
  flax.nnx).

  Args:
    f: ``(path, value) -> new value``.
    node: any graph node or pytree of them.
    graph: False (tree mode) rejects an object found at two paths or a
      cycle; otherwise sharing is kept.

  Returns:
    The rebuilt structure.

  Raises:
    SharedReferenceError: in tree mode, if an object is found at two paths.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> def zero(path, x):
    ...   return nnx.Param(jnp.zeros_like(x.value)) if path == ("kernel",) else x
    >>> z = nnx.recursive_map(zero, m)
    >>> float(z.kernel.value.sum()), z is m, z.bias is m.bias
    (0.0, False, True)
  """
  if not _graph_mode.resolve(graph)[0]:
    check_tree_mode(walk(node, leaf_root=True), "recursive_map")
  memo: dict[int, Any] = {}
  trace = current_trace()

  def done(x: Any, path: tuple, new: Any) -> Any:
    out = memo[id(x)] = f(path, new)
    return out

  def enter(path: tuple, x: Any) -> tuple[Any, list | None]:
    """``(value, None)`` for an object mapped at once, else ``(None, frame)``."""
    if id(x) in memo:
      return memo[id(x)], None
    impl = node_impl(type(x))
    if impl is not None:
      new = memo[id(x)] = impl.create(type(x), impl.metadata(x), trace)
      return None, [x, path, list(impl.children(x)), [], new, impl]
    if isinstance(x, Variable):
      return done(x, path, x), None  # shared, as flax.nnx's recursive_map does
    if type(x) in (list, tuple):
      return None, [x, path, list(enumerate(x)), [], None, None]
    if type(x) is dict:
      return None, [x, path, list(x.items()), [], None, None]
    return done(x, path, x), None

  def leave(frame: list) -> Any:
    x, path, items, mapped, new, impl = frame
    if impl is not None:
      impl.set_children(new, list(zip([k for k, _ in items], mapped)))
    elif type(x) is dict:
      new = dict(zip([k for k, _ in items], mapped))
    else:
      new = type(x)(mapped)
    return done(x, path, new)

  # an explicit stack of frames (graphs may nest at any depth), children in order
  value, top = enter((), node)
  if top is None:
    return value
  stack = [top]
  while True:
    frame = stack[-1]
    i = len(frame[3])
    if i < len(frame[2]):
      k, v = frame[2][i]
      value, sub = enter((*frame[1], k), v)
      if sub is None:
        frame[3].append(value)
      else:
        stack.append(sub)
      continue
    stack.pop()
    value = leave(frame)
    if not stack:
      return value
    stack[-1][3].append(value)


def _rules(rule, name: str) -> list:
  if rule is None:
    return []
  if isinstance(rule, int | tuple):
    rule = {...: rule}
  return [(flt, to_predicate(flt), v) for flt, v in rule.items()]


def _matches(pred, path: tuple, stream: RngStream) -> bool:
  return pred((*path, "key"), stream.key) and pred((*path, "count"), stream.count)


def _stream_rule(path, stream, split, broadcast, fork):
  """The one rule (``split``/``broadcast``/``fork``) that applies to a stream, or None."""
  found = {}
  for kind, rules in (("split", split), ("broadcast", broadcast)):
    for flt, pred, v in rules:
      if _matches(pred, path, stream):
        found[kind] = (flt, v)
        break
  for flt, pred in fork:
    if _matches(pred, path, stream):
      found["fork"] = (flt, None)
      break
  specific = [k for k, (flt, _) in found.items() if flt is not Ellipsis and flt is not True]
  if len(specific) > 1:
    lines = ", ".join(f"{k} (filter {filter_name(flt)})" for k, (flt, _) in found.items())
    raise ValueError(
      f"with_rngs: the RngStream at path {path} matches multiple rules: {lines}. Fix:"
      " make the split/broadcast/fork filters disjoint."
    )
  for kind in ("split", "broadcast", "fork"):
    if kind in found:
      return kind, found[kind][1]
  return None


def with_rngs(
  node: Any = _MISSING,
  /,
  *,
  split: Any = None,
  fork: Filter | Sequence[Filter] | None = None,
  broadcast: Any = None,
  only: Filter = True,
  graph: bool | None = None,
  graph_updates: bool | None = None,
) -> Any:
  """A copy of ``node`` whose RngStreams are split, broadcast or forked.

  The original streams advance by one draw each when they are used to make a
  new stream; their keys are not replaced.

  Args:
    node: an Rngs, Module, or pytree holding RngStreams; omit it to get a
      decorator that applies the rules to a function's arguments.
    split: an int/shape for every stream, or a ``{filter: shape}`` mapping
      (first match wins): the new stream holds keys of that shape.
    fork: a filter (or sequence of filters) of streams to fork: the new stream
      has a fresh scalar key.
    broadcast: like ``split``, but the new key is one key repeated.
    only: a filter restricting which streams are considered.
    graph: accepted for flax compatibility (sharing is always kept).
    graph_updates: must not be True together with ``graph=True``.

  Returns:
    The new structure (or a decorator when ``node`` is omitted).

  Raises:
    ValueError: if a stream matches two different specific rules.
    NotImplementedError: if ``graph`` and ``graph_updates`` are both True.

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(params=0, dropout=1)
    >>> new = nnx.with_rngs(rngs, split={"params": 4}, fork=..., graph_updates=False)
    >>> new.params.key.shape, new.dropout.key.shape, rngs.params.key.shape
    ((4,), (), ())
  """
  graph, graph_updates = _graph_mode.resolve(graph, graph_updates)
  if graph and graph_updates:
    raise NotImplementedError(
      "with_rngs: graph=True with graph_updates=True is not supported. Fix: pass"
      " graph_updates=False (the default in tree mode)."
    )
  if node is _MISSING:

    def decorator(f):
      @functools.wraps(f)
      def wrapper(*args, **kwargs):
        args, kwargs = with_rngs(
          (args, kwargs),
          split=split,
          fork=fork,
          broadcast=broadcast,
          only=only,
          graph=graph,
          graph_updates=False,
        )
        return f(*args, **kwargs)

      return wrapper

    return decorator

  split_rules = _rules(split, "split")
  broadcast_rules = _rules(broadcast, "broadcast")
  forks = (
    []
    if fork is None
    else [fork]
    if isinstance(fork, str) or not isinstance(fork, Sequence)
    else fork
  )
  fork_rules = [(flt, to_predicate(flt)) for flt in forks]
  only_pred = to_predicate(only)

  def update(path, x):
    if isinstance(x, RngStream) and _matches(only_pred, path, x):
      rule = _stream_rule(path, x, split_rules, broadcast_rules, fork_rules)
      if rule is not None:
        kind, value = rule
        return x.fork() if kind == "fork" else getattr(x, kind)(value)
    return x

  return _map_with_originals(update, node)


def _map_with_originals(update, node):
  """``recursive_map`` where ``update`` draws from the *original* streams."""
  originals = {path: obj for path, obj in iter_graph(node) if isinstance(obj, RngStream)}
  if isinstance(node, RngStream):
    originals[()] = node

  def f(path, x):
    if isinstance(x, RngStream) and path in originals:
      new = update(path, originals[path])
      return x if new is originals[path] else new
    return x

  return recursive_map(f, node)


def fork_rngs(
  node: Any = _MISSING,
  /,
  *,
  split: Any = None,
  graph: bool | None = None,
  graph_updates: bool | None = None,
) -> Any:
  """Forks the RngStreams in ``node``: each gets a fresh key from its next draw.

  In graph mode with graph updates (the defaults) the streams are forked in
  place and a :class:`SplitBackups` is returned (``nnx.restore_rngs`` puts the
  old keys back); otherwise a forked copy of ``node`` is returned and
  ``node`` only sees its streams advance.

  Args:
    node: an Rngs, Module or pytree holding RngStreams; omit for a decorator.
    split: None (plain fork), an int/shape for every stream, or a
      ``{filter: shape or None}`` mapping.
    graph: graph mode (default from :func:`set_graph_mode`).
    graph_updates: fork in place (default from :func:`set_graph_updates`).

  Returns:
    ``SplitBackups`` (in place), the forked copy, or a decorator.

  Raises:
    TraceContextError: if the streams belong to another JAX trace.

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(0)
    >>> backups = nnx.fork_rngs(rngs)
    >>> nnx.restore_rngs(backups); int(rngs.default.count.value)
    1
  """
  graph, graph_updates = _graph_mode.resolve(graph, graph_updates)
  if node is _MISSING:

    def decorator(f):
      @functools.wraps(f)
      def wrapper(*args, **kwargs):
        if graph and graph_updates:
          with fork_rngs((args, kwargs), split=split):
            return f(*args, **kwargs)
        args, kwargs = fork_rngs((args, kwargs), split=split, graph_updates=False)
        return f(*args, **kwargs)

      return wrapper

    return decorator
  rules = _rules({...: None} if split is None else split, "split")

  def forked(path, stream):
    for _, pred, v in rules:
      if _matches(pred, path, stream):
        return stream.fork(v)
    return stream

  if not (graph and graph_updates):
    return _map_with_originals(forked, node)
  backups = []
  for path, stream in _unique_streams(node):
    new = forked(path, stream)
    if new is not stream:
      backups.append((stream, stream.key.value, stream.count.value))
      stream.key.value, stream.count.value = new.key.value, new.count.value
  return _rng_split.SplitBackups(backups)


def _unique_streams(node):
  if isinstance(node, RngStream):
    return [((), node)]
  return [(p, s) for p, s in iter_graph(node) if isinstance(s, RngStream)]


def split_rngs(
  node: Any = _MISSING,
  /,
  *,
  splits: int | tuple[int, ...],
  only: Filter = ...,
  squeeze: bool = False,
  graph: bool | None = None,
  graph_updates: bool | None = None,
) -> Any:
  """``nnx.split_rngs`` with flax's ``graph=``/``graph_updates=`` keywords.

  In graph mode with graph updates (the defaults) it splits in place and
  returns ``SplitBackups`` (see :func:`nnx_eqx.transforms.split_rngs`);
  otherwise it returns a copy of ``node`` whose selected streams are split.

  Raises:
    ValueError: if ``squeeze`` is used with ``splits != 1``.

  Example:
    >>> import nnx_eqx as nnx
    >>> rngs = nnx.Rngs(0)
    >>> new = nnx.split_rngs(rngs, splits=3, graph_updates=False)
    >>> new.default.key.shape, rngs.default.key.shape
    ((3,), ())
  """
  graph, graph_updates = _graph_mode.resolve(graph, graph_updates)
  if graph and graph_updates:
    args = () if node is _MISSING else (node,)
    return _rng_split.split_rngs(*args, splits=splits, only=only, squeeze=squeeze)
  if node is _MISSING:
    return with_rngs(split={only: splits}, graph=graph, graph_updates=False)
  return with_rngs(node, split={only: splits}, graph=graph, graph_updates=False)


def reseed(
  node: Any,
  /,
  *,
  graph: bool | None = None,
  policy: str | Callable[[tuple, jax.Array, tuple], jax.Array] = "scalars_only",
  **stream_keys: Any,
) -> None:
  """Resets, in place, the key (and zeroes the count) of the named streams.

  Args:
    node: a Module, Rngs or pytree holding RngStreams.
    graph: accepted for flax compatibility.
    policy: ``"scalars_only"`` (non-scalar keys raise), ``"match_shape"``
      (the new key is split to the stream's key shape) or a callable
      ``(path, key, shape) -> key``.
    **stream_keys: stream name to new seed (int or key).

  Raises:
    ValueError: for a non-scalar stream key under ``"scalars_only"``, or an
      unknown policy.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=1))
    >>> y1 = drop(jnp.ones(8)); nnx.reseed(drop, dropout=1); y2 = drop(jnp.ones(8))
    >>> bool((y1 == y2).all())
    True
  """
  if policy == "scalars_only":
    policy = _scalars_only
  elif policy == "match_shape":
    policy = _match_shape
  elif not callable(policy):
    raise ValueError(
      f'reseed: policy must be "scalars_only", "match_shape" or a callable, got {policy!r}.'
    )
  fresh = Rngs(**stream_keys)
  for path, stream in _unique_streams(node):
    if stream.tag in stream_keys:
      key = policy(path, fresh[stream.tag](), tuple(stream.key.shape))
      stream.key.value = key
      stream.count.value = jnp.zeros(key.shape, jnp.uint32)


def _scalars_only(path, key, shape):
  if shape != ():
    raise ValueError(
      f"reseed: the stream at {path!r} has a key of shape {shape}. Fix: pass"
      ' policy="match_shape" to split the new key to that shape.'
    )
  return key


def _match_shape(path, key, shape):
  return key if shape == () else jax.random.split(key, shape)

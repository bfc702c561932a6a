"""Split and merge contexts: several splits (merges) that share one index.

Inside ``split_context()``, each ``ctx.split`` refers to objects an earlier
split of the same context already met by index (its GraphDef holds a
``NodeRef`` and its State omits them), and ``merge_context()`` resolves those
references to the objects its earlier merges built, so sharing survives
across separate calls.

``update_context(tag)`` links an outer split, an inner merge, an inner split
and an outer merge that use the same tag (the pattern of a lifted
transform): the inner split records each object's index in the outer graph,
and the outer merge updates the outer objects in place instead of creating
new ones.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

from .._errors import UpdateContextError
from ..state._filters import Filter
from ..tracing._traces import current_trace
from ..variables._ref_placeholders import outer_ref_ids, resolve_placeholders, to_placeholders
from ..variables._variables import Variable
from ..walk._graphdef import GraphDef
from ..walk._walk import WalkSeed, unflatten
from ._flatten import FlatState, RefMap, walk_in_context
from ._functional import leaves_of, states_of

F = TypeVar("F", bound=Callable[..., Any])


class UpdateContext:
  """What one ``update_context(tag)`` remembers between its phases (as flax.nnx's
  ``UpdateContext``): the outer split's objects by index and, after the inner
  merge, which outer object each inner object stands for.

  Raises:
    UpdateContextError: from :func:`current_update_context` when none is active.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.update_context("demo"):
    ...   ctx = nnx.current_update_context("demo")
    >>> type(ctx).__name__, ctx.tag
    ('UpdateContext', 'demo')
  """

  __slots__ = ("tag", "outer_nodes", "inner_to_outer")

  def __init__(self, tag: Hashable = None):
    self.tag = tag
    self.outer_nodes: list | None = None  # outer split: objects by outer index
    self.inner_to_outer: RefMap | None = None  # inner merge: inner object -> outer index


class _Local(threading.local):
  def __init__(self):
    self.update_stacks: dict[Hashable, list[UpdateContext]] = {}


_LOCAL = _Local()


def _current(tag: Hashable | None) -> UpdateContext | None:
  if tag is None:
    return None
  stack = _LOCAL.update_stacks.get(tag)
  return stack[-1] if stack else None


def current_update_context(tag: Hashable) -> UpdateContext:
  """The innermost active :class:`UpdateContext` of ``tag`` (as flax.nnx).

  Args:
    tag: the tag given to ``update_context``.

  Returns:
    The context object.

  Raises:
    UpdateContextError: if no ``update_context(tag)`` is active.

  Example:
    >>> import nnx_eqx as nnx
    >>> with nnx.update_context("t") as outer:
    ...   nnx.current_update_context("t").tag
    't'
  """
  ctx = _current(tag)
  if ctx is None:
    raise UpdateContextError(
      f"No update context found for tag {tag!r}. Fix: call it inside"
      f" `with nnx.update_context({tag!r}):`."
    )
  return ctx


class SplitContext:
  """Splits that share one index (see :func:`split_context`)."""

  def __init__(self, update: UpdateContext | None):
    self._seed = WalkSeed()
    self._update = update

  def _walk(self, node: Any):
    w = walk_in_context(node, self._seed)
    gd = w.graphdef
    upd = self._update
    if upd is not None and upd.inner_to_outer is not None:
      inner = upd.inner_to_outer
      gd = gd.with_outer(tuple(inner.get(obj) for obj in self._seed.nodes))
    return w, gd

  def _outputs(self, tree: Any) -> Any:
    """In an inner split, ref-mode Variables hold update placeholders (as flax)."""
    upd = self._update
    if upd is None or upd.inner_to_outer is None or upd.outer_nodes is None:
      return tree
    return to_placeholders(tree, outer_ref_ids(upd.outer_nodes))

  def split(self, node: Any, *filters: Filter) -> tuple:
    """Like ``nnx.split``; objects met by earlier splits of this context are
    references in the GraphDef and absent from the States. In the inner split
    of an ``update_context``, ref-mode Variables hold ``graphlib.NoUpdate``
    (their Ref came from outside) or ``graphlib.ArrayRefOutput`` (made inside).

    Raises:
      FilterError: if the filters do not cover every leaf.
    """
    w, gd = self._walk(node)
    buckets = (
      [range(len(w.slots))] if not filters else w.partition_indices(filters, exhaustive=True)
    )
    return (gd, *self._outputs(states_of(w, buckets, current_trace())))

  def flatten(self, node: Any, *, with_paths: bool = True) -> tuple:
    """Like ``nnx.graphlib.flatten`` within this context."""
    w, gd = self._walk(node)
    leaves = self._outputs(w.leaf_objects())
    return gd, FlatState(zip(w.paths, leaves)) if with_paths else leaves


class MergeContext:
  """Merges that share one node table (see :func:`merge_context`)."""

  def __init__(self, update: UpdateContext | None, inner: bool | None):
    self._table: list = []
    self._update = update
    self._inner = inner

  def merge(self, graphdef: GraphDef, state: Any, /, *states: Any) -> Any:
    """Like ``nnx.merge``; references to objects built by earlier merges of
    this context resolve to them.

    Raises:
      StateMismatchError: if the states do not fit the GraphDef.
    """
    return self.unflatten(graphdef, leaves_of(graphdef, (state, *states)))

  def unflatten(self, graphdef: GraphDef, leaves: Any) -> Any:
    """Like ``nnx.graphlib.unflatten`` within this context."""
    if isinstance(leaves, FlatState):
      leaves = list(leaves.leaves)
    reuse = None
    upd = self._update
    if upd is not None and self._inner is False and upd.outer_nodes is not None:
      outer = upd.outer_nodes
      if graphdef.outer is not None:
        reuse = {i: outer[o] for i, o in enumerate(graphdef.outer) if o is not None}
    if not reuse:
      return unflatten(graphdef, leaves, reuse=reuse, table=self._table)
    saved = {id(v): v._value for v in reuse.values() if isinstance(v, Variable)}
    out = unflatten(graphdef, leaves, reuse=reuse, table=self._table)
    resolve_placeholders(self._table, saved)
    return out


@contextlib.contextmanager
def split_context(ctxtag: Hashable | None = None) -> Iterator[SplitContext]:
  """A context whose splits share one index.

  Args:
    ctxtag: the tag of an enclosing :func:`update_context`, if any.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> with nnx.split_context() as ctx:
    ...   g1, s1 = ctx.split(m)
    ...   g2, s2 = ctx.split(m)
    >>> type(g2.nodes[0]).__name__, len(s2)
    ('NodeRef', 0)
  """
  upd = _current(ctxtag)
  ctx = SplitContext(upd)
  yield ctx
  if upd is not None and upd.inner_to_outer is None:
    upd.outer_nodes = ctx._seed.nodes


@contextlib.contextmanager
def merge_context(
  ctxtag: Hashable | None = None, inner: bool | None = None
) -> Iterator[MergeContext]:
  """A context whose merges share one node table.

  Args:
    ctxtag: the tag of an enclosing :func:`update_context`, if any.
    inner: True for the merge inside a transform (its objects are then
      remembered for the inner split), False for the merge back outside
      (which updates the outer objects in place).

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> with nnx.split_context() as ctx:
    ...   g1, s1 = ctx.split(m)
    ...   g2, s2 = ctx.split(m)
    >>> with nnx.merge_context() as ctx:
    ...   a, b = ctx.merge(g1, s1), ctx.merge(g2, s2)
    >>> a is b
    True
  """
  upd = _current(ctxtag)
  ctx = MergeContext(upd, inner)
  yield ctx
  if upd is not None and inner:
    upd.inner_to_outer = RefMap((obj, i) for i, obj in enumerate(ctx._table) if obj is not None)


class update_context:  # noqa: N801 (a context manager, named as in flax)
  """Links split/merge contexts with the same tag into an in-place update.

  Use as a context manager or a decorator. Within it, the first
  ``split_context(tag)`` is the outer split, ``merge_context(tag, True)`` the
  inner merge, the next ``split_context(tag)`` the inner split, and
  ``merge_context(tag, False)`` the outer merge, which returns the outer
  objects themselves, updated.

  Raises:
    UpdateContextError: on exit, if the context was already closed.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> with nnx.update_context("t"):
    ...   with nnx.split_context("t") as ctx:
    ...     g, s = ctx.split(m)
    ...   with nnx.merge_context("t", True) as ctx:
    ...     inner = ctx.merge(g, s)
    ...   with nnx.split_context("t") as ctx:
    ...     g, s = ctx.split(inner)
    ...   with nnx.merge_context("t", False) as ctx:
    ...     out = ctx.merge(g, s)
    >>> out is m
    True
  """

  def __init__(self, tag: Hashable):
    self.tag = tag

  def __enter__(self) -> update_context:
    _LOCAL.update_stacks.setdefault(self.tag, []).append(UpdateContext(self.tag))
    return self

  def __exit__(self, *exc: Any) -> None:
    stack = _LOCAL.update_stacks.get(self.tag)
    if not stack:
      raise UpdateContextError(
        f"update_context({self.tag!r}) exited without being entered. Fix: use it"
        " in a `with` statement or as a decorator."
      )
    stack.pop()
    if not stack:
      del _LOCAL.update_stacks[self.tag]

  def __call__(self, fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      with update_context(self.tag):
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]

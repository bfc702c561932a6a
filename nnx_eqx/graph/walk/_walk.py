"""Walking graphs into (GraphDef, leaf slots) and rebuilding them from leaves.

Nodes and Variables are visited once each, depth first with attributes in
sorted order; a second encounter of the same object becomes a reference to
its index, so a GraphDef records sharing and cycles and the flat list of
leaves holds each distinct Variable once.

Walks are cached per root: while no structural change happens anywhere (see
``_version``), walking the same root again reuses the GraphDef and the flat
list of leaf slots, so only the current values are read.
"""

from __future__ import annotations

import gc
import operator
from typing import Any

from .. import _version
from .._errors import GraphStructureError
from ..state._filters import to_predicate
from ..state._state import State, check_catch_all_last, non_exhaustive_error
from ..tracing import _lost_updates
from ..tracing._traces import current_trace
from ..variables._hijax import HijaxVariable
from ..variables._variables import Variable, new_variable
from . import _node_types
from ._graphdef import GraphDef, StaticValue, _metadata_from_def, _var_metadata_def
from ._links import LinkedPaths, path_of
from ._node_types import LEAF, MAP, NODE, REF, SEQ, STATIC, VAR, node_impl
from ._pytree_nodes import NOT_PYTREE, PytreeItemSlot, PytreeKind, is_ref, pytree_children

_LEAF_DEF = (LEAF,)
_PENDING = (STATIC,)
"""The definition of a static container until an enclosing frame freezes it."""
_GET_VALUE = operator.itemgetter("_value")


# --------------------------------------------------------------------------
# Slots: where a leaf lives, so that values can be read and written back
# --------------------------------------------------------------------------
class _NodeKeySlot:
  """A raw array stored under ``key`` of a graph node."""

  __slots__ = ("obj", "impl", "key")

  def __init__(self, obj, impl, key):
    self.obj, self.impl, self.key = obj, impl, key

  @property
  def _value(self):
    for k, v in self.impl.children(self.obj):
      if k == self.key:
        return v
    raise KeyError(self.key)

  @_value.setter
  def _value(self, v):
    self.impl.set_key(self.obj, self.key, v)


class _DictSlot:
  """A raw array stored as a module attribute (in its ``__dict__``)."""

  __slots__ = ("d", "key")

  def __init__(self, d, key):
    self.d, self.key = d, key

  @property
  def _value(self):
    return self.d[self.key]

  @_value.setter
  def _value(self, v):
    self.d[self.key] = v


class _ItemSlot:
  """A raw array inside a tuple/list/dict held at ``parent``."""

  __slots__ = ("parent", "key")

  def __init__(self, parent, key):
    self.parent, self.key = parent, key

  @property
  def _value(self):
    container = self.parent._value
    if type(self.key) is str and hasattr(container, "_fields"):
      return getattr(container, self.key)
    return container[self.key]

  @_value.setter
  def _value(self, v):
    container = self.parent._value
    if hasattr(container, "_fields"):  # a namedtuple, keyed by field name
      self.parent._value = container._replace(**{self.key: v})
    elif isinstance(container, tuple):
      items = list(container)
      items[self.key] = v
      self.parent._value = tuple(items)
    else:
      container[self.key] = v


class _RootSlot:
  __slots__ = ("_value",)

  def __init__(self, value):
    self._value = value


# --------------------------------------------------------------------------
# Walking (split direction)
# --------------------------------------------------------------------------
class Walk:
  """The result of walking a graph: GraphDef plus per-leaf and per-node facts.

  Attributes:
    graphdef: the GraphDef.
    slots: per leaf, an object whose ``_value`` reads/writes the leaf value
      (the Variable itself for Variables).
    paths: per leaf, its first path.
    nodes: per node index, the object (Modules and Variables).
    owners: per leaf, ``(owner_node, key)`` of its first occurrence.
    leaf_links: per leaf, the link (see ``_links``) of the node or container
      holding it (None: the root).
    node_paths: per node index, its first path (spelled out when read: see
      ``_links``; ``node_links`` holds the links themselves).
    value_dicts: when every leaf is a Variable, their ``__dict__``s, through
      which values are read and written without attribute lookups; else None.
    checked: the ``_lost_updates.STALE_EPOCH`` at which no slot was stale.
  """

  __slots__ = (
    "graphdef",
    "slots",
    "paths",
    "nodes",
    "owners",
    "leaf_links",
    "node_links",
    "epoch",
    "_path_index",
    "_filter_cache",
    "refs",
    "value_dicts",
    "shared",
    "checked",
    "__weakref__",
  )

  def __init__(self, graphdef, slots, paths, nodes, owners, leaf_links, node_links, epoch):
    self.graphdef = graphdef
    self.slots = slots
    self.paths = paths
    self.nodes = nodes
    self.owners = owners
    self.leaf_links = leaf_links
    self.node_links = node_links
    self.epoch = epoch
    self._path_index: dict | None = None
    self._filter_cache: dict = {}
    self.refs: tuple = ()
    self.shared: tuple | None = None  # (first path, second path, object) of a repeat
    self.checked = -1  # the stale-mark epoch at which no slot was stale (see ``walk``)
    self.value_dicts: list | None = (
      [s.__dict__ for s in slots] if all(isinstance(s, Variable) for s in slots) else None
    )

  def __reduce__(self):
    # A cached walk lives in its root's ``__dict__`` and holds slots of the
    # objects it walked; a pickled or deep-copied root must walk itself again.
    return _stale_walk, ()

  @property
  def node_paths(self) -> LinkedPaths:
    """Per node index, its first path."""
    return LinkedPaths(self.node_links)

  def leaves(self) -> list:
    """The current leaf values, in order."""
    if self.value_dicts is not None:
      return list(map(_GET_VALUE, self.value_dicts))
    return [s._value for s in self.slots]

  def set_leaves(self, index, values) -> None:
    """Writes ``values`` into the leaves at ``index`` (no trace check: for
    updates computed by a lifted transform on the caller's behalf)."""
    vd = self.value_dicts
    if vd is not None:
      for i, v in zip(index, values):
        vd[i]["_value"] = v
      return
    slots = self.slots
    for i, v in zip(index, values):
      s = slots[i]
      if isinstance(s, Variable):
        s.__dict__["_value"] = v
      else:
        s._value = v

  def leaf_objects(self) -> list:
    """Per leaf, what filters see: the Variable, or the raw array."""
    return [s if isinstance(s, Variable) else s._value for s in self.slots]

  def path_index(self) -> dict:
    if self._path_index is None:
      self._path_index = {p: i for i, p in enumerate(self.paths)}
    return self._path_index

  def partition_indices(self, filters: tuple, exhaustive: bool) -> list[list[int]]:
    """Leaf indices matched by each filter (first match wins), cached per filters."""
    key = (filters, exhaustive)
    try:
      cached = self._filter_cache.get(key)
    except TypeError:  # unhashable filter
      cached, key = None, None  # type: ignore[assignment]
    if cached is not None:
      return cached
    if exhaustive:
      check_catch_all_last(filters)
    preds = [to_predicate(f) for f in filters]
    buckets: list[list[int]] = [[] for _ in preds]
    missing = []
    objs = self.leaf_objects()
    for i, (path, obj) in enumerate(zip(self.paths, objs)):
      for b, p in enumerate(preds):
        if p(path, obj):
          buckets[b].append(i)
          break
      else:
        missing.append((path, obj))
    if exhaustive and missing:
      raise non_exhaustive_error(missing, filters)
    if key is not None:
      self._filter_cache[key] = buckets
    return buckets


class _StaleWalk:
  """What a cached :class:`Walk` becomes when its holder is pickled or copied:
  its epoch never matches, so the next walk of the holder starts afresh."""

  __slots__ = ()
  epoch = -1


_STALE = _StaleWalk()


def _stale_walk() -> _StaleWalk:
  return _STALE


class _Frame:
  """A container or graph node being walked: its children, the definitions of
  those done so far, and how to reach a raw array stored under one of its keys."""

  __slots__ = (
    "tag",
    "value",
    "link",
    "path",
    "owner",
    "key",
    "items",
    "i",
    "subs",
    "lazy",
    "d",
    "impl",
    "pending",
  )

  def __init__(self, tag, value, link, owner, key, items, lazy, d, impl):
    self.tag, self.value, self.link, self.owner, self.key = tag, value, link, owner, key
    self.items, self.i, self.subs, self.lazy, self.d, self.impl = items, 0, [], lazy, d, impl
    self.path = None
    self.pending = False  # whether a child is a static container not yet frozen

  def slot(self, k):
    """The slot of a raw array stored under ``k`` of this frame."""
    if self.tag != NODE:
      if self.impl is not None:  # a JAX pytree (``impl`` is its PytreeKind)
        return PytreeItemSlot(self.lazy, k)
      return _ItemSlot(self.lazy, k)
    if self.d is not None:
      return _DictSlot(self.d, k)
    return _NodeKeySlot(self.value, self.impl, k)

  def finish(self) -> tuple:
    """This frame's definition; a container with only static children is
    :data:`_PENDING`: frozen (see ``_freeze``) by the first enclosing frame that
    is not static, so a deep static value is frozen once, not once per level."""
    subs = self.subs
    if self.tag == NODE:
      keys = [k for k, _ in self.items]
      obj, index = self.value, self.lazy  # a node frame keeps its index in ``lazy``
      return (NODE, type(obj), index, tuple(zip(keys, self.frozen())), self.impl.metadata(obj))
    for s in subs:
      if s[0] != STATIC:
        if self.tag == SEQ:
          return (SEQ, type(self.value), tuple(self.frozen()))
        t = type(self.value) if self.impl is None else self.impl
        return (MAP, t, tuple(zip([k for k, _ in self.items], self.frozen())))
    return _PENDING

  def frozen(self) -> list:
    """The children's definitions, static containers among them frozen."""
    if not self.pending:
      return self.subs
    return [
      (STATIC, StaticValue(v)) if s is _PENDING else s for s, (_, v) in zip(self.subs, self.items)
    ]


class _Walker:
  """Walks a graph depth first with an explicit stack (any depth, no recursion)."""

  __slots__ = (
    "index",
    "nodes",
    "slots",
    "paths",
    "owners",
    "node_links",
    "leaf_links",
    "keys",
    "shared",
    "holder",
    "depth",
  )

  def __init__(self):
    self.index: dict[int, int] = {}
    self.shared: tuple | None = None  # (index, link) of the first repeated reference
    self.nodes: list = []
    self.slots: list = []
    self.paths: list = []
    self.owners: list = []
    self.node_links: list = []
    self.leaf_links: list = []  # per leaf, the link of its parent
    self.keys: list = []  # the path of the frame being walked
    self.holder: Any = None
    self.depth = 0  # the deepest nesting of nodes/containers met

  def walk(self, root) -> tuple:
    """The definition tuple of ``root``."""
    self.holder = _RootSlot(root)
    top = self.enter(root, None, None, None, None)
    if type(top) is not _Frame:
      return top
    stack = [top]
    push, enter = stack.append, self.enter
    keys = self.keys
    f = top
    depth = 1
    while True:
      items, i = f.items, f.i
      if i < len(items):
        f.i = i + 1
        k, v = items[i]
        if f.tag == NODE:
          d = enter(v, f.value, k, f, k)
        else:
          d = enter(v, f.owner, f.key, f, k)
        if type(d) is _Frame:
          push(d)
          keys.append(k)
          f = d
          if len(stack) > depth:
            depth = len(stack)
        else:
          f.subs.append(d)
        continue
      stack.pop()
      d = f.finish()
      if not stack:
        self.depth = depth
        return (STATIC, StaticValue(f.value)) if d is _PENDING else d
      keys.pop()
      f = stack[-1]
      if d is _PENDING:
        f.pending = True
      f.subs.append(d)

  def register(self, obj, link) -> Any:
    """``(REF, index)`` if ``obj`` (a Variable or graph node) was met before (the first
    such link is kept for tree mode's error), else its new index."""
    i = self.index.get(id(obj))
    if i is not None:
      if self.shared is None:
        self.shared = (i, link)
      return (REF, i)
    i = len(self.nodes)
    self.index[id(obj)] = i
    self.nodes.append(obj)
    self.node_links.append(link)
    return i

  def leaf_path(self, parent: _Frame | None, k) -> tuple:
    """The path of a leaf found under ``k`` of ``parent`` (the frame on top of
    the stack): O(depth), copied from the stack's keys in one go."""
    if parent is None:
      self.leaf_links.append(None)
      return ()
    self.leaf_links.append(parent.link)
    path = parent.path
    if path is None:
      path = parent.path = tuple(self.keys)
    return path + (k,)

  def enter(self, value, owner, key, parent: _Frame | None, k) -> Any:
    """The definition of ``value`` (found under key ``k`` of ``parent``) if it has
    no children to walk, else a frame. A node is known by its link (one tuple,
    see ``_links``); only leaves get their path spelled out (for State keys)."""
    if isinstance(value, Variable):
      link = None if parent is None else (parent.link, k)
      i = self.register(value, link)
      if type(i) is tuple:
        return i
      self.slots.append(value)
      self.paths.append(self.leaf_path(parent, k))
      self.owners.append((owner, key))
      return (VAR, type(value), i, _var_metadata_def(value._metadata))
    t = type(value)
    impl = node_impl(t)
    if impl is not None:
      link = None if parent is None else (parent.link, k)
      i = self.register(value, link)
      if type(i) is tuple:
        return i
      d = getattr(value, "__dict__", None)
      if d is not None and "_nnx_trace" in d:
        d["_nnx_in_graph"] = True
      items = impl.children(value)
      if type(items) is not list:
        items = list(items)
      if impl is not _MODULE_IMPL_HOLDER[0]:
        d = None
      return _Frame(NODE, value, link, owner, key, items, i, d, impl)
    if isinstance(value, _node_types.LEAF_TYPES):
      self.add_leaf(owner, key, parent, k)
      return _LEAF_DEF
    if isinstance(value, tuple) and hasattr(value, "_fields"):
      # a namedtuple: keyed by field name (JAX's key path), in sorted order as a dict
      if not value:
        return (STATIC, StaticValue(value))
      items = [(f, getattr(value, f)) for f in sorted(value._fields)]
      link = None if parent is None else (parent.link, k)
      return _Frame(MAP, value, link, owner, key, items, self.lazy(parent, k), None, None)
    if t is tuple or t is list:
      if not value:
        return (STATIC, StaticValue(value))
      link = None if parent is None else (parent.link, k)
      return _Frame(
        SEQ, value, link, owner, key, list(enumerate(value)), self.lazy(parent, k), None, None
      )
    if t is dict or t is State:  # a State held as data is a container of its Variables
      if not value:
        return (STATIC, StaticValue(value))
      items = [(j, value[j]) for j in _sorted_keys(value)]
      link = None if parent is None else (parent.link, k)
      return _Frame(MAP, value, link, owner, key, items, self.lazy(parent, k), None, None)
    if value is None or t in NOT_PYTREE:
      return (STATIC, StaticValue(value))
    if is_ref(value):  # a raw jax.Ref: a leaf known by identity (see ``_pytree_nodes``)
      i = self.register(value, None if parent is None else (parent.link, k))
      if type(i) is tuple:
        return i
      self.add_leaf(owner, key, parent, k)
      return (LEAF, i)
    found = pytree_children(value)  # another JAX pytree: a container of its children
    if found is not None:
      link = None if parent is None else (parent.link, k)
      return _Frame(MAP, value, link, owner, key, found[1], self.lazy(parent, k), None, found[0])
    return (STATIC, StaticValue(value))

  def add_leaf(self, owner, key, parent: _Frame | None, k) -> None:
    """Records a raw leaf found under ``k`` of ``parent`` (None: the root)."""
    self.slots.append(self.holder if parent is None else parent.slot(k))
    self.paths.append(self.leaf_path(parent, k))
    self.owners.append((owner, key))

  def lazy(self, parent: _Frame | None, k) -> _Lazy:
    """A slot for a container's own position, made only if a raw array in it is written."""
    if parent is None:
      holder = self.holder
      return _Lazy(lambda: holder)
    return _Lazy(lambda: parent.slot(k))


# The Module NodeImpl, set by _module to take the fast attribute path.
_MODULE_IMPL_HOLDER: list = [None]


class _Lazy:
  __slots__ = ("make", "slot")

  def __init__(self, make):
    self.make, self.slot = make, None

  @property
  def _value(self):
    if self.slot is None:
      self.slot = self.make()
    return self.slot._value

  @_value.setter
  def _value(self, v):
    if self.slot is None:
      self.slot = self.make()
    self.slot._value = v


def build_map(t: Any, items: Any) -> Any:
  """A MAP definition's container from ``(key, value)`` pairs: a dict or State, a
  namedtuple (keyed by field name), or a JAX pytree (``t`` is its PytreeKind)."""
  return t(**dict(items)) if type(t) is not PytreeKind and issubclass(t, tuple) else t(items)


def _sorted_keys(d: dict) -> list:
  try:
    return sorted(d)
  except TypeError:
    return sorted(d, key=lambda k: (type(k).__name__, repr(k)))


class _BulkOp:
  """Context for walking/rebuilding whole graphs: pauses the cyclic garbage
  collector, whose full-heap passes would otherwise make building 10k objects
  quadratic in time. (Depth needs nothing: walks and builds use explicit stacks.)

  Use :func:`bulk` to skip it for small graphs, where it costs more than it saves.
  """

  __slots__ = ("gc_was_on",)

  def __enter__(self):
    self.gc_was_on = gc.isenabled()
    if self.gc_was_on:
      gc.disable()

  def __exit__(self, *exc):
    if self.gc_was_on:
      gc.enable()


class _NoOp:
  __slots__ = ()

  def __enter__(self):
    pass

  def __exit__(self, *exc):
    pass


_NO_OP = _NoOp()
BULK_MIN = 64
"""Graphs with fewer objects than this are built without :class:`_BulkOp`: they
are too shallow to hit the recursion limit and too small to trigger a GC pass."""


def bulk(size: int) -> Any:
  """A :class:`_BulkOp` for a graph of ``size`` nodes and leaves, or a no-op
  context when the graph is small."""
  return _BulkOp() if size >= BULK_MIN else _NO_OP


class WalkSeed:
  """Objects met by earlier walks, so that a later walk refers to them by
  index instead of walking them again (for ``nnx.graphlib.split_context``).

  Attributes:
    index: ``id(obj) -> node index`` of every object met so far.
    nodes: the objects, by node index (kept alive while the seed lives).
    node_links: their first paths, as links (see ``_links``).
  """

  __slots__ = ("index", "nodes", "node_links")

  def __init__(self):
    self.index: dict[int, int] = {}
    self.nodes: list = []
    self.node_links: list = []


def walk_uncached(root: Any, leaf_root: bool = False, seed: WalkSeed | None = None) -> Walk:
  """Walks ``root`` (a node, or a tuple/list/dict of nodes) without caching.

  A root that is neither (an array, an int, ...) raises, unless ``leaf_root``:
  then the walk has one leaf, the root itself, at the empty path. With a
  ``seed``, objects it holds become references, and the objects met are added
  to it.
  """
  w = _Walker()
  if seed is not None:
    w.index, w.nodes, w.node_links = seed.index, seed.nodes, seed.node_links
  with _BulkOp():
    defn = w.walk(root)
  holder = w.holder
  if defn[0] == STATIC and leaf_root and type(root) in (list, tuple, dict):
    # a container without leaves: a graph with no leaf (its State is empty)
    gd = GraphDef(defn, (), 0, depth=0)
    return Walk(gd, [], [], [], [], [], [], _version.current())
  if defn[0] in (STATIC, LEAF):
    if not leaf_root:
      raise GraphStructureError(
        f"Expected a Module, Variable or container of them, got {type(root).__name__}."
        " Fix: pass an nnx.Module (or a registered graph node type)."
      )
    gd = GraphDef(_LEAF_DEF, ((),), 0, depth=0)
    return Walk(gd, [holder], [()], [], [(None, None)], [None], [], _version.current())
  gd = GraphDef(defn, tuple(w.paths), len(w.nodes), depth=w.depth)
  out = Walk(
    gd, w.slots, w.paths, w.nodes, w.owners, w.leaf_links, w.node_links, _version.current()
  )
  if w.shared is not None:
    i, link = w.shared
    out.shared = (path_of(w.node_links[i]), path_of(link), w.nodes[i])
  if _lost_updates.PENDING:
    _lost_updates.carried(out.slots)  # their values are read out: pending writes travel on
  return out


def walk(root: Any, leaf_root: bool = False) -> Walk:
  """Walks ``root``, reusing the cached walk while the graph is unchanged.

  A single node caches its walk on itself; a tuple of nodes (the arguments of
  a lifted transform) caches it on its first element, keyed by the identities
  of all elements.
  """
  if _lost_updates.PENDING or _lost_updates.STALE:
    w = _walk(root, leaf_root)
    # their values are read out: pending writes travel on, stale Variables are
    # refused (a cached walk found clean is not checked again until a new mark)
    epoch = _lost_updates.STALE_EPOCH[0]
    if _lost_updates.PENDING or w.checked != epoch:
      _lost_updates.check_flattened(w.slots)
      if _lost_updates.refusing():  # (else nothing was refused: not found clean)
        w.checked = epoch
    return w
  return _walk(root, leaf_root)


def _walk(root: Any, leaf_root: bool) -> Walk:
  epoch = _version._epoch[0]
  if type(root) is tuple and root:
    d = getattr(root[0], "__dict__", None)
    if d is None:
      return walk_uncached(root, leaf_root)
    cache = d.get("_nnx_multi")
    key = tuple(map(id, root))
    if cache is not None:
      # A cached walk holds its root elements (``refs``) alive, so no other live
      # object can have their ids: equal ids mean the same objects.
      w = cache.get(key)
      if w is not None and w.epoch == epoch:
        return w
    else:
      cache = d["_nnx_multi"] = {}
    w = walk_uncached(root)
    w.refs = root
    if len(cache) > 32:
      cache.clear()
    cache[key] = w
    return w
  d = getattr(root, "__dict__", None)
  if d is not None and "_nnx_trace" in d:
    w = d.get("_nnx_walk")
    if w is not None and w.epoch == epoch:
      return w
    w = walk_uncached(root)
    d["_nnx_walk"] = w
    return w
  return walk_uncached(root, leaf_root)


# --------------------------------------------------------------------------
# Rebuilding (merge direction)
# --------------------------------------------------------------------------
def unflatten(
  graphdef: GraphDef,
  leaves,
  reuse: dict[int, Any] | None = None,
  nodes_out: list | None = None,
  table: list | None = None,
) -> Any:
  """Rebuilds the graph of ``graphdef`` from leaf values in walk order.

  Leaves may be raw values or Variables (whose value and metadata are used).
  ``reuse`` maps node indices to existing objects to update in place instead
  of creating new ones. If ``nodes_out`` is a list, it receives the node
  objects by index. ``table`` is a node list shared by several calls (for
  ``nnx.graphlib.merge_context``): references resolve to its entries and the
  new nodes are stored in it.
  """
  if table is None:
    nodes: list = [None] * graphdef.n_nodes
  else:
    table.extend([None] * (graphdef.n_nodes - len(table)))
    nodes = table
  with bulk(graphdef.n_nodes + len(graphdef.paths)):
    builder = graphdef._builder
    if builder is None:
      builder = graphdef._builder = _compile_root(graphdef.defn, graphdef.depth)
    root = builder(iter(leaves).__next__, nodes, current_trace(), reuse or None)
  if nodes_out is not None:
    nodes_out.extend(nodes)
  return root


_DELETE = object()


# --------------------------------------------------------------------------
# Compiled builders: a GraphDef turned once into nested closures, so that
# merge/unflatten is a tight loop (static attributes are set in one update).
# --------------------------------------------------------------------------
_new = object.__new__


def _compile(defn):
  """Turns a definition tuple into a builder ``(next_leaf, nodes, trace, reuse) -> obj``."""
  tag = defn[0]
  if tag == LEAF:
    if len(defn) > 1:  # a raw jax.Ref, known by its node index
      i = defn[1]

      def ref_builder(nxt, nodes, trace, reuse):
        leaf = nxt()
        nodes[i] = leaf = leaf._value if isinstance(leaf, Variable) else leaf
        return leaf

      return ref_builder

    def leaf_builder(nxt, nodes, trace, reuse):
      leaf = nxt()
      return leaf._value if isinstance(leaf, Variable) else leaf

    return leaf_builder
  if tag == STATIC:
    value = defn[1].value
    return lambda nxt, nodes, trace, reuse: value
  if tag == REF:
    ref = defn[1]
    return lambda nxt, nodes, trace, reuse: nodes[ref]
  if tag == VAR:
    return _compile_var(defn)
  if tag == NODE:
    return _compile_node(defn)
  if tag == SEQ:
    t, subs = defn[1], [_compile(s) for s in defn[2]]
    if t is list:
      return lambda nxt, nodes, trace, reuse: [g(nxt, nodes, trace, reuse) for g in subs]
    if t is tuple:
      return lambda nxt, nodes, trace, reuse: tuple([g(nxt, nodes, trace, reuse) for g in subs])
    return lambda nxt, nodes, trace, reuse: t(*[g(nxt, nodes, trace, reuse) for g in subs])
  if tag == MAP:
    t, items = defn[1], [(k, _compile(s)) for k, s in defn[2]]
    if type(t) is not PytreeKind and issubclass(t, tuple):  # a namedtuple
      return lambda nxt, nodes, trace, reuse: t(
        **{k: g(nxt, nodes, trace, reuse) for k, g in items}
      )
    return lambda nxt, nodes, trace, reuse: t([(k, g(nxt, nodes, trace, reuse)) for k, g in items])
  raise AssertionError(defn)


class _KeepVariables(dict):
  """The ``reuse`` of a merge that keeps the States' own Variable objects
  (flax.nnx 0.12's ``merge(copy=False)``): an empty mapping that is true, so
  nodes are new and Variable leaves of the current trace are taken as they
  are. A Variable of another trace (a State closed over inside ``jax.jit``)
  could not be changed there, so it is copied instead, as before."""

  __slots__ = ()

  def __bool__(self) -> bool:
    return True


KEEP_VARIABLES: dict = _KeepVariables()


def _compile_var(defn):
  _, cls, i, mdef = defn
  md0 = _metadata_from_def(mdef)

  def var_builder(nxt, nodes, trace, reuse):
    leaf = nxt()
    c = cls
    if isinstance(leaf, Variable):
      if reuse is KEEP_VARIABLES and leaf.__dict__.get("_trace", trace) == trace:
        nodes[i] = leaf
        return leaf
      value, md = leaf._value, leaf._metadata.copy()
      if type(leaf) is not cls and HijaxVariable in (cls, type(leaf)):
        c = type(leaf)  # a hijax/ordinary state leaf keeps its kind (as flax.nnx)
        reuse = None
    else:
      value, md = leaf, md0.copy()
    v = reuse.get(i) if reuse else None
    if v is None:
      v = new_variable(c, value, md, trace)
    else:
      vd = v.__dict__
      vd["_value"], vd["_metadata"] = value, md
    nodes[i] = v
    return v

  return var_builder


def _compile_node(defn):
  _, cls, i, attrs, meta = defn
  impl = node_impl(cls)
  if impl is _MODULE_IMPL_HOLDER[0]:
    statics = {k: sub[1].value for k, sub in attrs if sub[0] == STATIC}
    dyn = [(k, _compile(sub)) for k, sub in attrs if sub[0] != STATIC]

    def module_builder(nxt, nodes, trace, reuse):
      obj = reuse.get(i) if reuse else None
      if obj is None:
        obj = _new(cls)
        obj.__dict__["_nnx_trace"] = trace
      else:
        impl.clear(obj)
      nodes[i] = obj
      d = obj.__dict__
      d.update(statics)
      for k, g in dyn:
        d[k] = g(nxt, nodes, trace, reuse)
      return obj

    return module_builder
  subs = [(k, _compile(sub)) for k, sub in attrs]

  def node_builder(nxt, nodes, trace, reuse):
    obj = reuse.get(i) if reuse else None
    if obj is None:
      obj = impl.create(cls, meta, trace)
    else:
      impl.clear(obj)
    nodes[i] = obj
    impl.set_children(obj, [(k, g(nxt, nodes, trace, reuse)) for k, g in subs])
    return obj

  return node_builder


# --------------------------------------------------------------------------
# Deep graphs: compiled closures call each other once per level of nesting, so
# a definition nested deeper than ``CLOSURE_DEPTH`` is built by an explicit-stack
# loop over its deep part, which calls compiled closures for its shallow subtrees.
# --------------------------------------------------------------------------
CLOSURE_DEPTH = 100


def _subdefs(d: tuple) -> Any:
  tag = d[0]
  if tag == NODE:
    return [sub for _, sub in d[3]]
  if tag == SEQ:
    return d[2]
  if tag == MAP:
    return [sub for _, sub in d[2]]
  return ()


def _heights(defn: tuple) -> dict[int, int]:
  """``id(sub) -> nesting height`` of every NODE/SEQ/MAP definition in ``defn``."""
  heights: dict[int, int] = {}
  stack: list = [(defn, False)]
  while stack:
    d, done = stack.pop()
    subs = _subdefs(d)
    if done:
      heights[id(d)] = 1 + max((heights.get(id(c), 0) for c in subs), default=0)
    elif subs:
      stack.append((d, True))
      stack.extend((c, False) for c in subs if id(c) not in heights)
    else:
      heights[id(d)] = 0
  return heights


def _compile_root(defn: tuple, depth: int | None = None):
  if depth is not None and depth <= CLOSURE_DEPTH:
    return _compile(defn)
  heights = _heights(defn)
  if heights[id(defn)] <= CLOSURE_DEPTH:
    return _compile(defn)
  return _deep_builder(defn, heights)


def _deep_builder(defn: tuple, heights: dict[int, int]):
  compiled: dict[int, Any] = {}  # shallow subtrees hanging off the deep part
  stack = [defn]
  while stack:
    for c in _subdefs(stack.pop()):
      if heights[id(c)] > CLOSURE_DEPTH:
        stack.append(c)
      elif id(c) not in compiled:
        compiled[id(c)] = _compile(c)
  module_impl = _MODULE_IMPL_HOLDER[0]

  def open_frame(d, nodes, trace, reuse) -> list:
    tag = d[0]
    if tag != NODE:
      return [d, None, d[2], 0, [], None]
    _, cls, i, attrs, meta = d
    impl = node_impl(cls)
    assert impl is not None
    obj = reuse.get(i) if reuse else None
    if obj is None:
      if impl is module_impl:
        obj = _new(cls)
        obj.__dict__["_nnx_trace"] = trace
      else:
        obj = impl.create(cls, meta, trace)
    else:
      impl.clear(obj)
    nodes[i] = obj
    if impl is module_impl:
      obj.__dict__.update({k: sub[1].value for k, sub in attrs if sub[0] == STATIC})
      attrs = [(k, sub) for k, sub in attrs if sub[0] != STATIC]
    return [d, obj, attrs, 0, [], impl]

  def close_frame(f: list) -> Any:
    d, obj, subs, _, values, impl = f
    tag = d[0]
    if tag == NODE:
      if impl is module_impl:
        obj.__dict__.update(zip([k for k, _ in subs], values))
      else:
        impl.set_children(obj, list(zip([k for k, _ in subs], values)))
      return obj
    t = d[1]
    if tag == MAP:
      return build_map(t, zip([k for k, _ in subs], values))
    if t is list:
      return values
    return tuple(values) if t is tuple else t(*values)

  def deep_builder(nxt, nodes, trace, reuse):
    f = open_frame(defn, nodes, trace, reuse)
    frames = [f]
    while True:
      subs, i = f[2], f[3]
      if i < len(subs):
        f[3] = i + 1
        sub = subs[i] if f[0][0] == SEQ else subs[i][1]
        g = compiled.get(id(sub))
        if g is not None:
          f[4].append(g(nxt, nodes, trace, reuse))
        else:
          f = open_frame(sub, nodes, trace, reuse)
          frames.append(f)
        continue
      frames.pop()
      value = close_frame(f)
      if not frames:
        return value
      f = frames[-1]
      f[4].append(value)

  return deep_builder

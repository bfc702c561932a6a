"""The graph engine: walking Module graphs into (GraphDef, leaves) and back.

A *graph node* is a Module (or a user type registered with
:func:`register_graph_node_type`). A node's children are its attributes; a
child is a node, a Variable (a leaf, identity-tracked), a raw array (a leaf),
a tuple/list/dict containing any of those (walked as plain pytree data), or
anything else (static, kept in the GraphDef).

Nodes and Variables are visited once each, depth first with attributes in
sorted order; a second encounter of the same object becomes a reference to
its index. ``GraphDef`` therefore records sharing and cycles, and the flat
list of leaves holds each distinct Variable once.

Walking is cached per root: while no structural change happens anywhere
(see ``_version``), a repeated ``split``/pytree flatten/lifted transform of the
same root reuses the GraphDef and the flat list of leaf slots, so only the
current values are read.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterator, NamedTuple

import jax
import numpy as np

from . import _version
from ._errors import GraphStructureError, ShapeDtypeError, StateMismatchError
from ._filters import Filter, to_predicate
from ._state import State, non_exhaustive_error
from ._tracing import current_trace
from ._variables import Variable

# Tags of the definition tuples that make up a GraphDef.
NODE, VAR, REF, LEAF, STATIC, SEQ, MAP = range(7)
_LEAF_DEF = (LEAF,)
_ARRAY_TYPES = (jax.Array, np.ndarray)


# --------------------------------------------------------------------------
# Node types
# --------------------------------------------------------------------------
class NodeImpl(NamedTuple):
  """How the engine reads and rebuilds one kind of graph node.

  Attributes:
    children: ``obj -> list[(key, value)]`` in a deterministic order.
    create: ``(cls, metadata, trace) -> obj``, an empty node to be filled.
    set_children: ``(obj, list[(key, value)]) -> None``, fills the node.
    metadata: ``obj -> hashable``, static data kept in the GraphDef.
    set_key: ``(obj, key, value) -> None``, replaces one child in place.
    clear: ``obj -> None``, removes every child (for in-place structural updates).
  """

  children: Callable[[Any], list]
  create: Callable[[type, Any, Any], Any]
  set_children: Callable[[Any, list], None]
  metadata: Callable[[Any], Any]
  set_key: Callable[[Any, Any, Any], None]
  clear: Callable[[Any], None]


_NODE_IMPLS: dict[type, NodeImpl | None] = {}
_REGISTERED: dict[type, NodeImpl] = {}


def register_graph_node_type(cls: type, impl: NodeImpl) -> None:
  """Registers ``cls`` (and its subclasses) as a graph node type.

  Args:
    cls: the node class.
    impl: a :class:`NodeImpl` describing how to read and rebuild it.
  """
  _REGISTERED[cls] = impl
  _NODE_IMPLS.clear()


def node_impl(t: type) -> NodeImpl | None:
  """The NodeImpl for type ``t`` (looked up along its MRO), or None."""
  try:
    return _NODE_IMPLS[t]
  except KeyError:
    impl = None
    for base in t.__mro__:
      impl = _REGISTERED.get(base)
      if impl is not None:
        break
    _NODE_IMPLS[t] = impl
    return impl


def is_graph_node(x: Any) -> bool:
  """True for Modules and registered graph node types."""
  return node_impl(type(x)) is not None


def is_node(x: Any) -> bool:
  """True for graph nodes and Variables (the identity-tracked objects).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.is_node(nnx.Param(jnp.ones(1))), nnx.is_node(jnp.ones(1))
    (True, False)
  """
  return isinstance(x, Variable) or node_impl(type(x)) is not None


# --------------------------------------------------------------------------
# Static values and GraphDef
# --------------------------------------------------------------------------
def _freeze(x: Any) -> Any:
  if isinstance(x, (list, tuple)):
    return (type(x).__name__, tuple(_freeze(e) for e in x))
  if isinstance(x, dict):
    return ("dict", tuple((k, _freeze(v)) for k, v in x.items()))
  if isinstance(x, (set, frozenset)):
    return ("set", frozenset(_freeze(e) for e in x))
  try:
    hash(x)
  except TypeError:
    return ("id", id(x))
  if isinstance(x, (np.ndarray, jax.Array)):
    return ("id", id(x))
  return x


class Static:
  """A static value kept in a GraphDef; hashed and compared by content.

  Unhashable containers (lists, dicts) are compared structurally; other
  unhashable objects by identity.
  """

  __slots__ = ("value", "_frozen", "_hash")

  def __init__(self, value: Any):
    self.value = value
    self._frozen = _freeze(value)
    self._hash = hash(self._frozen)

  def __eq__(self, other):
    return self is other or (
        isinstance(other, Static) and self._hash == other._hash and self._frozen == other._frozen
    )

  def __hash__(self):
    return self._hash

  def __repr__(self):
    return f"Static({self.value!r})"


def _var_metadata_def(md: dict) -> Any:
  return Static(md) if md else ()


def _metadata_from_def(mdef: Any) -> dict:
  return dict(mdef.value) if isinstance(mdef, Static) else {}


class GraphDef:
  """The static structure of a graph: node types, attribute keys, static
  attributes, Variable types and metadata, and which objects are shared.

  Hashable and equal across identical builds, so it can be a ``jax.jit``
  static argument. ``ModuleDef`` is the seed-era name of this class.

  Example:
    >>> import nnx_eqx as nnx
    >>> a = nnx.graphdef(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> b = nnx.graphdef(nnx.Linear(2, 3, rngs=nnx.Rngs(1)))
    >>> a == b and hash(a) == hash(b)
    True
  """

  __slots__ = ("defn", "paths", "n_nodes", "_hash", "__weakref__")

  def __init__(self, defn: tuple, paths: tuple, n_nodes: int):
    self.defn = defn
    self.paths = paths
    self.n_nodes = n_nodes
    self._hash = hash(defn)

  def __eq__(self, other):
    return self is other or (
        isinstance(other, GraphDef) and self._hash == other._hash and self.defn == other.defn
    )

  def __hash__(self):
    return self._hash

  @property
  def num_leaves(self) -> int:
    """How many leaves (distinct Variables and raw arrays) the graph has."""
    return len(self.paths)

  def __repr__(self) -> str:
    from ._repr import graphdef_repr

    return graphdef_repr(self)

  def __treescope_repr__(self, path, subtree_renderer):
    from ._repr import treescope_graphdef

    return treescope_graphdef(self, path, subtree_renderer)

  # Seed-era API -----------------------------------------------------------
  def merge(self, *states: State) -> Any:
    """Builds a new graph from this GraphDef and states (see :func:`merge`)."""
    return merge(self, *states)

  def apply(self, *states: State) -> "ApplyCaller":
    """Seed-era functional call: ``graphdef.apply(state)(x)`` or
    ``graphdef.apply(state).submodule.method(x)`` returns
    ``(out, (new_state, graphdef))`` and leaves the inputs untouched.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> state, moduledef = nnx.Linear(2, 3, rngs=nnx.Rngs(0)).partition()
      >>> y, (state, moduledef) = moduledef.apply(state)(jnp.ones((1, 2)))
      >>> y.shape
      (1, 3)
    """
    return ApplyCaller(self, states, ())


class ApplyCaller:
  """Accumulates attribute/item accesses, then calls on a freshly merged graph."""

  __slots__ = ("_graphdef", "_states", "_accessors")

  def __init__(self, graphdef, states, accessors):
    self._graphdef = graphdef
    self._states = states
    self._accessors = accessors

  def __getattr__(self, name):
    return ApplyCaller(self._graphdef, self._states, self._accessors + ((True, name),))

  def __getitem__(self, key):
    return ApplyCaller(self._graphdef, self._states, self._accessors + ((False, key),))

  def __call__(self, *args, **kwargs):
    node = merge(self._graphdef, *self._states)
    target = node
    for is_attr, k in self._accessors:
      target = getattr(target, k) if is_attr else target[k]
    out = target(*args, **kwargs)
    graphdef, state = split(node)
    return out, (state, graphdef)


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
    return self.parent._value[self.key]

  @_value.setter
  def _value(self, v):
    container = self.parent._value
    if isinstance(container, tuple):
      items = list(container)
      items[self.key] = v
      self.parent._value = type(container)(*items) if hasattr(container, "_fields") else tuple(items)
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
    node_paths: per node index, its first path.
  """

  __slots__ = ("graphdef", "slots", "paths", "nodes", "owners", "node_paths",
               "epoch", "_path_index", "_filter_cache", "refs")

  def __init__(self, graphdef, slots, paths, nodes, owners, node_paths, epoch):
    self.graphdef = graphdef
    self.slots = slots
    self.paths = paths
    self.nodes = nodes
    self.owners = owners
    self.node_paths = node_paths
    self.epoch = epoch
    self._path_index: dict | None = None
    self._filter_cache: dict = {}
    self.refs: tuple = ()

  def leaves(self) -> list:
    """The current leaf values, in order."""
    return [s._value for s in self.slots]

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
      cached, key = None, None
    if cached is not None:
      return cached
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


class _Walker:
  __slots__ = ("index", "nodes", "slots", "paths", "owners", "node_paths")

  def __init__(self):
    self.index: dict[int, int] = {}
    self.nodes: list = []
    self.slots: list = []
    self.paths: list = []
    self.owners: list = []
    self.node_paths: list = []

  def value(self, value, path: tuple, owner, key, pos) -> tuple:
    """Definition tuple of ``value`` found at ``path``; ``pos()`` makes its slot."""
    if isinstance(value, Variable):
      i = self.index.get(id(value))
      if i is not None:
        return (REF, i)
      i = len(self.nodes)
      self.index[id(value)] = i
      self.nodes.append(value)
      self.node_paths.append(path)
      self.slots.append(value)
      self.paths.append(path)
      self.owners.append((owner, key))
      return (VAR, type(value), i, _var_metadata_def(value._metadata))
    t = type(value)
    impl = node_impl(t)
    if impl is not None:
      return self.node(value, impl, path)
    if isinstance(value, _ARRAY_TYPES):
      self.slots.append(pos())
      self.paths.append(path)
      self.owners.append((owner, key))
      return _LEAF_DEF
    if t is tuple or t is list or (isinstance(value, tuple) and hasattr(value, "_fields")):
      if not value:
        return (STATIC, Static(value))
      parent = _Lazy(pos)
      subs = tuple(
          self.value(v, path + (j,), owner, key, _item_pos(parent, j))
          for j, v in enumerate(value)
      )
      if all(s[0] == STATIC for s in subs):
        return (STATIC, Static(value))
      return (SEQ, t, subs)
    if t is dict:
      if not value:
        return (STATIC, Static(value))
      parent = _Lazy(pos)
      items = tuple(
          (k, self.value(value[k], path + (k,), owner, key, _item_pos(parent, k)))
          for k in _sorted_keys(value)
      )
      if all(s[1][0] == STATIC for s in items):
        return (STATIC, Static(value))
      return (MAP, t, items)
    return (STATIC, Static(value))

  def node(self, obj, impl: NodeImpl, path: tuple) -> tuple:
    i = self.index.get(id(obj))
    if i is not None:
      return (REF, i)
    i = len(self.nodes)
    self.index[id(obj)] = i
    self.nodes.append(obj)
    self.node_paths.append(path)
    d = getattr(obj, "__dict__", None)
    if d is not None and "_nnx_trace" in d:
      d["_nnx_in_graph"] = True
    if impl is _MODULE_IMPL_HOLDER[0]:
      attrs = tuple(
          (k, self.value(v, path + (k,), obj, k, _dict_pos(d, k)))
          for k, v in impl.children(obj)
      )
    else:
      attrs = tuple(
          (k, self.value(v, path + (k,), obj, k, _node_pos(obj, impl, k)))
          for k, v in impl.children(obj)
      )
    return (NODE, type(obj), i, attrs, impl.metadata(obj))


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


def _dict_pos(d, k):
  return lambda: _DictSlot(d, k)


def _node_pos(obj, impl, k):
  return lambda: _NodeKeySlot(obj, impl, k)


def _item_pos(parent, k):
  return lambda: _ItemSlot(parent, k)


def _sorted_keys(d: dict) -> list:
  try:
    return sorted(d)
  except TypeError:
    return sorted(d, key=lambda k: (type(k).__name__, repr(k)))


class _RecursionLimit:
  """Raises the interpreter's recursion limit for very deep graphs."""

  __slots__ = ("old",)

  def __enter__(self):
    self.old = sys.getrecursionlimit()
    if self.old < 50_000:
      sys.setrecursionlimit(50_000)

  def __exit__(self, *exc):
    sys.setrecursionlimit(self.old)


def walk_uncached(root: Any) -> Walk:
  """Walks ``root`` (a node, or a tuple/list/dict of nodes) without caching."""
  w = _Walker()
  holder = _RootSlot(root)
  with _RecursionLimit():
    defn = w.value(root, (), None, None, lambda: holder)
  if defn[0] in (STATIC, LEAF):
    raise GraphStructureError(
        f"Expected a Module, Variable or container of them, got {type(root).__name__}."
        " Fix: pass an nnx.Module (or a registered graph node type)."
    )
  gd = GraphDef(defn, tuple(w.paths), len(w.nodes))
  return Walk(gd, w.slots, w.paths, w.nodes, w.owners, w.node_paths, _version.current())


def walk(root: Any) -> Walk:
  """Walks ``root``, reusing the cached walk while the graph is unchanged.

  A single node caches its walk on itself; a tuple of nodes (the arguments of
  a lifted transform) caches it on its first element, keyed by the identities
  of all elements.
  """
  epoch = _version._epoch[0]
  if type(root) is tuple and root:
    d = getattr(root[0], "__dict__", None)
    if d is None:
      return walk_uncached(root)
    cache = d.get("_nnx_multi")
    key = tuple(map(id, root))
    if cache is not None:
      w = cache.get(key)
      if w is not None and w.epoch == epoch and all(a is b for a, b in zip(w.refs, root)):
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
  return walk_uncached(root)


# --------------------------------------------------------------------------
# Rebuilding (merge direction)
# --------------------------------------------------------------------------
def unflatten(graphdef: GraphDef, leaves, reuse: dict[int, Any] | None = None,
              nodes_out: list | None = None) -> Any:
  """Rebuilds the graph of ``graphdef`` from leaf values in walk order.

  Leaves may be raw values or Variables (whose value and metadata are used).
  ``reuse`` maps node indices to existing objects to update in place instead
  of creating new ones. If ``nodes_out`` is a list, it receives the node
  objects by index.
  """
  nodes: list = [None] * graphdef.n_nodes
  it = iter(leaves)
  trace = current_trace()

  def build(defn):
    tag = defn[0]
    if tag == LEAF:
      leaf = next(it)
      return leaf._value if isinstance(leaf, Variable) else leaf
    if tag == STATIC:
      return defn[1].value
    if tag == REF:
      return nodes[defn[1]]
    if tag == VAR:
      _, cls, i, mdef = defn
      leaf = next(it)
      if isinstance(leaf, Variable):
        value, md = leaf._value, dict(leaf._metadata)
      else:
        value, md = leaf, _metadata_from_def(mdef)
      v = reuse.get(i) if reuse else None
      if v is None:
        v = object.__new__(cls)
        vd = v.__dict__
        vd["_trace"] = trace
      else:
        vd = v.__dict__
      vd["_value"] = value
      vd["_metadata"] = md
      nodes[i] = v
      return v
    if tag == NODE:
      _, cls, i, attrs, meta = defn
      impl = node_impl(cls)
      obj = reuse.get(i) if reuse else None
      if obj is None:
        obj = impl.create(cls, meta, trace)
      else:
        impl.clear(obj)
      nodes[i] = obj
      impl.set_children(obj, [(k, build(sub)) for k, sub in attrs])
      return obj
    if tag == SEQ:
      items = [build(s) for s in defn[2]]
      t = defn[1]
      if t is list:
        return items
      if t is tuple:
        return tuple(items)
      return t(*items)
    if tag == MAP:
      return defn[1]((k, build(s)) for k, s in defn[2])
    raise AssertionError(defn)

  with _RecursionLimit():
    root = build(graphdef.defn)
  if nodes_out is not None:
    nodes_out.extend(nodes)
  return root


# --------------------------------------------------------------------------
# Public graph API
# --------------------------------------------------------------------------
def _build_state(w: Walk, idxs: list[int], trace, path_offset: int = 0) -> State:
  root: dict = {}
  slots, paths = w.slots, w.paths
  for i in idxs:
    s = slots[i]
    if isinstance(s, Variable):
      leaf = object.__new__(type(s))
      ld = leaf.__dict__
      ld["_value"] = s._value
      ld["_metadata"] = dict(s._metadata)
      ld["_trace"] = trace
    else:
      leaf = s._value
    path = paths[i][path_offset:]
    d = root
    for k in path[:-1]:
      sub = d.get(k)
      if sub is None:
        sub = d[k] = {}
      d = sub
    d[path[-1]] = leaf
  return _to_state(root)


def _to_state(d: dict) -> State:
  for k, v in d.items():
    if type(v) is dict:
      d[k] = _to_state(v)
  return State._from_dict(d)


def split(node: Any, *filters: Filter) -> tuple:
  """Splits a graph into its GraphDef and one State per filter.

  Args:
    node: a Module (or a graph node, or a tuple/list/dict of them).
    *filters: filters that together must match every leaf; a leaf goes to the
      first filter that matches. No filters means one State with everything.

  Returns:
    ``(graphdef, state_1, ..., state_n)``.

  Raises:
    FilterError: if some leaf matches no filter (the message names its path);
      add ``...`` as the last filter to collect the rest.
    UnknownFilterError: if a filter is not a valid filter.

  Example:
    >>> import nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    >>> sorted(params), len(rest)
    (['bias', 'kernel'], 0)
  """
  w = walk(node)
  trace = current_trace()
  if not filters:
    return (w.graphdef, _build_state(w, range(len(w.slots)), trace))
  buckets = w.partition_indices(filters, exhaustive=True)
  return (w.graphdef, *(_build_state(w, b, trace) for b in buckets))


def graphdef(node: Any) -> GraphDef:
  """Returns the GraphDef of ``node`` (cached while the graph is unchanged).

  Example:
    >>> import nnx_eqx as nnx
    >>> isinstance(nnx.graphdef(nnx.Linear(1, 1, rngs=nnx.Rngs(0))), nnx.GraphDef)
    True
  """
  return walk(node).graphdef


def state(node: Any, *filters: Filter) -> Any:
  """Returns the State of ``node``, optionally filtered (non-exhaustive).

  Args:
    node: a graph node.
    *filters: zero filters gives every leaf; one gives one State; several give
      a tuple of States. Unmatched leaves are dropped.

  Raises:
    UnknownFilterError: if a filter is not a valid filter.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> len(jax.tree.leaves(nnx.state(model, nnx.Param)))
    2
  """
  w = walk(node)
  trace = current_trace()
  if not filters:
    return _build_state(w, range(len(w.slots)), trace)
  buckets = w.partition_indices(filters, exhaustive=False)
  states = tuple(_build_state(w, b, trace) for b in buckets)
  return states[0] if len(filters) == 1 else states


def variables(node: Any, *filters: Filter) -> Any:
  """Like :func:`state`, but the State's leaves are the graph's own Variables
  (not copies), so setting their values updates the graph.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> nnx.variables(model, nnx.Param).bias.value = jnp.ones(3)
    >>> model.bias.value.tolist()
    [1.0, 1.0, 1.0]
  """
  w = walk(node)
  flt = filters or (...,)
  buckets = w.partition_indices(flt, exhaustive=False)
  states = tuple(
      State.from_flat_path((w.paths[i], w.leaf_objects()[i]) for i in b) for b in buckets
  )
  return states[0] if len(flt) == 1 else states


def _flat_of(states) -> dict:
  flat: dict = {}
  for s in states:
    if isinstance(s, State):
      flat.update(s.flat_state())
    elif isinstance(s, dict):
      flat.update(State(s).flat_state())
    else:
      raise GraphStructureError(
          f"Expected a State, got {type(s).__name__}. Fix: pass the States"
          " returned by `nnx.split`/`nnx.state`."
      )
  return flat


def merge(graphdef: GraphDef, *states: State) -> Any:
  """Builds a new graph from a GraphDef and States (the inverse of :func:`split`).

  Shared Variables and Modules come back shared; the result holds new
  objects, so the states and any previous graph are untouched.

  Args:
    graphdef: from :func:`split`.
    *states: States that together hold exactly the graph's leaf paths.

  Returns:
    The rebuilt root node.

  Raises:
    StateMismatchError: if a path of the GraphDef is missing from the states,
      or the states hold a path the GraphDef lacks (both are named).

  Example:
    >>> import nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> graphdef, params = nnx.split(model)
    >>> type(nnx.merge(graphdef, params)).__name__
    'Linear'
  """
  if not isinstance(graphdef, GraphDef):
    raise GraphStructureError(
        f"merge expects a GraphDef first, got {type(graphdef).__name__}. Fix:"
        " call `nnx.merge(graphdef, *states)` with the graphdef from `nnx.split`."
    )
  flat = _flat_of(states)
  leaves = []
  missing = []
  for p in graphdef.paths:
    try:
      leaves.append(flat.pop(p))
    except KeyError:
      missing.append(p)
  if missing or flat:
    raise _mismatch_error(missing, list(flat))
  return unflatten(graphdef, leaves)


def _fmt(p) -> str:
  return "/".join(map(str, p)) or "<root>"


def _mismatch_error(missing, extra) -> StateMismatchError:
  parts = []
  if missing:
    parts.append("missing paths: " + ", ".join(_fmt(p) for p in missing[:8]))
  if extra:
    parts.append("unexpected paths: " + ", ".join(_fmt(p) for p in extra[:8]))
  return StateMismatchError(
      "The states do not match the GraphDef (" + "; ".join(parts) + "). Fix: pass"
      " every State returned by the same `nnx.split` call (use `...` as the last"
      " filter to keep the rest), from a model of the same structure."
  )


def _check_compatible(path, old, new) -> None:
  if isinstance(old, _ARRAY_TYPES) and isinstance(new, (_ARRAY_TYPES, np.generic)):
    if np.shape(old) != np.shape(new) or old.dtype != new.dtype:
      raise ShapeDtypeError(
          f"update: the value at {_fmt(path)} has shape {np.shape(old)} and dtype"
          f" {old.dtype}, but the new value has shape {np.shape(new)} and dtype"
          f" {new.dtype}. Fix: pass a value of the same shape and dtype (cast"
          " with `.astype`), or assign a new Variable to the attribute to change"
          " its shape."
      )


def update(node: Any, *states: State) -> None:
  """Writes the values of ``states`` into ``node``'s Variables, in place.

  Paths the graph lacks are added as new attributes when their parent exists
  (e.g. Intermediates produced by a functional call).

  Args:
    node: a graph node.
    *states: States (or nested dicts of values) keyed by paths of ``node``.

  Raises:
    ShapeDtypeError: a new value's shape or dtype differs from the current one
      (the path, both shapes and dtypes are named).
    StateMismatchError: a path's parent is not in the graph.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> params = jax.tree.map(lambda x: x * 0, nnx.state(model, nnx.Param))
    >>> nnx.update(model, params)
    >>> float(model.kernel.value.sum())
    0.0
  """
  w = walk(node)
  index = w.path_index()
  added = False
  for path, leaf in _flat_of(states).items():
    i = index.get(path)
    new = leaf._value if isinstance(leaf, Variable) else leaf
    if i is not None:
      slot = w.slots[i]
      _check_compatible(path, slot._value, new)
      if isinstance(slot, Variable):
        slot.__dict__["_value"] = new
        if isinstance(leaf, Variable) and leaf._metadata != slot._metadata:
          slot.__dict__["_metadata"] = dict(leaf._metadata)
          added = True
      else:
        slot._value = new
      continue
    parent = _node_at(w, path[:-1])
    if parent is None:
      raise StateMismatchError(
          f"update: path {_fmt(path)} is not in the graph and its parent"
          f" {_fmt(path[:-1])} is not a node of it. Fix: update with a State"
          " produced from a graph of the same structure."
      )
    setattr(parent, path[-1], leaf.copy() if isinstance(leaf, Variable) else leaf)
    added = True
  if added:
    _version.bump()


def _node_at(w: Walk, path: tuple):
  for p, obj in zip(w.node_paths, w.nodes):
    if p == path and not isinstance(obj, Variable):
      return obj
  return None


def pop(node: Any, *filters: Filter) -> Any:
  """Removes the leaves matching ``filters`` from the graph and returns them.

  Args:
    node: a graph node.
    *filters: one filter gives one State; several give a tuple.

  Raises:
    UnknownFilterError: if a filter is not a valid filter.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> model.y = nnx.Intermediate(jnp.ones(3))
    >>> sorted(nnx.pop(model, nnx.Intermediate)), hasattr(model, "y")
    (['y'], False)
  """
  if not filters:
    raise TypeError("pop expects at least one filter, e.g. nnx.pop(model, nnx.Intermediate)")
  w = walk(node)
  buckets = w.partition_indices(filters, exhaustive=False)
  trace = current_trace()
  states = tuple(_build_state(w, b, trace) for b in buckets)
  for b in buckets:
    for i in b:
      owner, key = w.owners[i]
      if owner is not None:
        impl = node_impl(type(owner))
        if impl is _MODULE_IMPL_HOLDER[0]:
          delattr(owner, key)
        else:
          impl.set_key(owner, key, _DELETE)
  _version.bump()
  return states[0] if len(filters) == 1 else states


_DELETE = object()


def clone(node: Any) -> Any:
  """A deep copy of the graph with the same sharing (``merge(*split(node))``).

  Example:
    >>> import nnx_eqx as nnx
    >>> a = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> b = nnx.clone(a)
    >>> b is not a and b.kernel is not a.kernel
    True
  """
  w = walk(node)
  return unflatten(w.graphdef, [s.copy() if isinstance(s, Variable) else s._value for s in w.slots])


def iter_graph(node: Any) -> Iterator[tuple[tuple, Any]]:
  """Yields ``(path, value)`` for every node and leaf, each once, parents first.

  Example:
    >>> import nnx_eqx as nnx
    >>> [p for p, _ in nnx.iter_graph(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))]
    [(), ('bias',), ('kernel',)]
  """
  w = walk(node)
  items: list = [(p, n) for p, n in zip(w.node_paths, w.nodes)]
  items += [(p, s._value) for p, s in zip(w.paths, w.slots) if not isinstance(s, Variable)]
  items.sort(key=lambda pn: _path_sort_key(pn[0]))
  yield from items


def _path_sort_key(path):
  return tuple((type(k).__name__, k) for k in path)


def iter_modules(node: Any) -> Iterator[tuple[tuple, Any]]:
  """Yields ``(path, module)`` for every graph node (Modules), each once, parents first.

  Example:
    >>> import nnx_eqx as nnx
    >>> [type(m).__name__ for _, m in nnx.iter_modules(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))]
    ['Linear']
  """
  for p, n in iter_graph(node):
    if is_graph_node(n):
      yield p, n


# --------------------------------------------------------------------------
# Graph nodes as JAX pytrees (sharing-preserving)
# --------------------------------------------------------------------------
class _PathKey:
  __slots__ = ("path",)

  def __init__(self, path):
    self.path = path

  def __str__(self):
    return "." + ".".join(map(str, self.path))

  __repr__ = __str__


def _pytree_flatten(node):
  w = walk(node)
  return [s._value for s in w.slots], w.graphdef


def _pytree_flatten_with_keys(node):
  w = walk(node)
  return [(_PathKey(p), s._value) for p, s in zip(w.paths, w.slots)], w.graphdef


def _pytree_unflatten(graphdef, leaves):
  return unflatten(graphdef, leaves)


def register_pytree(cls: type) -> None:
  """Registers a graph node class as a JAX pytree that preserves sharing."""
  jax.tree_util.register_pytree_with_keys(
      cls, _pytree_flatten_with_keys, _pytree_unflatten, _pytree_flatten
  )

"""The fast path of graph nodes as JAX pytrees: rebuilt graphs need no walk.

A Module flattens through its cached walk (see ``_walk``), but the pytree
operations that rebuild modules (``jax.tree.map``, ``eqx.filter``,
``eqx.partition``/``combine``, ``eqx.apply_updates``, the outputs of
``eqx.filter_jit`` and ``eqx.filter_grad``) make new objects, which a walk
would have to visit again, making a new GraphDef that compiles its builder
again. Here:

* the GraphDefs handed to JAX as aux data are *canonical*: one object per
  structure (interned weakly), so comparing treedefs (``jax.jit``'s cache key,
  the structure checks of ``tree_map``) compares identities;
* a :class:`Template`, derived once per canonical GraphDef from its definition
  tuple, rebuilds a graph in two flat passes (create every node, then fill
  in the attributes) without the ``__init__``/``__setattr__`` machinery and
  with as few allocations as it can (so fewer garbage collections in a
  training loop), and records on the new root a
  :class:`Born` record: where its leaves are. The next flatten of that root
  reads its leaves from there instead of walking it.

A Born record is valid while the structural version (``_version``) is
unchanged, exactly like a cached walk, and the rebuilt nodes are marked as in a
graph, so a structural change to any of them invalidates it. Leaf values are
not structure: a raw-array attribute that a pytree map set to ``None`` (as
``eqx.filter`` does) stays a leaf of the record, as in any pytree. Anything
else (``nnx.split``, the lifted transforms) walks the rebuilt graph as any
other. Graphs whose leaves are not all Variables or raw arrays held directly
as a Module attribute (e.g. an array inside a list attribute), and rebuilds
from Variable leaves (whose metadata replaces the GraphDef's), take the
general ``unflatten`` of ``_walk`` instead.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from typing import Any

from . import _version
from ._graphdef import GraphDef
from ._links import LinkedPaths
from ._node_types import LEAF, MAP, NODE, REF, SEQ, STATIC, VAR, node_impl
from ._tracing import current_trace
from ._variables import Variable
from ._walk import _MODULE_IMPL_HOLDER, Walk, build_map, bulk, unflatten

_CANON_KEY = object()  # key of a walk's filter cache: its GraphDef is canonical
_GET_VALUE = operator.attrgetter("_value")
_set = object.__setattr__
_new = object.__new__

_TEMPLATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Canonical GraphDef -> its :class:`Template` (which refers back to it weakly)."""


class Born:
  """Where the leaves of a graph rebuilt by :func:`rebuild` are (on its root).

  It refers to its root weakly, so a rebuilt graph is no reference cycle: it
  is freed (with its arrays) as soon as it is dropped, not at the next
  garbage collection.

  Attributes:
    epoch: the structural version when it was built.
    graphdef: the canonical GraphDef of the graph.
    root: a weak reference to the root.
    holders: per leaf, its Variable, or for a raw array ``(owner, key)``
      (owner None for the root).
    all_vars: whether every leaf is a Variable.
    node_paths: per node index, its first path.
    flags: node indices of its flagged modules (see ``_pytree_flags``).
    neutral: the GraphDef with those flags at False (when there are some).
  """

  __slots__ = (
    "epoch",
    "graphdef",
    "root",
    "holders",
    "all_vars",
    "_nodes",
    "node_paths",
    "flags",
    "neutral",
  )

  def __init__(self, graphdef: GraphDef, tpl: Template, root: Any, holders: list, nodes: list):
    self.epoch = _version._epoch[0]
    self.graphdef = graphdef
    self.root = weakref.ref(root)
    self.holders = holders
    self.all_vars = not tpl.raw_ops
    nodes[0] = None
    self._nodes = nodes
    self.node_paths = tpl.node_paths
    self.flags: tuple = ()
    self.neutral: GraphDef | None = None

  def __reduce__(self):
    # like a cached walk: a pickled or deep-copied root walks itself again
    # (the record holds a weak reference, which cannot be pickled)
    return _no_record, ()

  @property
  def nodes(self) -> list:
    """The graph's nodes by index (``nodes[0]`` is the root)."""
    return [self.root(), *self._nodes[1:]]

  def leaves(self, root: Any) -> list:
    """The current leaf values, in order."""
    if self.all_vars:
      return list(map(_GET_VALUE, self.holders))
    return [
      h._value if isinstance(h, Variable) else vars(root if h[0] is None else h[0])[h[1]]
      for h in self.holders
    ]


def _no_record() -> None:
  return None


def born_of(node: Any) -> Born | None:
  """The valid Born record of ``node`` (a rebuilt root), or None."""
  b = getattr(node, "_nnx_born", None)
  if b is not None and b.epoch == _version._epoch[0] and b.root() is node:
    return b
  return None


class Template:
  """How to rebuild the graphs of one canonical GraphDef in flat passes.

  Attributes:
    graphdef: a weak reference to the canonical GraphDef.
    ok: whether :meth:`build` can rebuild its graphs (else ``unflatten`` is used).
    node_paths: per node index, its first path.
    keys: per leaf, ``"_value"`` (a Variable) or the attribute of its Module;
      None when every leaf is a Variable.
  """

  __slots__ = (
    "graphdef",
    "ok",
    "n_nodes",
    "node_paths",
    "keys",
    "var_ops",
    "raw_ops",
    "node_ops",
    "fills",
  )

  def __init__(self, gd: GraphDef, ref: weakref.ref):
    self.graphdef = ref
    self.n_nodes = gd.n_nodes
    self.ok = True
    node_paths: list = [None] * gd.n_nodes
    leaf_src: list = []  # per leaf: (node index, cls, metadata) or (owner index, key)
    # (index, cls, static attrs as a dict, impl or None for Modules, metadata)
    self.node_ops: list = []
    self.fills: list = []  # (index, impl or None for Modules, [(key, value expr)])
    module_impl = _MODULE_IMPL_HOLDER[0]
    # (definition, its path as a link (see ``_links``), whether it is an attribute
    # of the Module ``owner``, owner)
    stack: list = [(gd.defn, None, False, None)]
    while stack and self.ok:
      d, link, direct, owner = stack.pop()
      tag = d[0]
      if tag == VAR:
        _, cls, i, mdef = d
        node_paths[i] = link
        leaf_src.append((i, cls, dict(mdef.value) if mdef else {}))
        self.ok = self.ok and _plain(cls, _VAR_FIELDS)
      elif tag == NODE:
        _, cls, i, attrs, meta = d
        node_paths[i] = link
        impl = node_impl(cls)
        # a Module is filled attribute by attribute, unless its class has a data
        # descriptor of one of their names: then through its impl, as another node type
        is_module = impl is module_impl and _plain(cls, [k for k, _ in attrs] + _MODULE_FIELDS)
        # a new Module's __dict__ is a copy of ``statics`` (faster than setting each)
        statics: dict[str, Any] = {"_nnx_trace": None}
        statics.update((k, sub[1].value) for k, sub in attrs if sub[0] == STATIC and is_module)
        statics["_nnx_in_graph"] = True  # changes to the nodes then invalidate the record
        dyn = [
          (k, ("raw", i, k) if sub[0] == LEAF else self._expr(sub))
          for k, sub in attrs
          if not (is_module and sub[0] == STATIC)
        ]
        self.node_ops.append((i, cls, statics, None if is_module else impl, meta))
        self.fills.append((i, None if is_module else impl, dyn))
        # the children's first occurrences, in walk order
        stack.extend((sub, (link, k), is_module, i) for k, sub in reversed(attrs))
      elif tag == LEAF:
        if direct and len(d) == 1:  # a raw array attribute of a Module (not a jax.Ref)
          leaf_src.append((owner, link[1]))
        else:  # inside a list/dict attribute, or of another node type: slots not built here
          self.ok = False
      elif tag in (SEQ, MAP):
        items = enumerate(d[2]) if tag == SEQ else d[2]
        stack.extend((sub, (link, k), False, None) for k, sub in reversed(list(items)))
    self.node_paths = LinkedPaths(node_paths)
    self.var_ops: tuple = ()
    self.raw_ops: tuple = ()
    self.keys: tuple | None = None
    root = gd.defn[1] if gd.defn[0] == NODE else None
    # the root keeps its record in its __dict__ and is referred to weakly by it
    self.ok = self.ok and bool(root and root.__dictoffset__ and root.__weakrefoffset__)
    if not self.ok:
      return
    # raw leaves are read from ``nodes + leaves``, past the nodes
    raw_index = {s: self.n_nodes + j for j, s in enumerate(leaf_src) if len(s) == 2}
    self.fills = [
      (i, impl, [(k, raw_index[e[1:]] if _is_raw(e) else e) for k, e in dyn])
      for i, impl, dyn in reversed(self.fills)  # children (higher indices) before parents
    ]
    self.var_ops = tuple((j, s[0], s[1], s[2]) for j, s in enumerate(leaf_src) if len(s) == 3)
    self.raw_ops = tuple((j, s[0]) for j, s in enumerate(leaf_src) if len(s) == 2)
    self.keys = tuple("_value" if len(s) == 3 else s[1] for s in leaf_src) if self.raw_ops else None

  def _expr(self, d: tuple) -> Any:
    """A child's value: an int (a node index), ``("raw", owner, key)`` (a raw
    leaf, resolved later) or a callable ``(values) -> value``."""
    tag = d[0]
    if tag in (VAR, NODE):
      return d[2]
    if tag == REF:
      return d[1]
    if tag == STATIC:
      value = d[1].value
      return lambda values: value
    if tag == SEQ:
      t, subs = d[1], [_as_fn(self._expr(s)) for s in d[2]]
      if t is tuple:
        return lambda values: tuple([g(values) for g in subs])
      if t is list:
        return lambda values: [g(values) for g in subs]
      return lambda values: t(*[g(values) for g in subs])
    if tag == MAP:
      t, items = d[1], [(k, _as_fn(self._expr(s))) for k, s in d[2]]
      return lambda values: build_map(t, [(k, g(values)) for k, g in items])
    return None  # a raw leaf inside a container: the walk of the Template refuses it

  def build(self, leaves: list) -> tuple[Any, Born]:
    """A new graph from ``leaves`` (raw values, in walk order) and its Born record.

    A Variable's attributes are stored with ``object.__setattr__`` rather than
    through its ``__dict__`` (as ``new_variable`` and the builders of ``_walk``
    do), which would allocate the dict: such graphs are often dropped unread.
    For the same reason a Variable without metadata gets no metadata dict: its
    own empty one is made on first use (``Variable.__getattr__``). A Module's
    ``__dict__`` is a copy of its static attributes (one dict copy costs less
    than setting each attribute), then gets its children.
    """
    trace = current_trace()
    nodes: list = [None] * self.n_nodes
    holders: list = [None] * len(leaves)
    for j, i, cls, md in self.var_ops:
      v = holders[j] = nodes[i] = _new(cls)
      _set(v, "_value", leaves[j])
      if md:  # empty metadata: a dict made on first use (``Variable.__getattr__``)
        _set(v, "_metadata", md.copy())
      _set(v, "_trace", trace)
    for i, cls, statics, impl, meta in self.node_ops:
      if impl is None:  # a Module: no __init__, no __setattr__
        obj = nodes[i] = _new(cls)
        d = statics.copy()
        d["_nnx_trace"] = trace
        _set(obj, "__dict__", d)
      else:
        nodes[i] = impl.create(cls, meta, trace)
    values = nodes + leaves if self.raw_ops else nodes
    for i, impl, dyn in self.fills:
      obj = nodes[i]
      if impl is None:
        for k, e in dyn:
          _set(obj, k, values[e] if type(e) is int else e(values))
        continue
      impl.set_children(obj, [(k, values[e] if type(e) is int else e(values)) for k, e in dyn])
      d = getattr(obj, "__dict__", None)
      if d is not None and "_nnx_trace" in d:
        d["_nnx_in_graph"] = True
    for j, i in self.raw_ops:
      holders[j] = (nodes[i] if i else None, self.keys[j])  # type: ignore[index]
    root = nodes[0]
    return root, Born(self.graphdef(), self, root, holders, nodes)  # type: ignore[arg-type]


_VAR_FIELDS = ["_value", "_metadata", "_trace"]
_MODULE_FIELDS = ["_nnx_trace", "_nnx_in_graph", "_nnx_born"]


def _plain(cls: type, names: list) -> bool:
  """Whether ``object.__setattr__`` stores each of ``names`` on an instance of
  ``cls`` as plain data (no data descriptor of that name on the class)."""
  for name in names:
    for base in cls.__mro__:
      if name in base.__dict__:
        if hasattr(type(base.__dict__[name]), "__set__"):
          return False
        break
  return True


def _is_raw(e: Any) -> bool:
  return type(e) is tuple and len(e) == 3


def _as_fn(e: Any) -> Callable:
  """A value expression of :meth:`Template._expr` as a function of ``values``."""
  if type(e) is int:
    return lambda values: values[e]
  return e


_BY_ID: dict[int, Template] = {}
"""``id(canonical GraphDef) -> Template``, the fast lookup (entries leave with the GraphDef)."""


def canonical(gd: GraphDef) -> tuple[GraphDef, Template]:
  """The canonical GraphDef equal to ``gd`` (``gd`` itself if it is the first
  of its structure still alive) and its Template."""
  tpl = _BY_ID.get(id(gd))
  if tpl is not None and tpl.graphdef() is gd:
    return gd, tpl
  tpl = _TEMPLATES.get(gd)
  if tpl is not None:
    canon = tpl.graphdef()
    if canon is not None:
      return canon, tpl
  key = id(gd)
  tpl = Template(gd, weakref.ref(gd, lambda _: _BY_ID.pop(key, None)))
  _TEMPLATES[gd] = _BY_ID[key] = tpl
  return gd, tpl


def canonical_of_walk(w: Walk) -> GraphDef:
  """``w``'s GraphDef made canonical (once per walk: the walk keeps it)."""
  cache = w._filter_cache
  if _CANON_KEY not in cache:
    w.graphdef, cache[_CANON_KEY] = canonical(w.graphdef)
  return w.graphdef


def rebuild(gd: GraphDef, leaves: Any, nodes: list | None = None) -> Any:
  """``unflatten(gd, leaves)``, through the Template of ``gd`` when it can.

  ``nodes``, if given, receives the new node objects by index.
  """
  gd, tpl = canonical(gd)
  leaves = leaves if type(leaves) is list else list(leaves)
  if tpl.ok:
    for leaf in leaves:
      if isinstance(leaf, Variable):
        break
    else:
      with bulk(tpl.n_nodes + len(leaves)):
        root, born = tpl.build(leaves)
      if nodes is not None:
        nodes.extend(born.nodes)
      _set(root, "_nnx_born", born)
      return root
  return unflatten(gd, leaves, nodes_out=nodes)

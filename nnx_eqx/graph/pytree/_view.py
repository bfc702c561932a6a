"""Graph nodes as nested JAX pytrees, sharing kept: the one pytree mechanism.

A Module (any registered graph node) flattens to its attributes, as an Equinox
module flattens to its fields: sub-Modules, Variables, raw arrays and
containers are its children, with JAX's own keys (``GetAttrKey`` for
attributes, ``SequenceKey``/``DictKey`` for the items of ``nnx.List`` and
containers); static attributes go into the aux data, a :class:`NodeDef`.
``is_leaf`` therefore sees every Module and Variable, ``eqx.tree_at`` can
replace any of them, and key paths read ``.l1.kernel.value`` (the Variable's
own child is ``.value``, as in flax.nnx 0.12).

Sharing. JAX flattens each node on its own, depth first. A node reachable by
two paths is emitted once, at its first path in walk order (sorted attributes,
as :func:`nnx.split`); at later paths the parent holds a *marker* and its
:class:`NodeDef` records ``(marker path, target path)``, so unflattening puts
the rebuilt object back at both paths. When the later path lies inside a
child subtree, the parent hands JAX a *view* of that child (a shallow copy of
the same class, with the marker in place of the shared object), so a child
flattened by JAX never emits an object its parent already emitted. Views
only appear where a subtree refers outside itself; everything else is the
model's own objects, so ``is_leaf`` sees ``model.l1`` itself.

Records. A node's :class:`NodeDef` depends only on the node's own subtree,
so it is cached on the node (``_nnx_pv``) while the structural version is
unchanged (see ``_version``): the first flatten walks the graph once and
records every node that needs no view; later flattens and the nodes rebuilt
by ``unflatten`` (whose record is the aux they were built from) walk nothing.

Leaf values are not structure: a raw-array attribute that a pytree map set to
``None`` (as ``eqx.partition`` does) stays a child of the record.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import jax
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from .. import _version
from .._errors import PytreeDepthError
from ..tracing import _copy_links, _lost_updates
from ..tracing._traces import current_trace
from ..variables._variables import dict_setter
from ..walk._graphdef import StaticValue
from ..walk._links import path_of
from ..walk._node_types import MAP, NODE, REF, SEQ, STATIC, node_impl
from ..walk._walk import _MODULE_IMPL_HOLDER, walk_uncached
from . import _build as _pytree_build
from . import _flags as _pytree_flags

_RECORD = _pytree_build.RECORD

GENERATION = _copy_links.GENERATION
"""The generation of the NodeDefs made now: NodeDefs of different generations
never compare equal, so compiled-program caches keyed by them miss (shared with
the Variables' aux data, see ``_copy_links``)."""


def _new_generation() -> None:
  """A dropped update was found (``_lost_updates``): every JAX cache keyed by the
  structures made so far misses once, so each program traces again on its next
  call and a drop it makes for another module of the same structure is seen
  (a compiled program runs without a trace to watch)."""
  GENERATION[0] += 1
  _version.bump()


_VIEW_RECORD = "_nnx_pv_view"  # (epoch, spec, NodeDef of this node's view made by spec)
_set = object.__setattr__
_new = object.__new__
# attributes of a node that a view or a rebuilt node does not copy
PRIVATE_CACHES = (
  "_nnx_pv",
  "_nnx_pv_view",
  "_nnx_walk",
  "_nnx_multi",
  "_nnx_in_graph",
  "_nnx_prefix_view",
)


class _Marker:
  """Where a shared object goes back when the tree is rebuilt (one instance)."""

  __slots__ = ()

  def __repr__(self) -> str:
    return "<shared: see the first path>"


MARK = _Marker()
jax.tree_util.register_pytree_node(_Marker, lambda m: ((), None), lambda _, __: MARK)


class StaticItem:
  """A static item of a container that also holds data: no leaf for JAX.

  Unflattening gives back the value itself, not the box.
  """

  __slots__ = ("value",)

  def __init__(self, value: Any):
    self.value = value

  def __repr__(self) -> str:
    return f"StaticItem({self.value!r})"


jax.tree_util.register_pytree_node(
  StaticItem, lambda s: ((), StaticValue(s.value)), lambda sv, _: sv.value
)

_WRAP = object()  # in a container view spec: wrap the item in a StaticItem


class NodeDef:
  """The aux data of a flattened graph node.

  Attributes:
    cls: the node's class.
    meta: the node type's metadata (None for Modules).
    layout: per attribute in walk order ``(key, kind, static value)``, kind 0
      static, 1 a child, 2 a marker of a shared object.
    keys: the children's keys, in order.
    jkeys: the children's JAX keys.
    refs: ``(marker path, target path)`` per shared object met again below this
      node (paths relative to it).
    views: per child, None or how to make its view (see :func:`_view`).
    flag: the node's mode attributes, whose :class:`~._pytree_flags.Mode` is
      its last child (see ``_pytree_flags``), or None.
  """

  __slots__ = (
    "cls",
    "meta",
    "layout",
    "keys",
    "jkeys",
    "refs",
    "views",
    "flag",
    "mode",
    "module",
    "statics",
    "base",
    "base_key",
    "plain",
    "build",
    "set_dict",
    "getter",
    "fgetter",
    "single",
    "gen",
    "_hash",
  )

  def __init__(self, cls, meta, layout, refs, views, flag, module):
    self.cls, self.meta, self.layout, self.refs = cls, meta, layout, refs
    self.views, self.flag, self.module = views, flag, module
    self.keys = tuple(k for k, kind, _ in layout if kind == 1)
    mk = GetAttrKey if module else None
    self.jkeys = tuple(
      (mk(k) if mk and type(k) is str else SequenceKey(k) if type(k) is int else DictKey(k))
      for k in self.keys
    )
    self.mode = None
    if flag is not None:
      self.jkeys += (GetAttrKey("inference"),)
      self.mode = _pytree_flags.mode_of(layout, flag)
    # a new node's __dict__ starts as a copy of this (markers where shared objects go)
    self.statics = {k: sv.value if kind == 0 else MARK for k, kind, sv in layout if kind != 1}
    self.statics["_nnx_trace"] = None
    if module:
      self.statics["_nnx_in_graph"] = True  # changes to a rebuilt node bump the version
    # ``base``: ``statics`` with the trace token and the record (``(epoch, self)``)
    # of a node rebuilt in the trace and epoch ``base_key`` names
    self.base, self.base_key = self.statics, (None, None)
    self.plain = module and not refs
    self.build = _pytree_build.builder(self.keys) if self.plain else None
    self.set_dict = dict_setter(cls) if self.plain else None  # (no ``__setattr__`` lookup)
    # ``getter(node.__dict__)``: the children of a node flattened by the fast path
    # (plain, no views, no mode child), a tuple, or the one child if ``single``
    fast = self.plain and not views and self.keys
    self.getter = itemgetter(*self.keys) if fast and flag is None else None
    # ``fgetter``: the same, a tuple, for a node with a mode child (two children or more)
    self.fgetter = itemgetter(*self.keys) if fast and flag and len(self.keys) > 1 else None
    self.single = len(self.keys) == 1
    self.gen = GENERATION[0]  # (see ``_new_generation``)
    self._hash = hash((cls, layout, refs))

  def __reduce__(self):
    # the base (a trace token) and the builder are made again where it is loaded
    args = (self.cls, self.meta, self.layout, self.refs, self.views, self.flag, self.module)
    return NodeDef, args

  # Structures compare with their mode attributes (static values in ``layout``): a
  # mode is part of the key of every compiled-program cache (see ``_pytree_flags``).
  def __eq__(self, other):
    return self is other or (
      type(other) is NodeDef
      and self._hash == other._hash
      and self.gen == other.gen
      and self.cls is other.cls
      and self.meta == other.meta
      and self.layout == other.layout
      and self.refs == other.refs
    )

  def __hash__(self):
    return self._hash

  def __repr__(self) -> str:
    shared = f", shared={list(self.refs)}" if self.refs else ""
    modes = "".join(
      f", {k}={sv.value!r}" for k, kind, sv in self.layout if kind == 0 and k in (self.flag or ())
    )
    return f"{self.cls.__name__}(children={list(self.keys)}{shared}{modes})"


# --------------------------------------------------------------------------
# Deriving NodeDefs from a walk
# --------------------------------------------------------------------------
class _Deriver:
  """Computes the NodeDef of a walked root and records those of its nodes that
  need no view (their subtree refers to nothing outside it)."""

  def __init__(self, w):
    self.nodes = w.nodes
    self.links = w.node_links
    self.paths: dict[int, tuple] = {}

  def path(self, i: int) -> tuple:
    p = self.paths.get(i)
    if p is None:
      p = self.paths[i] = path_of(self.links[i]) if self.links[i] is not None else ()
    return p

  def node(self, d: tuple) -> tuple[NodeDef, list]:
    """``(NodeDef, outside)`` of the NODE definition ``d``: ``outside`` lists
    ``(marker path, target index)`` of references to objects met before it."""
    _, cls, i, attrs, meta = d
    module = node_impl(cls) is _MODULE_IMPL_HOLDER[0]
    layout: list = []
    refs: list = []
    outside: list = []
    views: dict = {}
    base = self.path(i)
    found: list = []  # (key, child definition, path below it, target index)
    data_names = _data_names(self.nodes[i]) if module else None
    for k, sub in attrs:
      tag = sub[0]
      if tag == STATIC:
        if data_names and k in data_names and sub[1].value is None:
          layout.append((k, 1, None))  # ``nnx.data(None)``: a child (an empty subtree), as in flax
        else:
          layout.append((k, 0, sub[1]))
        continue
      marks: list = []  # (path below k, target index) of this child's references
      if tag == REF:
        layout.append((k, 2, None))
        marks.append(((), sub[1]))
      else:
        layout.append((k, 1, None))
        spec = self.child(sub, marks)
        if spec is not None:
          views[k] = spec
      found.extend((k, sub, p, t) for p, t in marks)
    # A node whose subtree refers to an object met before it gets a view from its
    # parent; then every reference in its subtree is put back by the first
    # ancestor that is no view (a view holds the original objects, which its own
    # walk would not know for the ones it copies).
    if i and any(t < i for _, _, _, t in found):
      outside = [((k, *p), t) for k, _, p, t in found]
    else:
      for k, sub, p, t in found:
        refs.append(((k, *p), self.path(t)[len(base) :]))
        if p:
          views[k] = _mark(views.get(k), sub, p)
    flag = _pytree_flags.mode_attrs(self.nodes[i]) if module else None
    nd = NodeDef(
      cls,
      meta,
      tuple(layout),
      tuple(refs),
      tuple(views.get(k) for k, kind, _ in layout if kind == 1) if views else (),
      flag,
      module,
    )
    if not outside and i:
      d_i = getattr(self.nodes[i], "__dict__", None)
      if d_i is not None:
        d_i[_RECORD] = (_version._epoch[0], nd)
    return nd, outside

  def child(self, sub: tuple, marks: list) -> Any:
    """A child's view spec (None: no view needed for statics), appending the
    references found in it to ``marks`` (paths relative to the child)."""
    tag = sub[0]
    if tag == NODE:
      _, outside = self.node(sub)
      marks.extend(outside)
      return None
    if tag in (SEQ, MAP):
      items = enumerate(sub[2]) if tag == SEQ else sub[2]
      spec: dict = {}
      for k, s in items:
        t = s[0]
        if t == STATIC:
          spec[k] = _WRAP
        elif t == REF:
          marks.append(((k,), s[1]))
        elif t in (NODE, SEQ, MAP):
          inner: list = []
          sub_spec = self.child(s, inner)
          if sub_spec is not None:
            spec[k] = sub_spec
          marks.extend(((k, *p), t2) for p, t2 in inner)
      return ("c", spec) if spec else None
    return None


def _data_names(node: Any) -> Any:
  """The attributes of a Module marked as data (``nnx.data(...)``, ``nnx.Data[...]``
  annotations), or None: where such an attribute holds None it is a pytree child,
  so ``eqx.tree_at(..., is_leaf=lambda x: x is None)`` can put a Param there."""
  fields = getattr(type(node), "_nnx_fields", None)
  marks = node.__dict__.get("_nnx_marks")
  if not (fields or marks):
    return None
  kinds = {**(fields or {}), **(marks or {})}
  return {k for k, kind in kinds.items() if kind}


def _mark(spec: Any, sub: tuple, path: tuple) -> Any:
  """``spec`` (a view spec of the child defined by ``sub``, or None) with a marker
  at ``path`` below it."""
  if not path:
    return MARK
  kind = "n" if sub[0] == NODE else "c"
  entries = dict(spec[1]) if spec is not None else {}
  k = path[0]
  inner_sub = _sub_def(sub, k)
  entries[k] = _mark(entries.get(k) if entries.get(k) is not _WRAP else None, inner_sub, path[1:])
  return (kind, entries)


def _sub_def(sub: tuple, k: Any) -> tuple:
  tag = sub[0]
  if tag == NODE:
    return dict(sub[3])[k]
  if tag == SEQ:
    return sub[2][k]
  return dict(sub[2])[k]


MAX_DEPTH = 256
"""Deepest nesting (nodes and containers) a graph flattens to as a JAX pytree."""


def _compute(node: Any) -> NodeDef:
  w = walk_uncached(node)
  if w.graphdef.depth > MAX_DEPTH:
    raise PytreeDepthError(
      f"This {type(node).__name__} nests {w.graphdef.depth} levels of modules and"
      f" containers; as a JAX pytree it nests as deep, and JAX's pytree functions"
      f" (jax.tree.*, jax.jit over a module, eqx.filter_jit, eqx.tree_at) recurse once"
      f" per level and overflow near 1,000 levels, so nnx_eqx flattens at most"
      f" {MAX_DEPTH}. Fix: use the graph API, which walks any depth (nnx.split /"
      f" nnx.merge, nnx.state, nnx.jit, nnx.grad, ...), e.g. `graphdef, state ="
      f" nnx.split(model)` and pass `nnx.state(model).flat_state()` to jax.tree."
    )
  nd, _ = _Deriver(w).node(w.graphdef.defn)
  d = node.__dict__
  if _PREFIX not in d:
    d[_RECORD] = (_EPOCH[0], nd)
  return nd


def node_def(node: Any) -> NodeDef:
  """The :class:`NodeDef` of ``node``, from its record while it is valid."""
  rec = node.__dict__.get(_RECORD)
  if rec is not None and rec[0] == _EPOCH[0]:
    return rec[1]
  return _compute(node)


_EPOCH = _version._epoch
_PENDING = _lost_updates.PENDING
_MODE_CHILD = _pytree_flags.OVERRIDE
_Mode = _pytree_flags.Mode
_lost_updates.ON_MARK[0] = _new_generation


# --------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------
def _view(value: Any, spec: Any) -> Any:
  """A shallow copy of ``value`` (a node or container) with markers, wrapped
  static items and views of its own children, as ``spec`` says."""
  if spec is MARK:
    return MARK
  kind, entries = spec
  if kind == "n":
    impl: Any = node_impl(type(value))
    if impl is _MODULE_IMPL_HOLDER[0]:
      obj = _new(type(value))
      copied = {k: v for k, v in value.__dict__.items() if k not in PRIVATE_CACHES}
      for k, s in entries.items():
        copied[k] = _view(copied[k], s)
      _set(obj, "__dict__", copied)
    else:
      items = [(k, _view(v, entries[k]) if k in entries else v) for k, v in impl.children(value)]
      obj = impl.create(type(value), impl.metadata(value), current_trace())
      impl.set_children(obj, items)
    # The view's structure is the original's with markers: known from the last
    # view made by the same spec, or from the aux it was rebuilt from (see
    # ``_keep_view_records``); a walk of the view would read leaf values as types.
    vd: Any = getattr(value, "__dict__", None)
    d: Any = getattr(obj, "__dict__", None)
    if vd is None or d is None:
      return obj
    epoch = _version._epoch[0]
    vr = vd.get(_VIEW_RECORD)
    if vr is not None and vr[0] == epoch and vr[1] is spec:
      d[_RECORD] = (epoch, vr[2])
    else:
      vd[_VIEW_RECORD] = (epoch, spec, _compute(obj))
    return obj
  return _replace_items(value, entries, _view_item)


def _view_item(v: Any, s: Any) -> Any:
  return StaticItem(v) if s is _WRAP else _view(v, s)


def _take_new(_: Any, new: Any) -> Any:
  return new


def _replace_items(value: Any, entries: dict, fn) -> Any:
  """A copy of the tuple/list/namedtuple/dict ``value`` with each ``entries`` key's
  item replaced by ``fn(item, entry)``."""
  t = type(value)
  if t is tuple or t is list:
    items = list(value)
    for k, s in entries.items():
      items[k] = fn(items[k], s)
    return t(items)
  if isinstance(value, tuple) and hasattr(value, "_fields"):
    return value._replace(**{k: fn(getattr(value, k), s) for k, s in entries.items()})  # type: ignore[attr-defined]
  if isinstance(value, dict):
    out = dict(value) if t is dict else value.__class__(value)
    for k, s in entries.items():
      out[k] = fn(value[k], s)
    return out
  return value  # another JAX pytree: flattened as it is


# --------------------------------------------------------------------------
# The pytree functions
# --------------------------------------------------------------------------
def _children(node: Any, nd: NodeDef) -> list:
  if nd.module:
    d = node.__dict__
    kids = [d[k] for k in nd.keys]
  else:
    by_key = dict(node_impl(type(node)).children(node))  # type: ignore[union-attr]
    kids = [by_key[k] for k in nd.keys]
  for j, s in enumerate(nd.views):
    if s is not None:
      kids[j] = _view(kids[j], s)
  if nd.flag is not None:
    kids.append(_pytree_flags.child(node, nd.mode))
  return kids


def _flatten_pending(node: Any) -> tuple[list, NodeDef]:
  """Flattens while writes to copies are pending: counts the Variables among
  the children as carried on (a map with ``is_leaf`` stopping at Variables
  never flattens them themselves)."""
  pv = node.__dict__.get(_PREFIX)
  if pv is not None:
    return _prefix_children(node, pv), pv
  nd = node_def(node)
  kids = _children(node, nd)
  _lost_updates.check_flattened(kids)
  again = node_def(node)
  if again is not nd:  # (a drop found just now started a new generation of structures)
    nd, kids = again, _children(node, again)
  return kids, nd


def flatten(node: Any) -> tuple[Any, NodeDef]:
  """``(children, aux)`` of a graph node (JAX's flatten)."""
  if _PENDING:  # written copies exist
    return _flatten_pending(node)
  d = node.__dict__
  rec = d.get(_RECORD)
  if rec is not None and rec[0] == _EPOCH[0]:
    nd = rec[1]
    g = nd.getter
    if g is not None:  # the common case, inline
      return ((g(d),) if nd.single else g(d)), nd
    g = nd.fgetter
    if g is not None:  # a node with a mode child, last (``_pytree_flags.child``, inline)
      m = nd.mode
      ov = d.get(_MODE_CHILD)
      return (*g(d), ov if ov.__class__ is _Mode and ov.value is m.value else m), nd
    if nd.plain and not nd.views:
      kids = [d[k] for k in nd.keys]
      if nd.flag is not None:
        kids.append(_pytree_flags.child(node, nd.mode))
      return kids, nd
    return _children(node, nd), nd
  pv = d.get(_PREFIX)
  if pv is not None:
    return _prefix_children(node, pv), pv
  nd = _compute(node)
  return _children(node, nd), nd


def flatten_with_keys(node: Any) -> tuple[list, NodeDef]:
  """``([(JAX key, child)], aux)`` of a graph node."""
  pv = node.__dict__.get(_PREFIX)
  if pv is not None:
    return list(zip(pv.jkeys, _prefix_children(node, pv))), pv
  nd = node_def(node)
  kids = _children(node, nd)
  if _PENDING:
    _lost_updates.check_flattened(kids)
  return list(zip(nd.jkeys, kids)), nd


# --------------------------------------------------------------------------
# Tree-mode prefix copies (``nnx.prefix(..., graph=False)``)
# --------------------------------------------------------------------------
_PREFIX = "_nnx_prefix_view"


def mark_prefix_copy(copy: Any, original: Any) -> None:
  """Makes ``copy`` (a graph shaped like ``original``, prefix values where its
  Variables and arrays are) flatten with ``original``'s aux data at every node,
  so it is a JAX prefix of ``original`` (``jax.vmap(in_axes=copy)`` takes it)."""
  stack = [(copy, original)]
  while stack:
    c, o = stack.pop()
    nd = node_def(o)
    c.__dict__[_PREFIX] = nd
    for k in nd.keys:
      try:
        cv, ov = _get(c, (k,)), _get(o, (k,))
      except (KeyError, IndexError, TypeError, AttributeError):
        continue
      if node_impl(type(ov)) is not None and getattr(cv, "__dict__", None) is not None:
        stack.append((cv, ov))


def _prefix_children(node: Any, nd: NodeDef) -> list:
  kids = []
  for k in nd.keys:
    try:
      kids.append(_get(node, (k,)))
    except (KeyError, IndexError, TypeError, AttributeError):
      kids.append(None)
  if nd.flag is not None:
    kids.append(None)  # the Mode child has no leaves
  return kids


def unflatten(nd: NodeDef, children: Any) -> Any:
  """A new node of ``nd``'s class with ``children`` (JAX's unflatten): no
  ``__init__``, no ``__setattr__``; shared objects put back at every path."""
  if nd.plain:  # the common case (a Module, no shared objects)
    return nd.build(nd, children)
  cls = nd.cls
  trace = current_trace()
  kids = children if type(children) is list else list(children)
  flag_value = kids.pop() if nd.flag is not None else None
  d: Any
  if nd.module:
    obj = _new(cls)
    d = nd.statics.copy()  # (with ``_nnx_in_graph``, as every Module's NodeDef)
    d["_nnx_trace"] = trace
    d.update(zip(nd.keys, kids))
    _set(obj, "__dict__", d)
  else:
    impl: Any = node_impl(cls)
    obj = impl.create(cls, nd.meta, trace)
    by_key = dict(zip(nd.keys, kids))
    impl.set_children(
      obj,
      [
        (k, sv.value if kind == 0 else by_key[k] if kind == 1 else MARK)
        for k, kind, sv in nd.layout
      ],
    )
    d = obj.__dict__
    if "_nnx_trace" in d:
      d["_nnx_in_graph"] = True
  record = True
  if nd.refs:
    for kid, spec in zip(kids, nd.views):
      if spec is not None:
        _keep_view_records(kid, spec)
    for mpath, tpath in nd.refs:
      _put(obj, mpath, _get(obj, tpath))
  if nd.flag is not None:
    record = _pytree_flags.apply(obj, nd.flag, flag_value)
  if record:
    d[_RECORD] = (_EPOCH[0], nd)
  return obj


def _keep_view_records(obj: Any, spec: Any) -> None:
  """Before the markers in the rebuilt views below a node are replaced: keeps
  each rebuilt view's record as the record of its next view by ``spec``."""
  if spec is MARK or spec is _WRAP:
    return
  kind, entries = spec
  if kind == "n":
    d: Any = getattr(obj, "__dict__", None)
    rec = None if d is None else d.get(_RECORD)
    if rec is not None:
      d[_VIEW_RECORD] = (rec[0], spec, rec[1])
  for k, s in entries.items():
    try:
      _keep_view_records(_get(obj, (k,)), s)
    except (KeyError, IndexError, TypeError, AttributeError):
      continue


def _get(obj: Any, path: tuple) -> Any:
  for k in path:
    impl = node_impl(type(obj))
    if impl is _MODULE_IMPL_HOLDER[0]:
      obj = obj.__dict__[k]
    elif impl is not None:
      obj = dict(impl.children(obj))[k]
    elif isinstance(obj, tuple) and hasattr(obj, "_fields") and type(k) is str:
      obj = getattr(obj, k)
    else:
      obj = obj[k]
  return obj


def _put(obj: Any, path: tuple, value: Any) -> None:
  """Sets ``value`` at ``path`` below ``obj`` where a marker is (a replaced
  subtree without the marker is left alone); immutable containers on the way
  are rebuilt."""
  chain = [obj]
  for k in path[:-1]:
    try:
      chain.append(_get(chain[-1], (k,)))
    except (KeyError, IndexError, TypeError, AttributeError):
      return
  try:
    if _get(chain[-1], path[-1:]) is not MARK:
      return
  except (KeyError, IndexError, TypeError, AttributeError):
    return
  for j in range(len(path) - 1, -1, -1):
    parent, k = chain[j], path[j]
    impl = node_impl(type(parent))
    if impl is not None:
      if impl is _MODULE_IMPL_HOLDER[0]:
        parent.__dict__[k] = value
      else:
        impl.set_key(parent, k, value)
      d = getattr(parent, "__dict__", None)
      if d is not None:
        d.pop(_RECORD, None)  # its record had the marker
      return
    if isinstance(parent, (list, dict)):
      parent[k] = value
      return
    value = _replace_items(parent, {k: value}, _take_new)  # an immutable container


def register_pytree(cls: type) -> None:
  """Registers a graph node class as a nested JAX pytree that keeps sharing."""
  jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)

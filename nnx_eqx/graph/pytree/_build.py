"""Rebuilding plain Module nodes from their pytree children, with generated code.

JAX calls a node's unflatten once per Module each time it rebuilds a tree that
holds it (every ``eqx.filter_jit`` call, ``eqx.partition``, ``apply_updates``,
``jax.tree.map``), so this is the hottest path of the pytree view. As Equinox
does for its modules, the function that fills a new node's ``__dict__`` is
generated once per tuple of child names: item assignments by constant key are
about three times faster than ``dict.update(zip(keys, children))``.

A *plain* node is a Module whose subtree shares nothing with the rest of the
tree (see :class:`~._pytree_view.NodeDef`); its new ``__dict__`` is the node
definition's ``base`` (static attributes, the trace token and the record) with
the children put in.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from .. import _version
from ..tracing import _lost_updates
from ..tracing import _traces as _tracing
from ..walk._node_types import node_impl
from . import _flags as _pytree_flags

RECORD = "_nnx_pv"
"""The attribute holding a node's ``(epoch, NodeDef)`` record, or ``(epoch,
NodeDef, NodeRef)`` once the node was flattened."""

FROM = "_nnx_from"
"""The attribute of a rebuilt node holding the aux data (a :class:`NodeRef`) it
was rebuilt from: where its Variables' values came from (see ``_lost_updates``)."""


MAX_ORIGINS = 16
"""Pytree maps followed outwards from the node a copy was rebuilt from."""


class NodeRef:
  """The aux data a node flattens with: its :class:`NodeDef` and a weak
  reference to the node itself.

  It compares and hashes as the NodeDef (so compiled-program caches hit for
  every node of one structure), yet a node rebuilt from it knows the very node
  it was rebuilt from: a copy rebuilt inside a JAX trace is linked to it (see
  ``_lost_updates``). Weak, so a cache holding the aux keeps no model alive; it
  pickles as the NodeDef.
  """

  __slots__ = ("nd", "src", "origin", "depth")
  nd: Any
  src: Any
  origin: Any
  depth: int

  def __init__(self, nd: Any, node: Any, origin: Any):
    if type(origin) is not NodeRef:
      origin = None
    while origin is not None and (origin.src is None or origin.src() is None):
      origin = origin.origin  # (temporaries gone: not kept)
    depth = origin.depth + 1 if type(origin) is NodeRef else 0
    if depth > MAX_ORIGINS:  # (a chain of rebuilds, as a training loop makes: cut)
      origin, depth = None, 0
    self.nd, self.origin, self.depth = nd, origin, depth
    try:
      self.src = weakref.ref(node)
    except TypeError:  # (a node type without weak references)
      self.src = None

  def __eq__(self, other: Any) -> bool:
    if type(other) is NodeRef:
      other = other.nd
    return self.nd is other or self.nd == other

  def __hash__(self) -> int:
    return hash(self.nd)

  def __reduce__(self):
    return self.nd.__reduce__()

  def __repr__(self) -> str:
    return repr(self.nd)


_EPOCH = _version._epoch
_MAX_GENERATED = 256  # more children (a long ``nnx.List``): the loop, not a long function


def rebase(nd: Any, ref: Any) -> None:
  """Sets ``nd.base`` for nodes rebuilt in the trace ``ref`` names, this epoch
  (``nd.base_key[2]``: whether that trace is a JAX transformation's, whose
  rebuilt nodes are copies to link; see :func:`link_copy`)."""
  epoch = _EPOCH[0]
  entry = _tracing.entry(ref)
  base = nd.statics.copy()
  base["_nnx_trace"] = entry[1]
  base[RECORD] = (epoch, nd)
  nd.base, nd.base_key = base, (ref, epoch, entry[2])


def children_of(node: Any, nd: Any) -> list:
  """``node``'s children at ``nd.keys`` (None where it has none)."""
  d = node.__dict__
  if nd.module:
    return [d.get(k) for k in nd.keys]
  impl: Any = node_impl(type(node))
  by_key = dict(impl.children(node)) if impl is not None else {}
  return [by_key.get(k) for k in nd.keys]


def link_copy(src: NodeRef, copies: Any) -> None:
  """``copies`` (the children of a node rebuilt from ``src`` in a JAX trace)
  are linked to the children of the node ``src`` names and, further out, of
  the nodes that one was rebuilt from (see ``_lost_updates.link``)."""
  levels = []
  ref: Any = src
  for _ in range(MAX_ORIGINS):
    if type(ref) is not NodeRef:
      break
    node = None if ref.src is None else ref.src()
    if node is not None:  # (a temporary gone since: the node it was rebuilt from, further out)
      levels.append(children_of(node, ref.nd))
    ref = ref.origin
  if levels:
    _lost_updates.link(copies, levels)


_TEMPLATE = """
def build(nd, c, src):
  ref = TRACE_REF.value
  key = nd.base_key
  if key[0] is not ref or key[1] is not EPOCH[0]:
    rebase(nd, ref)
    key = nd.base_key
  d = nd.base.copy()
{fill}
  d[FROM] = src
  if key[2] and src.__class__ is NODEREF:
    link_copy(src, c)
  obj = new(nd.cls)
  setattr_(obj, "__dict__", d)
  if nd.flag is not None and not apply_flag(obj, nd.flag, c[-1]):
    del d[RECORD]  # rebuilt in another mode: its record is computed again
  return obj
"""


def _generate(fill: str) -> Any:
  namespace = {
    "TRACE_REF": _tracing.TRACE_REF,
    "EPOCH": _EPOCH,
    "rebase": rebase,
    "link_copy": link_copy,
    "NODEREF": NodeRef,
    "FROM": FROM,
    "new": object.__new__,
    "setattr_": object.__setattr__,
    "apply_flag": _pytree_flags.apply,
    "RECORD": RECORD,
  }
  exec(compile(_TEMPLATE.format(fill=fill), "<nnx_eqx node builder>", "exec"), namespace)  # noqa: S102
  return namespace["build"]


_BUILD_BY_LOOP = _generate("  for k, v in zip(nd.keys, c):\n    d[k] = v")


@functools.lru_cache(maxsize=1024)
def builder(keys: tuple) -> Any:
  """``build(nd, children, src)``: a new plain node of ``nd`` whose attributes
  ``keys`` are ``children`` (in order; a mode child, if any, last), rebuilt
  from the aux data ``src`` (``nd`` or a :class:`NodeRef` to a node of ``nd``)."""
  if len(keys) > _MAX_GENERATED or not all(type(k) in (str, int) for k in keys):
    return _BUILD_BY_LOOP  # (no code is made of unusual names)
  return _generate("\n".join(f"  d[{k!r}] = c[{i}]" for i, k in enumerate(keys)) or "  pass")

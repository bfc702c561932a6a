"""``eqx.nn.Shared`` <-> one Variable (or Module) reachable from several paths.

Equinox models are trees, so a tied weight is written as ``eqx.nn.Shared(pytree,
where, get)``: the nodes at ``where`` are replaced by placeholders and filled
with ``get(pytree)`` on each call. NNX graphs share by reference.

* Equinox -> NNX: the ``where``/``get`` paths are recovered by calling both
  functions on a copy of the pytree whose leaves are their key-path strings;
  the tied positions then convert to one Variable (or Module). The result is
  :class:`Shared`, an NNX module that keeps ``where``/``get`` and the original
  placeholders, so converting back gives the very same ``eqx.nn.Shared``.
* NNX -> Equinox: Variables or Modules reached from several paths (outside a
  :class:`Shared`) are tied by wrapping the converted root in
  :class:`SharedRoot`. Its ``where``/``get`` selectors compare by their paths
  and its placeholder is cached per GraphDef, so converting the same model
  again gives an equal pytree and ``eqx.filter_jit`` does not retrace.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.tree_util as jtu

try:  # the placeholder class eqx.nn.Shared itself uses
  from equinox.nn._shared import SharedNode
except ImportError:  # pragma: no cover

  class SharedNode:  # type: ignore[no-redef]
    def __repr__(self):
      return "SharedNode"


from ...graph.api._functional import graphdef as _graphdef
from ...graph.walk._links import path_of
from ...module._module import Module
from .._errors import SharedConversionError
from ..walk import _registry
from ..walk._context import FromEqxContext, build_eqx, navigate
from ..walk._eqx_state import fmt_path
from ..walk._iter import pytree_children
from ..walk._to_eqx import ToEqxContext
from ._bridged import NnxModule, call_nnx


# --------------------------------------------------------------------------
# Paths of where/get
# --------------------------------------------------------------------------
class KeyPathStr(str):
  """A probe leaf: the key-path string of the leaf it stands for."""

  path: tuple


def _probe_leaf(kp: tuple, _: Any) -> KeyPathStr:
  s = KeyPathStr(jtu.keystr(kp))
  s.path = tuple(kp)
  return s


def _index_nodes(tree: Any, path: tuple, out: dict) -> None:
  out[id(tree)] = path
  if isinstance(tree, KeyPathStr):
    return
  children, _ = jtu.tree_flatten_with_path(tree, is_leaf=lambda x: x is not tree)
  for kp, child in children:
    _index_nodes(child, path + kp, out)


def _resolve(fn: Any, name: str, probe: Any, index: dict, where_at: tuple) -> tuple[list, bool]:
  try:
    res = fn(probe)
  except Exception as e:  # noqa: BLE001 - any failure means `fn` computes on leaves
    raise SharedConversionError(
      f"nnx.from_eqx: `{name}` of the eqx.nn.Shared at {fmt_path(where_at)} failed on a"
      f" tree of key paths ({type(e).__name__}: {e}). It must only select nodes,"
      " e.g. `lambda t: t[0].weight`, not compute new arrays such as"
      " `lambda t: t[0].weight.T`: a shared Variable has one value. Fix: store the"
      " weight in the layout both layers use (or transpose inside the layer), or"
      " register a converter for this model."
    ) from None
  if id(res) in index:
    return [index[id(res)]], True
  if isinstance(res, (tuple, list)) and all(id(r) in index for r in res):
    return [index[id(r)] for r in res], False
  raise SharedConversionError(
    f"nnx.from_eqx: `{name}` of the eqx.nn.Shared at {fmt_path(where_at)} returned"
    f" {type(res).__name__} {str(res)[:60]!r}, which is not a node of the shared"
    " pytree: it transforms arrays instead of selecting them, and a shared Variable"
    " has one value. Fix: make `get`/`where` pure selections (e.g."
    " `lambda t: t[0].weight`) and store the weight in the layout both layers use."
  )


def recover_paths(shared: eqx.nn.Shared, at: tuple) -> tuple[list, list]:
  """``(where_paths, get_paths)`` of an ``eqx.nn.Shared``, relative to its pytree.

  Raises:
    SharedConversionError: if ``where``/``get`` compute on leaves (e.g. transpose)
      or return different numbers of nodes.
  """
  probe = jtu.tree_map_with_path(_probe_leaf, shared.pytree)
  index: dict = {}
  _index_nodes(probe, (), index)
  where_paths, _ = _resolve(shared.where, "where", probe, index, at)
  get_paths, _ = _resolve(shared.get, "get", probe, index, at)
  if len(where_paths) != len(get_paths):
    raise SharedConversionError(
      f"nnx.from_eqx: the eqx.nn.Shared at {fmt_path(at)} selects"
      f" {len(where_paths)} node(s) with `where` but {len(get_paths)} with `get`."
      " Fix: make both return the same number of nodes."
    )
  return where_paths, get_paths


def tie_convert(ctx: FromEqxContext, full: Any, base: tuple, where_paths, get_paths) -> Any:
  """Converts the materialised tree ``full`` (at ``base``) so that each ``where``
  position gets the very same NNX object as its ``get`` position."""
  groups = set()
  for w, g in zip(where_paths, get_paths):
    group = ("tie", base + tuple(g))
    groups.add(group)
    ctx._ties[base + tuple(g)] = group
    ctx._ties[base + tuple(w)] = group
  n_links = len(ctx.links)
  for attempt in range(2):
    out = ctx.convert(full, base)
    clash = {g for g in groups if len(ctx._fns.get(g, ())) > 1}
    if not clash:
      return out
    if attempt:
      break
    # A tied array is used in two layouts (e.g. Embedding.weight and Linear.weight):
    # convert again, asking those layers to keep Equinox's layout.
    ctx._keep |= clash
    for key in [k for k in ctx._memo if k[0] in groups]:
      del ctx._memo[key]
    for g in clash:
      ctx._fns.pop(g, None)
    for link in ctx.links[n_links:]:
      ctx._link_ids.discard(id(link.state_index))
    del ctx.links[n_links:]
  raise SharedConversionError(
    f"nnx.from_eqx: the arrays tied at {', '.join(fmt_path(g[1]) for g in clash)} are"
    " used by layers that store them in different layouts, and one of them cannot"
    " keep Equinox's layout. Fix: register a converter that keeps the layout"
    " (`ctx.keep_layout(...)` tells it when), or untie the weights."
  )


# --------------------------------------------------------------------------
# The NNX mirror of eqx.nn.Shared
# --------------------------------------------------------------------------
class Shared(Module):
  """NNX form of ``eqx.nn.Shared``: ``pytree`` holds the tied nodes as one object.

  Created by ``nnx.from_eqx``; ``where``, ``get`` and the Equinox placeholders
  are kept (static) so that ``nnx.to_eqx`` rebuilds the same ``eqx.nn.Shared``.
  Calling it returns ``pytree``, as calling ``eqx.nn.Shared`` returns the tree
  with its nodes tied.

  Example:
    >>> import equinox as eqx, jax, nnx_eqx as nnx
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> emb = eqx.nn.Embedding(5, 3, key=k1); lin = eqx.nn.Linear(3, 5, key=k2)
    >>> tied = eqx.nn.Shared((emb, lin), lambda t: t[1].weight, lambda t: t[0].weight)
    >>> m = nnx.from_eqx(tied)
    >>> m.pytree[0].embedding is m.pytree[1].weight
    True
  """

  pytree: Any
  where: Callable[..., Any]
  get: Callable[..., Any]
  placeholders: Any

  def __call__(self):
    return self.pytree


def _as_tuple(x: Any, single: bool) -> tuple:
  return (x,) if single else tuple(x)


def shared_to_nnx(s: eqx.nn.Shared, ctx: FromEqxContext) -> Shared:
  where_paths, get_paths = recover_paths(s, ctx.path)
  base = ctx.path + (jtu.GetAttrKey("pytree"),)
  pytree = tie_convert(ctx, s(), base, where_paths, get_paths)
  out = Shared()
  out.pytree = pytree
  out.where = s.where
  out.get = s.get
  out.placeholders = s.where(s.pytree)
  return out


def shared_to_eqx(m: Shared, ctx: ToEqxContext) -> eqx.nn.Shared:
  tree = ctx.child("pytree")
  w, g = m.where(tree), m.get(tree)
  single = not isinstance(m.placeholders, (tuple, list))
  for a, b in zip(_as_tuple(w, single), _as_tuple(g, single)):
    if a is not b:
      raise SharedConversionError(
        f"nnx.to_eqx: the nodes that the Shared at {fmt_path(ctx.path)} ties are no"
        " longer the same object (a `where` position was reassigned). Fix: assign"
        " the same Variable/Module to both positions, or build a new eqx.nn.Shared."
      )
  pytree = eqx.tree_at(m.where, tree, replace=m.placeholders)
  return build_eqx(eqx.nn.Shared, pytree=pytree, where=m.where, get=m.get)


# --------------------------------------------------------------------------
# Ties across a whole converted NNX graph
# --------------------------------------------------------------------------
class Select:
  """``where``/``get`` for :class:`SharedRoot`: selects the nodes at key paths.

  Equal (and equally hashed) when the paths are equal, so two conversions of
  one model give equal ``eqx.nn.Shared`` objects.

  Example:
    >>> import jax.tree_util as jtu, nnx_eqx as nnx
    >>> nnx.bridge.Select([(jtu.SequenceKey(1),)])(("a", "b"))
    ('b',)
  """

  __slots__ = ("paths",)

  def __init__(self, paths):
    self.paths = tuple(tuple(p) for p in paths)

  def __call__(self, tree: Any) -> tuple:
    return tuple(navigate(tree, p) for p in self.paths)

  def __eq__(self, other):
    return isinstance(other, Select) and other.paths == self.paths

  def __hash__(self):
    return hash(self.paths)

  def __repr__(self):
    return "Select(" + ", ".join(jtu.keystr(p) for p in self.paths) + ")"


class SharedRoot(eqx.nn.StatefulLayer):
  """What ``nnx.to_eqx`` returns for a graph that shares Variables or Modules.

  ``shared`` is an ``eqx.nn.Shared`` whose pytree is the converted model; calls
  and attribute reads are forwarded to the tied model (``shared()``), so it
  exposes the same methods and outputs. ``nnx.from_eqx`` turns it back into the
  model with its sharing.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> a = nnx.Linear(2, 2, rngs=nnx.Rngs(0)); b = nnx.Linear(2, 2, rngs=nnx.Rngs(1))
    >>> b.kernel = a.kernel
    >>> e = nnx.to_eqx(nnx.Sequential([a, b]))
    >>> type(e).__name__, e(jnp.ones(2)).shape
    ('SharedRoot', (2,))
    >>> back = nnx.from_eqx(e)
    >>> back[0].kernel is back[1].kernel
    True
  """

  shared: eqx.nn.Shared

  def __call__(self, *args, **kwargs):
    return self._forward("__call__")(*args, **kwargs)

  def __getattr__(self, name: str):
    if name.startswith("__") or name == "shared":
      raise AttributeError(name)
    return self._forward(name)

  def _forward(self, name: str) -> Any:
    inner = self.shared()
    if isinstance(inner, NnxModule):
      fn = getattr(getattr(type(inner), name, None), "__wrapped__", None)
      if fn is not None:  # an NNX method: rebuild from the root, keeping the ties
        stateful = inner.is_stateful()
        return lambda *a, **k: call_nnx(self, stateful, name, fn, a, k)
    return getattr(inner, name)

  def is_stateful(self) -> bool:
    inner = self.shared()
    return isinstance(inner, eqx.nn.StatefulLayer) and inner.is_stateful()


def shared_root_to_nnx(root: SharedRoot, ctx: FromEqxContext) -> Any:
  s = root.shared
  where_paths, get_paths = recover_paths(s, ctx.path + (jtu.GetAttrKey("shared"),))
  base = ctx.path + (jtu.GetAttrKey("shared"), jtu.GetAttrKey("pytree"))
  return tie_convert(ctx, s(), base, where_paths, get_paths)


_PLAN_CACHE: collections.OrderedDict = collections.OrderedDict()


def tie_root(tree: Any, ctx: ToEqxContext, root: Any) -> Any:
  """Wraps ``tree`` in :class:`SharedRoot` if an object made from a shared
  Variable/Module occurs at several paths (first occurrence = ``get``)."""
  first: dict[int, Any] = {}
  where_paths: list = []
  get_paths: list = []
  tracked = ctx.tracked
  # Pre-order with an explicit stack; a path is kept as (parent, key) links and
  # spelt out only for the tied positions.
  todo: list = [(tree, None)]
  while todo:
    node, link = todo.pop()
    nid = id(node)
    if nid in tracked:
      if nid in first:
        where_paths.append(path_of(link))
        get_paths.append(path_of(first[nid]))
        continue
      first[nid] = link
    items, _ = pytree_children(node)
    if items:
      todo.extend((child, (link, k)) for k, child in reversed(items))
  if not where_paths:
    return tree
  key = _graphdef(root)
  plan = _PLAN_CACHE.get(key)
  if plan is None or plan[0].paths != tuple(map(tuple, where_paths)):
    plan = (Select(where_paths), Select(get_paths), SharedNode())
    _PLAN_CACHE[key] = plan
    if len(_PLAN_CACHE) > 256:
      _PLAN_CACHE.popitem(last=False)
  where, get, placeholder = plan
  pytree = eqx.tree_at(where, tree, replace_fn=lambda _: placeholder)
  return build_eqx(SharedRoot, shared=build_eqx(eqx.nn.Shared, pytree=pytree, where=where, get=get))


_registry.register(eqx.nn.Shared, Shared, to_nnx=shared_to_nnx, to_eqx=shared_to_eqx)
_registry.register(SharedRoot, Module, to_nnx=shared_root_to_nnx)

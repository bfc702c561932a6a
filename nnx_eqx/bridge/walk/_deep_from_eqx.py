"""The walk of ``nnx.from_eqx``: convert a subtree bottom-up with an explicit stack.

The counterpart of ``_deep`` for ``nnx.from_eqx``. Every ``eqx.Module`` that
``FromEqxContext`` converts goes through :func:`convert_below`, which walks the
subtree with its own stack and converts its ``eqx.Module`` objects in
post-order, leaving each result for the ``convert`` call of its parent's
converter to pick up, so no converter call goes deeper. It is the one path, for
shallow and deep models alike.

The walk enters the modules whose conversion converts every dynamic field:
Equinox classes without a registered converter (generic conversion), and the
:class:`nnx.bridge.NnxModule` classes made by ``nnx.to_eqx`` (following their
``_nnx_spec``). A module with a registered converter is converted when its turn
comes and converts its own children (each starting a walk of its own).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax.tree_util as jtu

from ...graph.walk._links import path_of
from . import _registry
from ._eqx_state import is_index
from ._iter import KeyPath, container_items


def _modules_in(value: Any) -> list:
  """``(keys, module)`` for the ``eqx.Module`` objects (not StateIndexes) in
  ``value``, through tuples, lists and dicts, in the conversion's order."""
  out: list = []
  todo: list = [(None, value)]
  while todo:
    link, x = todo.pop()
    if isinstance(x, eqx.Module):
      if not is_index(x):
        out.append((path_of(link), x))
      continue
    items = container_items(x)
    if items:
      todo.extend(((link, k), c) for k, c in reversed(items))
  return out


def _by_spec(value: Any, spec: tuple) -> list:
  """``(keys, module)`` below an attribute of an ``NnxModule`` that ``_nnx_spec``
  describes with ``spec`` (as ``bridged_to_nnx`` rebuilds it)."""
  out: list = []
  todo: list = [(None, value, spec)]
  while todo:
    link, x, s = todo.pop()
    kind = s[0]
    if kind == "node":
      out.extend((path_of(link) + rel, m) for rel, m in _modules_in(x))
    elif kind in ("list", "seq"):
      specs = s[1] if kind == "list" else s[2]
      todo.extend(
        ((link, jtu.SequenceKey(i)), c, cs)
        for i, (c, cs) in reversed(list(enumerate(zip(x, specs))))
      )
    elif kind in ("dict", "map"):
      todo.extend(((link, jtu.DictKey(k)), x[k], cs) for k, cs in reversed(s[1]))
  return out


def _children(module: Any) -> list:
  """``[(keys, child), ...]`` for a module the walk enters (else no children)."""
  t = type(module)
  if _registry.lookup_to_nnx(t) is not None:
    return []
  out: list = []
  if getattr(t, "nnx_type", None) is not None:  # an nnx.bridge.NnxModule (from _bridged)
    spec = dict(getattr(module, "_nnx_spec"))
    for name in [n for n in t.__annotations__ if n in spec]:
      key = (jtu.GetAttrKey(name),)
      out.extend((key + rel, m) for rel, m in _by_spec(getattr(module, name), spec[name]))
    return out
  d = vars(module)
  for f in dataclasses.fields(t):
    if f.name in d and not f.metadata.get("static", False):
      key = (jtu.GetAttrKey(f.name),)
      out.extend((key + rel, m) for rel, m in _modules_in(d[f.name]))
  return out


def convert_below(ctx: Any, root: Any, path: tuple) -> Any:
  """Converts the ``eqx.Module`` ``root`` found at ``path`` and the modules below it,
  deepest first; returns ``root``'s NNX object. Their paths are :class:`KeyPath`
  objects, which cost O(1) to extend."""
  seen = {id(root)}
  stack: list[list] = [[root, KeyPath(path, ()), _children(root), 0]]
  while stack:
    frame = stack[-1]
    module, at, children, i = frame
    if i < len(children):
      frame[3] = i + 1
      rel, child = children[i]
      if id(child) in seen:  # the same object twice: its second place converts it anew
        continue
      seen.add(id(child))
      stack.append([child, at + rel, _children(child), 0])
      continue
    stack.pop()
    out = ctx.convert_module(module, at)
    if not stack:
      return out
    ctx._done[id(module)] = out
  raise AssertionError("unreachable")

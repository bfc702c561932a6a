"""Tree mode (``graph=False``): graphs must be plain pytrees.

In tree mode a graph is treated like a JAX pytree, so each Variable and
Module may appear at one path only and there are no cycles. The walk records
the first repeated reference it meets; :func:`check_tree_mode` turns it into
an error naming both paths.
"""

from __future__ import annotations

import functools

import jax

from .._errors import GraphModeRequiredError, SharedReferenceError
from ..variables._variables import Variable
from ._node_types import STATIC, node_impl
from ._walk import Walk, walk


def _fmt(path: tuple) -> str:
  return "/".join(map(str, path)) or "<root>"


def _raise(fn_name: str, kind: str, first: tuple, second: tuple, what: str) -> None:
  raise SharedReferenceError(
    f"nnx.{fn_name}(graph=False): Duplicate {kind}: the same object is found at paths"
    f" {_fmt(first)} and {_fmt(second)} ({what}). Tree mode does not support shared"
    " references or cycles: it treats the graph as a plain pytree. Fix: use graph mode"
    f" (`nnx.{fn_name}(..., graph=True)`, or outside `nnx.set_graph_mode(False)`), or"
    " give each path its own object."
  )


def check_shared_refs(w: Walk, fn_name: str) -> None:
  """Raises if a graph without nodes (a plain container) holds one
  ``jax.Ref`` at two paths (the walk keeps such containers static).

  Raises:
    SharedReferenceError: naming both paths.
  """
  if w.nodes or not w.graphdef.defn or w.graphdef.defn[0] != STATIC:
    return
  seen: dict[int, tuple] = {}
  for jax_path, leaf in jax.tree_util.tree_leaves_with_path(w.graphdef.defn[1].value):
    if isinstance(leaf, jax.Ref):
      path = tuple(getattr(k, "idx", getattr(k, "key", getattr(k, "name", k))) for k in jax_path)
      if id(leaf) in seen:
        _raise(fn_name, "Ref", seen[id(leaf)], path, "a shared reference")
      seen[id(leaf)] = path


def check_pytree_classes(nodes, paths, fn_name: str) -> None:
  """Raises if a node's class was declared ``pytree=False`` (tree mode treats
  every node as a JAX pytree).

  Raises:
    GraphModeRequiredError: naming the class and its path.
  """
  for i, obj in enumerate(nodes):
    if getattr(type(obj), "_nnx_pytree", True) is False:
      path = paths[i]  # spelled out only here (see ``_links``)
      raise GraphModeRequiredError(
        f"nnx.{fn_name}(graph=False): {type(obj).__name__} is declared with pytree=False,"
        f" which tree mode cannot handle. Found at path {_fmt(path)}. Fix: use graph mode"
        f" (`nnx.{fn_name}(..., graph=True)`), or declare the class without pytree=False."
      )


def check_tree_mode(w: Walk, fn_name: str) -> None:
  """Raises if the walked graph shares an object or has a cycle.

  Args:
    w: the walk of the graph.
    fn_name: the API function, for the message (e.g. ``"split"``).

  Raises:
    SharedReferenceError: (a ``ValueError``) naming the path of the first
      occurrence and of the repeated one.
  """
  check_pytree_classes(w.nodes, w.node_paths, fn_name)
  if w.shared is None:
    check_shared_refs(w, fn_name)
    return
  first, second, obj = w.shared
  cycle = second[: len(first)] == first
  what = "a reference cycle" if cycle else "a shared reference"
  if not cycle and not isinstance(obj, Variable):
    inner = walk(obj, leaf_root=True)
    at = next((p for s, p in zip(inner.slots, inner.paths) if isinstance(s, Variable)), None)
    if at is not None:  # name the duplicated pytree leaf, as a pytree flatten would
      var = inner.slots[inner.paths.index(at)]
      what = f"inside the {type(obj).__name__} found at both paths"
      first, second, obj = (*first, *at), (*second, *at), var
  _raise(fn_name, type(obj).__name__, first, second, what)


def _is_node(x) -> bool:
  return isinstance(x, Variable) or node_impl(type(x)) is not None


def check_call_args(args: tuple, kwargs: dict, fn_name: str) -> Walk | None:
  """Raises if the graph nodes passed to a tree-mode transform share an object.

  Every Module and Variable among ``args`` and ``kwargs`` (nested in tuples,
  lists and dicts too) is walked as one graph, so the same Variable passed
  twice is found as in flax.nnx's tree mode ("Duplicate Param").

  Returns:
    The walk of the arguments, or None when they hold no graph node.

  Raises:
    SharedReferenceError: naming both paths (argument index first).
  """
  if not any(map(_is_node, jax.tree.leaves((list(args), kwargs), is_leaf=_is_node))):
    return None
  w = walk((args, kwargs) if kwargs else args, leaf_root=True)
  check_tree_mode(w, fn_name)
  return w


def check_no_aliasing(w: Walk, before: list, out, fn_name: str) -> None:
  """Raises if ``out`` holds a Variable passed in (tree mode returns new
  Variables only), after putting the arguments' values back as they were.

  Raises:
    SharedReferenceError: naming the output path.
  """
  inputs = {id(n) for n in w.nodes}
  for path, x in jax.tree_util.tree_leaves_with_path(out, is_leaf=_is_node):
    if isinstance(x, Variable) and id(x) in inputs:
      idx = [i for i, slot in enumerate(w.slots) if isinstance(slot, Variable)]
      w.set_leaves(idx, [before[i] for i in idx])
      raise SharedReferenceError(
        f"nnx.{fn_name}(graph=False) does not support Variable aliasing between inputs and"
        f" outputs: the output at {jax.tree_util.keystr(path) or '<root>'} is the"
        f" {type(x).__name__} passed in. Fix: return a copy (nnx.clone), or use graph"
        " mode (graph=True), where outputs keep their identity."
      )


class TreeChecked:
  """A transformed function that checks its node arguments for tree mode
  (:func:`check_call_args`) before each call and, with ``check_outputs``, that
  it returns no input Variable (:func:`check_no_aliasing`); other attributes
  (``lower``, ``eval_shape``, ...) are those of the transformed function."""

  def __init__(self, fn, fn_name: str, check_outputs: bool = True):
    self._fn, self._fn_name, self._check_outputs = fn, fn_name, check_outputs
    self.__wrapped__ = fn
    self.__doc__ = getattr(fn, "__doc__", None)

  def __call__(self, *args, **kwargs):
    w = check_call_args(args, kwargs, self._fn_name)
    if w is None or not self._check_outputs:
      return self._fn(*args, **kwargs)
    before = w.leaves()
    out = self._fn(*args, **kwargs)
    check_no_aliasing(w, before, out, self._fn_name)
    return out

  def __getattr__(self, name: str):
    return getattr(self.__dict__["_fn"], name)

  def __get__(self, instance, owner=None):
    if instance is None:
      return self
    get = getattr(type(self._fn), "__get__", None)
    bound = get(self._fn, instance, owner) if get else functools.partial(self._fn, instance)
    return TreeChecked(bound, self._fn_name, self._check_outputs)

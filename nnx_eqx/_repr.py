"""Readable reprs for Modules, Variables, States and GraphDefs, plus treescope hooks."""

from __future__ import annotations

from typing import Any

import numpy as np

_MAX_DEPTH = 12


def _leaf(x: Any) -> str:
  shape = getattr(x, "shape", None)
  dtype = getattr(x, "dtype", None)
  if shape is not None and dtype is not None:
    if np.size(x) <= 4 and not str(dtype).startswith("key"):
      return f"{type(x).__name__}({np.asarray(x).tolist()!r}, dtype={dtype})"
    return f"{dtype}{list(shape)}"
  r = repr(x)
  return r if len(r) < 80 else r[:77] + "..."


def variable_repr(v) -> str:
  md = "".join(f", {k}={val!r}" for k, val in v._metadata.items())
  return f"{type(v).__name__}(value={_leaf(v._value)}{md})"


def _children(obj) -> list:
  from ._graph import node_impl

  impl = node_impl(type(obj))
  return impl.children(obj) if impl else []


def module_repr(m, indent: str = "", seen: set | None = None, depth: int = 0) -> str:
  from ._graph import is_graph_node
  from ._variables import Variable

  seen = set() if seen is None else seen
  if id(m) in seen:
    return f"{type(m).__name__}(...)  # shared"
  seen.add(id(m))
  if depth > _MAX_DEPTH:
    return f"{type(m).__name__}(...)"
  items = _children(m)
  if not items:
    return f"{type(m).__name__}()"
  inner = indent + "  "
  lines = []
  for k, v in items:
    if is_graph_node(v):
      r = module_repr(v, inner, seen, depth + 1)
    elif isinstance(v, Variable):
      r = variable_repr(v)
    else:
      r = _leaf(v)
    lines.append(f"{inner}{k}={r}")
  return f"{type(m).__name__}(\n" + ",\n".join(lines) + f"\n{indent})"


def state_repr(s, indent: str = "") -> str:
  from ._state import State
  from ._variables import Variable

  if not len(s):
    return "State({})"
  inner = indent + "  "
  lines = []
  for k, v in s.items():
    if isinstance(v, State):
      r = state_repr(v, inner)
    elif isinstance(v, Variable):
      r = variable_repr(v)
    else:
      r = _leaf(v)
    lines.append(f"{inner}{k!r}: {r}")
  return "State({\n" + ",\n".join(lines) + f"\n{indent}}})"


def graphdef_repr(g) -> str:
  root = g.defn
  name = root[1].__name__ if root[0] == 0 else "tuple"
  return f"GraphDef({name}, nodes={g.n_nodes}, leaves={g.num_leaves}, hash={g._hash & 0xFFFF:04x})"


# -- treescope -------------------------------------------------------------
def _attrs_for_treescope(obj) -> dict:
  return {str(k): v for k, v in _children(obj)}


def treescope_module(m, path, subtree_renderer):
  from treescope import repr_lib

  return repr_lib.render_object_constructor(
    object_type=type(m),
    attributes=_attrs_for_treescope(m),
    path=path,
    subtree_renderer=subtree_renderer,
    roundtrippable=False,
  )


def treescope_variable(v, path, subtree_renderer):
  from treescope import repr_lib

  return repr_lib.render_object_constructor(
    object_type=type(v),
    attributes={"value": v._value, **v._metadata},
    path=path,
    subtree_renderer=subtree_renderer,
    roundtrippable=False,
  )


def treescope_state(s, path, subtree_renderer):
  from treescope import repr_lib

  return repr_lib.render_dictionary_wrapper(
    object_type=type(s),
    wrapped_dict=dict(s.items()),
    path=path,
    subtree_renderer=subtree_renderer,
    roundtrippable=False,
  )


def treescope_graphdef(g, path, subtree_renderer):
  from treescope import repr_lib

  return repr_lib.render_object_constructor(
    object_type=type(g),
    attributes={
      "root": g.defn[1].__name__ if g.defn[0] == 0 else "tuple",
      "nodes": g.n_nodes,
      "paths": list(g.paths),
    },
    path=path,
    subtree_renderer=subtree_renderer,
    roundtrippable=False,
  )

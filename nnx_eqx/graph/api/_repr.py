"""Readable reprs for Modules, Variables, States and GraphDefs, plus treescope hooks.

Terminal reprs are compact (the first line of a Module counts its Variables' elements
and bytes per type, as flax.nnx does): arrays with more than ``SMALL_ARRAY`` elements
are summarised as ``float32[64, 32]`` (smaller ones print JAX's repr on one
line), tracers as ``Traced<float32[3]>``,
a Module or Variable reached a second time is printed once and then marked
``# shared with <path>``, and nesting deeper than ``MAX_DEPTH`` is elided
(``STATE_DEPTH`` for States). In notebooks, treescope renders the same objects
as foldable trees (flax.nnx does the same), with one colour per Variable type,
down to ``TREESCOPE_DEPTH`` levels (treescope recurses once per level).
So a graph of any depth prints in time and size bounded by what is shown.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..state._state import State
from ..variables._variables import Variable
from ..walk._graphdef import GraphDef, _metadata_from_def
from ..walk._node_types import (
  LEAF,
  MAP,
  NODE,
  REF,
  SEQ,
  STATIC,
  VAR,
  is_graph_node,
  is_node,
  node_impl,
)
from ._functional import iter_graph

MAX_DEPTH = 8
"""Modules nested deeper than this print as ``Name(...)``; so do lists, tuples
and dicts nested deeper than this inside one attribute."""

STATE_DEPTH = 64
"""States nested deeper than this print as ``State({...})``."""

TREESCOPE_DEPTH = 16
"""Modules, States, GraphDef nodes and containers nested deeper than this are
rendered by treescope as ``Name(...)``: treescope recurses once per level, so
deeper trees would exceed Python's recursion limit."""

SMALL_ARRAY = 4
"""Arrays with at most this many elements print their values."""

_MAX_STATIC = 80


def _shape_str(shape: tuple) -> str:
  return "[" + ", ".join(map(str, shape)) + "]"


def _is_key_dtype(dtype: Any) -> bool:
  try:
    return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
  except TypeError:
    return False


def array_repr(x: Any) -> str | None:
  """Compact repr of an array-like leaf, or None if ``x`` is not one.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.graph.api._repr import array_repr
    >>> array_repr(jnp.zeros((64, 32))), array_repr(jnp.arange(3))
    ('float32[64, 32]', 'Array([0, 1, 2], dtype=int32)')
    >>> array_repr(jnp.ones((2, 2)))
    'Array([[1., 1.], [1., 1.]], dtype=float32)'
    >>> array_repr(jax.ShapeDtypeStruct((2,), jnp.bfloat16))
    'ShapeDtypeStruct(bfloat16[2])'
  """
  if isinstance(x, type):
    return None  # a class such as nnx.Param (its ``shape`` is a property object)
  shape = getattr(x, "shape", None)
  dtype = getattr(x, "dtype", None)
  if shape is None or dtype is None:
    return None
  sd = f"{dtype}{_shape_str(shape)}"
  if isinstance(x, jax.ShapeDtypeStruct):
    return f"ShapeDtypeStruct({sd})"
  if isinstance(x, jax.core.Tracer):
    return f"Traced<{sd}>"
  if not isinstance(x, (jax.Array, np.ndarray, np.generic)):
    return None
  if _is_key_dtype(dtype) or int(np.prod(shape, dtype=np.int64)) > SMALL_ARRAY:
    return sd
  return " ".join(repr(x).split())  # JAX's/NumPy's own repr (as flax.nnx prints), on one line


class _Summary:
  __slots__ = ("text",)

  def __init__(self, text: str):
    self.text = text

  def __repr__(self) -> str:
    return self.text


def _leaf(x: Any) -> str:
  """Compact repr of any leaf or static value (pytrees of arrays summarised)."""
  r = array_repr(x)
  if r is not None:
    return r
  if isinstance(x, type):
    return x.__qualname__
  if isinstance(x, np.dtype):
    return str(x)
  if callable(x) and not hasattr(x, "shape") and isinstance(getattr(x, "__name__", None), str):
    return f"<function {x.__name__}>"  # also jax.custom_jvp functions such as relu
  leaves = jax.tree.leaves(x)
  if leaves and any(array_repr(v) is not None for v in leaves):
    r = repr(jax.tree.map(lambda v: _Summary(array_repr(v) or repr(v)), x))
  else:
    r = repr(x)
  return r if len(r) <= _MAX_STATIC else r[: _MAX_STATIC - 3] + "..."


leaf_repr = _leaf


def variable_repr(v) -> str:
  md = "".join(f", {k}={_leaf(val)}" for k, val in v._metadata.items())
  return f"{type(v).__name__}(value={_leaf(v._value)}{md})"


def _children(obj) -> list:
  impl = node_impl(type(obj))
  return impl.children(obj) if impl else []


def _path_str(path: tuple) -> str:
  return ".".join(map(str, path)) or "<root>"


def module_repr(
  m,
  indent: str = "",
  seen: dict | None = None,
  depth: int = 0,
  path: tuple = (),
  max_depth: int | None = None,
) -> str:
  """Multi-line repr of a Module; shared objects are marked, depth is bounded.

  Example:
    >>> import nnx_eqx as nnx
    >>> class Tied(nnx.Module):
    ...   def __init__(self):
    ...     self.a = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
    ...     self.b = self.a
    >>> print(Tied())  # doctest: +ELLIPSIS
    Tied(  # Param: 2 (8 B), Total: 2 (8 B)
      a=Linear(
        ...
      ),
      b=Linear(...)  # shared with a
    )
  """
  seen = {} if seen is None else seen
  max_depth = MAX_DEPTH if max_depth is None else max_depth
  name = type(m).__name__
  if id(m) in seen:
    return f"{name}(...)  # shared with {_path_str(seen[id(m)])}"
  seen[id(m)] = path
  items = _children(m)
  if not items:
    return f"{name}()"
  if depth >= max_depth:
    return f"{name}(...)"
  inner = indent + "  "
  lines = [
    f"{inner}{k}={_value_repr(v, inner, seen, depth, path + (k,), max_depth)}" for k, v in items
  ]
  head = f"{name}(" if depth or path else f"{name}({size_comment(m)}"
  return head + "\n" + ",\n".join(lines) + f"\n{indent})"


def _bytes_str(n: int) -> str:
  for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
    if n >= scale:
      return f"{n / scale:.1f} {unit}"
  return f"{n} B"


def _leaf_size(x: Any) -> tuple[int, int] | None:
  if not isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
    return None
  n = int(np.prod(x.shape, dtype=np.int64))
  return n, n * int(getattr(x.dtype, "itemsize", 0))


def size_comment(node: Any) -> str:
  """``"  # Param: 6 (24 B), Total: 6 (24 B)"``: elements and bytes of a graph's
  Variables per Variable type (each Variable once, also when shared) and in all,
  as flax.nnx's Module repr shows on its first line; empty without array leaves.

  Example:
    >>> import nnx_eqx as nnx
    >>> from nnx_eqx.graph.api._repr import size_comment
    >>> size_comment(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    '  # Param: 6 (24 B), Total: 6 (24 B)'
  """
  per_type: dict[str, list[int]] = {}
  total = [0, 0]
  for _, x in iter_graph(node):
    size = _leaf_size(x._value if isinstance(x, Variable) else x)
    if size is None:
      continue
    if isinstance(x, Variable):
      acc = per_type.setdefault(type(x).__name__, [0, 0])
      acc[0], acc[1] = acc[0] + size[0], acc[1] + size[1]
    total[0], total[1] = total[0] + size[0], total[1] + size[1]
  if not total[0]:
    return ""
  parts = [f"{k}: {n:,} ({_bytes_str(b)})" for k, (n, b) in per_type.items()]
  parts.append(f"Total: {total[0]:,} ({_bytes_str(total[1])})")
  return "  # " + ", ".join(parts)


def _has_nodes(v: Any) -> bool:
  stack = [v]  # explicit: containers may nest at any depth
  while stack:
    x = stack.pop()
    if is_node(x):
      return True
    if isinstance(x, (list, tuple)):
      stack.extend(x)
    elif isinstance(x, dict):
      stack.extend(x.values())
  return False


def _value_repr(
  v: Any, indent: str, seen: dict, depth: int, path: tuple, max_depth: int, nest: int = 0
) -> str:
  """Repr of one attribute value: Modules and Variables (also inside tuples,
  lists and dicts, ``nest`` deep) recursively with sharing marks, anything
  else compactly."""
  if is_graph_node(v):
    return module_repr(v, indent, seen, depth + 1, path, max_depth)
  if isinstance(v, Variable):
    if id(v) in seen:
      return f"{type(v).__name__}(...)  # shared with {_path_str(seen[id(v)])}"
    seen[id(v)] = path
    return repr(v)
  if isinstance(v, (list, tuple, dict)) and _has_nodes(v):
    open_, close = "{}" if isinstance(v, dict) else "[]" if isinstance(v, list) else "()"
    if nest >= max_depth:
      return f"{open_}...{close}"
    inner = indent + "  "
    n = nest + 1
    if isinstance(v, dict):
      items = [
        f"{inner}{k!r}: {_value_repr(e, inner, seen, depth, path + (k,), max_depth, n)}"
        for k, e in v.items()
      ]
    else:
      items = [
        f"{inner}{_value_repr(e, inner, seen, depth, path + (i,), max_depth, n)}"
        for i, e in enumerate(v)
      ]
    return f"{open_}\n" + ",\n".join(items) + f"\n{indent}{close}"
  return _leaf(v)


def state_repr(s, indent: str = "") -> str:
  # explicit stack of (items left, indent, lines done): States may nest at any depth
  out = None
  stack: list = [(iter(s.items()), indent, [])] if len(s) else []
  while stack:
    it, ind, lines = stack[-1]
    inner = ind + "  "
    if out is not None:  # a nested State just finished
      lines[-1] += out
      out = None
    for k, v in it:
      if isinstance(v, State) and len(v) and len(stack) >= STATE_DEPTH:
        lines.append(f"{inner}{k!r}: State({{...}})")
        continue
      if isinstance(v, State) and len(v):
        lines.append(f"{inner}{k!r}: ")
        stack.append((iter(v.items()), inner, []))
        break
      r = "{}" if isinstance(v, State) else repr(v) if isinstance(v, Variable) else _leaf(v)
      lines.append(f"{inner}{k!r}: {r}")
    else:
      stack.pop()
      body = ",\n".join(lines) + f"\n{ind}}}"
      out = "{\n" + body if stack else "State({\n" + body + ")"  # nested States as dicts (flax)
  return out if out is not None else "State({})"


def _root_name(g) -> str:
  return getattr(g.defn[1], "__name__", "?") if len(g.defn) > 1 else "?"


def graphdef_repr(g) -> str:
  return (
    f"GraphDef({_root_name(g)}, nodes={g.n_nodes}, leaves={g.num_leaves},"
    f" hash={g._hash & 0xFFFF:04x})"
  )


# -- treescope -------------------------------------------------------------
_COLORS = {
  "Param": "#87CEEB",
  "BatchStat": "#98FB98",
  "RngState": "#FFD580",
  "Cache": "#DDA0DD",
  "Intermediate": "#F4A6A6",
}
_DEFAULT_COLOR = "#D3D3D3"


def variable_color(cls: type) -> str:
  """The colour treescope uses for a Variable type (looked up along its MRO)."""
  for base in cls.__mro__:
    if base.__name__ in _COLORS:
      return _COLORS[base.__name__]
  return _DEFAULT_COLOR


_TS_LEVEL = [0]  # how many of our treescope handlers are rendering now


def _counted(subtree_renderer):
  """``subtree_renderer``, counting the levels our handlers are nested in."""

  def render(*args, **kwargs):
    _TS_LEVEL[0] += 1
    try:
      return subtree_renderer(*args, **kwargs)
    finally:
      _TS_LEVEL[0] -= 1

  return render


def _too_deep(obj: Any) -> Any:
  """Treescope's text for ``obj`` when it is nested too deep to render, else None."""
  if _TS_LEVEL[0] < TREESCOPE_DEPTH:
    return None
  from treescope import rendering_parts  # only when a notebook renders

  return rendering_parts.text(f"{type(obj).__name__}(...)")


def _bounded(v: Any) -> Any:
  """``v``, or a note when it holds lists/tuples/dicts nested deeper than
  ``TREESCOPE_DEPTH`` (which treescope's own handlers would recurse through)."""
  if not isinstance(v, (list, tuple, dict)):
    return v
  stack = [(v, 1)]
  while stack:
    x, n = stack.pop()
    if n > TREESCOPE_DEPTH:
      return _Note(f"{type(v).__name__}(...)  # nested deeper than {TREESCOPE_DEPTH}")
    for e in x.values() if isinstance(x, dict) else x:
      if isinstance(e, (list, tuple, dict)):
        stack.append((e, n + 1))
  return v


def treescope_module(m, path, subtree_renderer):
  from treescope import repr_lib  # only when a notebook renders: keeps `import nnx_eqx` light

  deep = _too_deep(m)
  if deep is not None:
    return deep
  return repr_lib.render_object_constructor(
    object_type=type(m),
    attributes={str(k): _bounded(v) for k, v in _children(m)},
    path=path,
    subtree_renderer=_counted(subtree_renderer),
    roundtrippable=False,
  )


def treescope_variable(v, path, subtree_renderer):
  from treescope import repr_lib  # only when a notebook renders: keeps `import nnx_eqx` light

  return repr_lib.render_object_constructor(
    object_type=type(v),
    attributes={"value": v._value, **v._metadata},
    path=path,
    subtree_renderer=subtree_renderer,
    roundtrippable=False,
    color=variable_color(type(v)),
  )


def treescope_state(s, path, subtree_renderer):
  from treescope import repr_lib  # only when a notebook renders: keeps `import nnx_eqx` light

  deep = _too_deep(s)
  if deep is not None:
    return deep
  return repr_lib.render_dictionary_wrapper(
    object_type=type(s),
    wrapped_dict={k: _bounded(v) for k, v in s.items()},
    path=path,
    subtree_renderer=_counted(subtree_renderer),
    roundtrippable=False,
  )


class _DefView:
  """A GraphDef node shown as ``Type(attr=...)`` by treescope."""

  def __init__(self, cls: type, attrs: dict, color: str | None = None):
    self.cls, self.attrs, self.color = cls, attrs, color

  def __treescope_repr__(self, path, subtree_renderer):
    from treescope import repr_lib  # only when a notebook renders: keeps `import nnx_eqx` light

    return repr_lib.render_object_constructor(
      object_type=self.cls,
      attributes=self.attrs,
      path=path,
      subtree_renderer=subtree_renderer,
      roundtrippable=False,
      color=self.color,
    )


class _Note:
  """A fixed piece of text shown by treescope (e.g. ``<array>``, ``<shared: l1>``)."""

  def __init__(self, text: str):
    self.text = text

  def __repr__(self) -> str:
    return self.text

  def __treescope_repr__(self, path, subtree_renderer):
    from treescope import rendering_parts  # only when a notebook renders

    return rendering_parts.text(self.text)


def graphdef_view(g) -> Any:
  """The GraphDef's structure as nested objects that treescope renders: nodes
  as ``Type(attr=...)``, Variables by type and metadata, leaves as ``<array>``,
  shared objects as ``<shared: path>``; nodes and containers deeper than
  ``TREESCOPE_DEPTH`` as ``<...>``."""
  first: dict[int, tuple] = {}

  def view(defn, path):
    tag = defn[0]
    if len(path) >= TREESCOPE_DEPTH and tag in (NODE, SEQ, MAP):
      return _Note("<...>")
    if tag == NODE:
      _, cls, i, attrs, _meta = defn
      first[i] = path
      return _DefView(cls, {str(k): view(sub, path + (k,)) for k, sub in attrs})
    if tag == VAR:
      _, cls, i, mdef = defn
      first[i] = path
      md = {k: v for k, v in _metadata_from_def(mdef).items()}
      return _DefView(cls, md, variable_color(cls))
    if tag == REF:
      return _Note(f"<shared: {_path_str(first.get(defn[1], ()))}>")
    if tag == LEAF:
      return _Note("<array>")
    if tag == STATIC:
      return _bounded(defn[1].value)
    if tag == SEQ:
      items = [view(sub, path + (j,)) for j, sub in enumerate(defn[2])]
      return items if defn[1] is list else tuple(items)
    if tag == MAP:
      return {k: view(sub, path + (k,)) for k, sub in defn[2]}
    return _Note(repr(defn))

  return view(g.defn, ())


def treescope_graphdef(g, path, subtree_renderer):
  from treescope import repr_lib  # only when a notebook renders: keeps `import nnx_eqx` light

  return repr_lib.render_object_constructor(
    object_type=type(g),
    attributes={"root": graphdef_view(g), "leaves": g.num_leaves},
    path=path,
    subtree_renderer=subtree_renderer,
    roundtrippable=False,
  )


def display(*args: Any) -> None:
  """Prints each argument's readable repr (Modules, States, GraphDefs, pytrees).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.display(nnx.Param(jnp.ones(2)), {"a": 1})
    Param(value=Array([1., 1.], dtype=float32))
    {'a': 1}
  """
  for x in args:
    print(repr(x))


# Variables, States and GraphDefs are defined below this module, so their reprs
# are installed on them from here (Modules, above, call ``module_repr`` themselves).
for _cls, _text, _tree in (
  (Variable, variable_repr, treescope_variable),
  (State, state_repr, treescope_state),
  (GraphDef, graphdef_repr, treescope_graphdef),
):
  setattr(_cls, "__repr__", _text)
  setattr(_cls, "__treescope_repr__", _tree)

"""``nnx.tabulate``: a text table of parameter counts and bytes per module and
per Variable type, with each module's output shapes when inputs are given.

This follows the idea of flax.nnx.tabulate, kept simple: one row per module
(at its first path; shared modules and Variables are counted once), one
column per Variable type, exact element counts and byte sizes. Rows hold only
the Variables a module owns directly, so the rows add up to the total.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from ..graph._graph import is_graph_node, walk
from ..graph._variables import Variable
from ..module._rngs import RngState

ARRAY_COLUMN = "array"
"""The column of raw arrays stored on modules (not wrapped in a Variable)."""


@dataclasses.dataclass
class Row:
  """One module of a summary.

  Attributes:
    path: the module's first path (``()`` for the root).
    type_name: the module's class name.
    counts: ``{column: (elements, bytes)}`` of the leaves it owns directly.
    inputs: a shape summary of its first call's inputs (when traced), or ``""``.
    outputs: a shape summary of its first call's outputs, or ``""``.
  """

  path: tuple
  type_name: str
  counts: dict[str, tuple[int, int]]
  inputs: str = ""
  outputs: str = ""


def column_of(leaf: Any) -> str:
  """The summary column of a leaf: its Variable type (Rngs state grouped as
  ``RngState``) or ``"array"`` for raw arrays."""
  if isinstance(leaf, RngState):
    return "RngState"
  if isinstance(leaf, Variable):
    return type(leaf).__name__
  return ARRAY_COLUMN


def size_and_bytes(x: Any) -> tuple[int, int]:
  """``(elements, bytes)`` of an array-like or of every array in a pytree.

  Typed PRNG keys count one element per key and the bytes of their key data.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.training._summary import size_and_bytes
    >>> size_and_bytes(jnp.zeros((3, 4), jnp.bfloat16)), size_and_bytes(jax.random.key(0))
    ((12, 24), (1, 8))
  """
  n = b = 0
  for leaf in jax.tree.leaves(x):
    shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
      continue
    size = int(np.prod(shape, dtype=np.int64))
    n += size
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
      data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(shape, dtype))
      b += int(np.prod(data.shape, dtype=np.int64)) * data.dtype.itemsize
    else:
      b += size * np.dtype(dtype).itemsize
  return n, b


def summarize(model: Any, depth: int | None = None) -> list[Row]:
  """The rows of :func:`tabulate` without call shapes (no inputs needed).

  Args:
    model: a Module (or any graph node).
    depth: modules deeper than this are folded into their ancestor at this
      depth (``0``: one row for the whole model); None shows every module.

  Returns:
    Rows in graph order (parents first).
  """
  w = walk(model)
  rows: dict[tuple, Row] = {}
  for p, obj in zip(w.node_paths, w.nodes):
    if is_graph_node(obj) and (depth is None or len(p) <= depth):
      rows.setdefault(p, Row(p, type(obj).__name__, {}))
  module_paths = set(rows)
  for path, obj in zip(w.paths, w.leaf_objects()):
    owner = _owner_row(path, module_paths)
    col = column_of(obj)
    n, b = size_and_bytes(obj.value if isinstance(obj, Variable) else obj)
    n0, b0 = rows[owner].counts.get(col, (0, 0))
    rows[owner].counts[col] = (n0 + n, b0 + b)
  return list(rows.values())


def _owner_row(path: tuple, module_paths: set) -> tuple:
  for k in range(len(path) - 1, -1, -1):
    if path[:k] in module_paths:
      return path[:k]
  return ()


def totals(rows: list[Row]) -> dict[str, tuple[int, int]]:
  """``{column: (elements, bytes)}`` summed over ``rows``."""
  out: dict[str, tuple[int, int]] = {}
  for r in rows:
    for col, (n, b) in r.counts.items():
      n0, b0 = out.get(col, (0, 0))
      out[col] = (n0 + n, b0 + b)
  return out


# --------------------------------------------------------------------------
# Recording call shapes
# --------------------------------------------------------------------------
def _shapes(tree: Any) -> str:
  def one(x):
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
      return repr(x)
    return f"{dtype}[{', '.join(map(str, shape))}]"

  leaves = jax.tree.leaves(tree)
  return ", ".join(one(x) for x in leaves)


def _recording(orig, record: dict, paths: dict):
  def wrapped(self, *args, **kwargs):
    out = orig(self, *args, **kwargs)
    p = paths.get(id(self))
    if p is not None and p not in record:
      record[p] = (_shapes((args, kwargs)), _shapes(out))
    return out

  return wrapped


@contextlib.contextmanager
def _recording_calls(classes: set[type], record: dict, paths: dict) -> Iterator[None]:
  """Wraps ``__call__`` of ``classes`` so calls by modules in ``paths`` are recorded."""
  patched = []
  try:
    for cls in classes:
      orig = next((c.__dict__["__call__"] for c in cls.__mro__ if "__call__" in c.__dict__), None)
      if orig is None:
        continue
      patched.append((cls, "__call__" in cls.__dict__, orig))
      cls.__call__ = _recording(orig, record, paths)  # type: ignore[method-assign]
    yield
  finally:
    for cls, own, orig in reversed(patched):
      if own:
        cls.__call__ = orig  # type: ignore[method-assign]
      else:
        del cls.__call__


def record_calls(model: Any, inputs: tuple, kwargs: dict) -> dict[tuple, tuple[str, str]]:
  """``{path: (input shapes, output shapes)}`` of each module's first call in
  ``model(*inputs, **kwargs)``, traced abstractly with ``jax.eval_shape`` (the
  model is not changed and nothing is computed)."""
  classes = {type(obj) for obj in walk(model).nodes if is_graph_node(obj)}
  record: dict = {}

  def run(m: Any, args: tuple, kw: dict) -> None:
    paths: dict = {}
    w = walk(m)
    for p, obj in zip(w.node_paths, w.nodes):
      paths.setdefault(id(obj), p)
    with _recording_calls(classes, record, paths):
      m(*args, **kw)

  jax.eval_shape(run, model, inputs, kwargs)
  return record


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------
def _fmt_bytes(b: int) -> str:
  for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
    if b >= scale:
      return f"{b / scale:.1f} {unit}"
  return f"{b} B"


def _fmt_count(nb: tuple[int, int] | None) -> str:
  if nb is None:
    return ""
  n, b = nb
  return f"{n:,} ({_fmt_bytes(b)})"


def tabulate(model: Any, *inputs: Any, depth: int | None = None, **kwargs: Any) -> str:
  """A text table of a model's modules with element counts and bytes per
  Variable type; with inputs, each module's input and output shapes too.

  Follows flax.nnx.tabulate's idea: inputs are traced with ``jax.eval_shape``
  (no computation, the model is unchanged). Shared modules and Variables are
  counted once, at their first path, so the ``Total`` row is exact.

  Args:
    model: a Module (or graph node).
    *inputs: arguments of ``model(...)``; omit to skip the shape columns.
    depth: fold modules deeper than this into their ancestors.
    **kwargs: keyword arguments of ``model(...)``.

  Returns:
    The table as a string (print it).

  Raises:
    GraphStructureError: ``model`` is not a Module or graph node.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Sequence([nnx.Linear(4, 8, rngs=nnx.Rngs(0)),
    ...                       nnx.Linear(8, 2, rngs=nnx.Rngs(1))])
    >>> print(nnx.tabulate(model, jnp.ones((3, 4))))
    path    type      inputs         outputs        Param
    ------  --------  -------------  -------------  ----------
    <root>  Sequence  float32[3, 4]  float32[3, 2]
    0       Linear    float32[3, 4]  float32[3, 8]  40 (160 B)
    1       Linear    float32[3, 8]  float32[3, 2]  18 (72 B)
    ------  --------  -------------  -------------  ----------
    Total                                           58 (232 B)
  """
  rows = summarize(model, depth)
  calls = record_calls(model, inputs, kwargs) if inputs or kwargs else {}
  columns = sorted(totals(rows), key=lambda c: (c != "Param", c == ARRAY_COLUMN, c))
  header = ["path", "type"] + (["inputs", "outputs"] if calls else []) + columns
  body = []
  for r in rows:
    ins, outs = calls.get(r.path, ("", ""))
    cells = [".".join(map(str, r.path)) or "<root>", r.type_name]
    cells += [ins, outs] if calls else []
    body.append(cells + [_fmt_count(r.counts.get(c)) for c in columns])
  tot = totals(rows)
  total = ["Total", ""] + (["", ""] if calls else []) + [_fmt_count(tot[c]) for c in columns]
  widths = [max(len(x[i]) for x in [header, *body, total]) for i in range(len(header))]
  rule = "  ".join("-" * w for w in widths)

  def line(cells: list[str]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

  return "\n".join([line(header), rule, *map(line, body), rule, line(total)])

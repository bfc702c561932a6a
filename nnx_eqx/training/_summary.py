"""``nnx.tabulate``: a table of a model's module calls with their input and
output shapes, and element counts and bytes per Variable type.

As flax.nnx.tabulate: the model is called once abstractly (``jax.eval_shape``,
nothing computed, the model unchanged); every first call of a module method
(``__call__`` or any public method) becomes a row, in call order, drawn with
``rich``. :func:`summarize` gives the per-module counts without calling the
model (one row per module at its first path; shared modules and Variables
counted once; rows hold only the Variables a module owns directly, so they add
up to the total).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from rich.console import Console
from rich.table import Table

from ..graph._errors import refuse_other_library
from ..graph.api._functional import is_graph_node, walk
from ..graph.variables._variables import Variable
from ..module._module import Module
from ..module._rngs import Rngs, RngState, RngStream

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
# Recording calls
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Call:
  """One recorded module method call: the module's first path, the method name,
  the module's class, its arguments and result (``ShapeDtypeStruct`` trees),
  and its FLOP counts when asked for."""

  order: int
  path: tuple
  method: str
  module: type
  args: tuple = ()
  kwargs: dict = dataclasses.field(default_factory=dict)
  out: Any = None
  flops: int | None = None
  vjp_flops: int | None = None


_PATH_TAG = "_nnx_summary_path"
"""Marks each module copy inside a trace with its path in the tabulated model."""


def _tag(root: Any) -> None:
  """Tags the modules of ``root`` (the model's copy inside the trace) with their paths."""
  w = walk(root)
  for p, obj in zip(w.node_paths, w.nodes):
    if isinstance(obj, Module) and not isinstance(obj, (Rngs, RngStream)):
      obj.__dict__[_PATH_TAG] = p


def _tags(module: Any) -> tuple:
  """The tags of ``module``'s graph nodes, in walk order."""
  return tuple(getattr(obj, "__dict__", {}).get(_PATH_TAG) for obj in walk(module).nodes)


def _retag(module: Any, tags: tuple) -> None:
  """Copies ``tags`` (from :func:`_tags` of the original) onto a copy of the same graph,
  so that a module shared across calls keeps the path it has in the whole model."""
  for obj, t in zip(walk(module).nodes, tags):
    if t is not None:
      obj.__dict__[_PATH_TAG] = t


def _methods(cls: type) -> Iterator[tuple[type, str]]:
  """``(defining class, name)`` of the user methods of a Module class: ``__call__``
  and public functions defined below ``Module``."""
  for c in cls.__mro__:
    if c in _BASES or not issubclass(c, Module):
      continue
    for name, fn in c.__dict__.items():
      if callable(fn) and not isinstance(fn, (type, staticmethod, classmethod)):
        if name == "__call__" or not name.startswith("_"):
          yield c, name


_BASES = set(Module.__mro__)


def _get_flops(lowered: Any) -> int:
  cost = lowered.cost_analysis() or lowered.compile().cost_analysis()
  if isinstance(cost, list):  # older jax: one dict per device
    cost = cost[0] if cost else None
  return int(cost["flops"]) if cost and "flops" in cost else 0


class _Recorder:
  """Wraps module methods so that each first call (per module, method and input
  shapes) is recorded; with FLOPs, each method runs as a ``jax.jit`` whose
  lowering is costed (the trace is reused for the call, so bodies run once)."""

  def __init__(self, flops: bool, vjp_flops: bool):
    self.flops, self.vjp_flops = flops, vjp_flops
    self.calls: list[Call] = []
    self.seen: set = set()
    self.count = 0

  def wrap(self, orig, name: str):
    def call(tags, m, args, kwargs):
      _retag(m, tags)
      return orig(m, *args, **kwargs)

    jitted = jax.jit(call, static_argnums=0)

    @functools.partial(jax.jit, static_argnums=0)
    def vjp(tags, m, args, kwargs):
      out, f_vjp = jax.vjp(lambda m, args, kwargs: call(tags, m, args, kwargs), m, args, kwargs)
      return f_vjp(out)

    def wrapped(module, *args, **kwargs):
      path = module.__dict__.get(_PATH_TAG)
      if path is None:
        return orig(module, *args, **kwargs)
      order, self.count = self.count, self.count + 1
      flops = vjp_flops = None
      if self.flops or self.vjp_flops:
        tags = _tags(module)
        lowered = jitted.lower(tags, module, args, kwargs)
        flops = _get_flops(lowered) if self.flops else None
        out = jitted(tags, module, args, kwargs)
      else:
        out = orig(module, *args, **kwargs)
      key = (path, name, _inputs_cell(args, kwargs))
      if key not in self.seen:
        self.seen.add(key)
        if self.vjp_flops:
          vjp_flops = _get_flops(
            jax.jit(vjp, static_argnums=0).lower(_tags(module), module, args, kwargs)
          )
        ins, outs = jax.tree.map(_abstract, ((args, kwargs), out))
        self.calls.append(Call(order, path, name, type(module), *ins, outs, flops, vjp_flops))
      return out

    return wrapped


@contextlib.contextmanager
def _recording(model: Any, recorder: _Recorder) -> Iterator[None]:
  """Wraps the user methods of the classes of the model's modules."""
  classes = {
    type(obj)
    for obj in walk(model).nodes
    if isinstance(obj, Module) and not isinstance(obj, (Rngs, RngStream))
  }
  patched: dict[tuple[type, str], Any] = {}
  try:
    for cls in classes:
      for owner, name in _methods(cls):
        if (owner, name) not in patched:
          patched[(owner, name)] = orig = owner.__dict__[name]
          setattr(owner, name, recorder.wrap(orig, name))
    yield
  finally:
    for (owner, name), orig in patched.items():
      setattr(owner, name, orig)


def record_calls(
  model: Any, inputs: tuple, kwargs: dict, *, flops: bool = False, vjp_flops: bool = False
) -> list[Call]:
  """The first call of each module method (per input shapes) in
  ``model(*inputs, **kwargs)``, in call order, traced abstractly with
  ``jax.eval_shape`` (the model is not changed and nothing is computed).

  Args:
    model: a Module.
    inputs: positional arguments of the call.
    kwargs: keyword arguments of the call.
    flops: also count each call's FLOPs (XLA's cost analysis of its lowering).
    vjp_flops: also count the FLOPs of each call's forward and backward pass.
  """
  recorder = _Recorder(flops, vjp_flops)

  def run(m: Any, a: tuple, k: dict) -> Any:
    _tag(m)
    return m(*a, **k)

  with _recording(model, recorder):
    jax.eval_shape(run, model, inputs, kwargs)
  return sorted(recorder.calls, key=lambda c: c.order)


def _abstract(x: Any) -> Any:
  if hasattr(x, "shape") and hasattr(x, "dtype"):
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype)
  return x


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------
def _fmt_bytes(b: int) -> str:
  for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
    if b >= scale:
      return f"{b / scale:.1f} {unit}"
  return f"{b} B"


def _fmt_count(nb: tuple[int, int] | None) -> str:
  if nb is None:
    return ""
  n, b = nb
  return f"{n:,} ({_fmt_bytes(b)})"


def fmt_value(x: Any) -> str:
  """A compact text form of an argument: arrays as ``float32[1,8]``, containers
  spelled out (``{}``, ``(…)``, ``[…]``), other values by ``repr``.

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.training._summary import fmt_value
    >>> fmt_value((jnp.ones((1, 8)), {}, None))
    '(float32[1,8], {}, None)'
  """
  if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, Variable):
    return f"{x.dtype}[{','.join(map(str, x.shape))}]"
  if isinstance(x, dict):
    return "{" + ", ".join(f"{k}: {fmt_value(v)}" for k, v in x.items()) + "}"
  if isinstance(x, tuple) and not hasattr(x, "_fields"):
    return "(" + ", ".join(map(fmt_value, x)) + ("," if len(x) == 1 else "") + ")"
  if isinstance(x, list):
    return "[" + ", ".join(map(fmt_value, x)) + "]"
  return repr(x)


def _inputs_cell(args: tuple, kwargs: dict) -> str:
  return "\n".join(
    [fmt_value(a) for a in args] + [f"{k}: {fmt_value(v)}" for k, v in kwargs.items()]
  )


def _outputs_cell(out: Any) -> str:
  if isinstance(out, tuple) and not hasattr(out, "_fields"):
    return "\n".join(map(fmt_value, out))
  return fmt_value(out)


def _variable_lines(name: str, v: Variable) -> list[str]:
  """``name: float32[4,8]``, or with metadata one indented line per entry and the value."""
  value = fmt_value(v.get_raw_value())
  if not v._metadata:
    return [f"{name}: {value}"]
  meta = [f"  {k}: {x if isinstance(x, str) else fmt_value(x)}" for k, x in v._metadata.items()]
  return [f"{name}:", *meta, f"  value: {value}"]


def _variables_cells(module: Any, columns: list[str]) -> list[str]:
  """Per column: the module's own Variables (``name: float32[4,8]``), a blank line
  and the count of its whole subtree; just the count when it owns none."""
  own: dict[str, list[str]] = {}
  for k in sorted(module.__dict__, key=str):
    v = module.__dict__[k]
    if isinstance(v, Variable) and not k.startswith("_nnx_"):
      own.setdefault(column_of(v), []).extend(_variable_lines(k, v))
  sub = totals(summarize(module))
  cells = []
  for c in columns:
    count = _fmt_count(sub.get(c))
    cells.append("\n".join([*own[c], "", count]) if c in own else count)
  return cells


def tabulate(
  model: Any,
  *inputs: Any,
  depth: int | None = None,
  console_kwargs: dict[str, Any] | None = None,
  table_kwargs: dict[str, Any] | None = None,
  column_kwargs: dict[str, Any] | None = None,
  compute_flops: bool = False,
  compute_vjp_flops: bool = False,
  **kwargs: Any,
) -> str:
  """A table of ``model(*inputs, **kwargs)``'s module calls with input/output
  shapes and element counts and bytes per Variable type (as flax.nnx.tabulate).

  The call is traced with ``jax.eval_shape`` (nothing computed, the model
  unchanged). Each module method's first call is a row, in call order, at the
  module's first path (``block/forward`` for methods other than ``__call__``).
  Variable cells list the module's own Variables and the count of its whole
  subtree; the ``Total`` row counts every Variable once.

  Args:
    model: a Module.
    *inputs: positional arguments of ``model(...)``; with no inputs and no
      keywords the model is not called and the table has one row per module
      (no shapes).
    depth: leave out calls of modules deeper than this.
    console_kwargs: keyword arguments of ``rich.console.Console`` (e.g. ``width``).
    table_kwargs: keyword arguments of ``rich.table.Table``.
    column_kwargs: keyword arguments of ``Table.add_column``.
    compute_flops: add a ``flops`` column: XLA's FLOP count of each call
      (each method then runs as a ``jax.jit``; its body still runs once).
    compute_vjp_flops: add a ``vjp_flops`` column: the FLOPs of each call's
      forward and backward pass (traces each call once more).
    **kwargs: keyword arguments of ``model(...)``.

  Returns:
    The table as a string (print it).

  Raises:
    WrongLibraryError: if ``model`` is an ``eqx.Module`` (convert it with ``nnx.from_eqx``).
    GraphStructureError: if ``model`` is not a Module or graph node.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    >>> table = nnx.tabulate(model, jnp.ones((3, 4)), console_kwargs={"width": 100})
    >>> print(table.splitlines()[0].strip())
    Linear Summary
    >>> "Total Parameters: 10 (40 B)" in table
    True
  """
  refuse_other_library("nnx.tabulate", model, arg="model")
  called = bool(inputs or kwargs)
  if called:
    calls = record_calls(model, inputs, kwargs, flops=compute_flops, vjp_flops=compute_vjp_flops)
  else:  # nothing to call with: one row per module, no shapes
    rows = summarize(model)
    calls = [Call(i, r.path, "__call__", _type_of(model, r.path)) for i, r in enumerate(rows)]
  if depth is not None:
    calls = [c for c in calls if len(c.path) <= depth]
  tot = totals(summarize(model))
  columns = sorted(tot)
  table = Table(
    title=f"{type(model).__name__} Summary",
    show_header=True,
    show_lines=True,
    caption=_caption(tot),
    **(table_kwargs or {}),
  )
  flop_columns = ["flops"] * compute_flops + ["vjp_flops"] * compute_vjp_flops
  for name in ["path", "type", "inputs", "outputs", *flop_columns, *columns]:
    table.add_column(name, **(column_kwargs or {}))
  w = walk(model)
  by_path = {p: m for p, m in zip(w.node_paths, w.nodes) if isinstance(m, Module)}
  for c in calls:
    path = "/".join(map(str, c.path)) + ("" if c.method == "__call__" else f"/{c.method}")
    module = by_path.get(c.path, model if not c.path else None)
    cells = _variables_cells(module, columns) if module is not None else [""] * len(columns)
    flop_cells = [str(c.flops)] * compute_flops + [str(c.vjp_flops)] * compute_vjp_flops
    table.add_row(
      path.lstrip("/"),
      c.module.__name__,
      _inputs_cell(c.args, c.kwargs) if called else "",
      _outputs_cell(c.out) if called else "",
      *flop_cells,
      *cells,
    )
  blank = [""] * len(flop_columns)
  table.add_row("", "", "", "Total", *blank, *[_fmt_count(tot[c]) for c in columns])
  console = Console(file=io.StringIO(), **{"width": 200, **(console_kwargs or {})})
  console.print(table)
  return console.file.getvalue()  # type: ignore[attr-defined]


def _type_of(model: Any, path: tuple) -> type:
  w = walk(model)
  return type(w.nodes[w.node_paths.index(path)])


def _caption(tot: dict[str, tuple[int, int]]) -> str:
  n = sum(v[0] for v in tot.values())
  b = sum(v[1] for v in tot.values())
  return f"\nTotal Parameters: {_fmt_count((n, b))}"

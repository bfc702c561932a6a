"""``nnx.stack`` / ``nnx.unstack``: a list of Modules of one structure as one Module
whose Variables carry a leading layer axis, and back.

The stacked form is what ``nnx.vmap`` over a constructor builds (and, for converted
Equinox layers, what ``eqx.filter_vmap`` builds): it is the input ``nnx.scan`` runs a
layer per step over, and ``nnx.to_eqx`` turns it into Equinox's own stacked layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .graph import _version
from .graph._errors import GraphStructureError, fmt_path, type_names
from .graph.api._functional import iter_graph, merge, split
from .graph.state._state import State
from .graph.variables._variables import Variable
from .graph.walk._node_types import LEAF, MAP, NODE, REF, SEQ, STATIC, VAR
from .spmd import PARTITION_NAME, ShardingError, add_axis, remove_axis


class StackStructureError(GraphStructureError):
  """``nnx.stack`` was given modules of different structure (the first differing
  path is named, with both sides' types, static values or shapes), or a Variable
  shared between two of them; or ``nnx.unstack`` a module whose arrays do not
  share a leading axis."""


def stack(modules: Iterable[Any], *, axis_name: str | None = None) -> Any:
  """One Module whose Variables stack those of ``modules`` along a new leading axis.

  The names and behaviour follow ``jnp.stack``: every array of the result has shape
  ``(len(modules), *shape)`` and ``result.<path>[i]`` is ``modules[i].<path>``, for
  Variables and raw array attributes alike (values become JAX arrays, as
  ``jnp.stack`` makes them). Static attributes, Variable types and metadata are
  those of ``modules[0]``, which all modules must share; sharing *within* one
  module (a Variable reached by two paths of a layer) is kept. The modules are
  left unchanged. This is the layout ``nnx.vmap`` over a constructor gives, so
  ``nnx.scan(..., in_axes=(nnx.Carry, 0))`` runs one layer per step over it, and
  ``nnx.to_eqx`` of a converted Equinox layer stack is Equinox's own stacked layout
  (the one ``eqx.filter_vmap`` of the layer's constructor gives).

  Sharding metadata gains the stack axis as ``nnx.vmap(...,
  transform_metadata={nnx.PARTITION_NAME: axis_name})`` gives it (flax.nnx's
  ``add_axis``): ``axis_name`` (a mesh or logical axis name, or ``None``:
  replicated) is inserted at position 0 of each Variable's ``out_sharding`` (or
  ``sharding``), and each Variable's :meth:`~nnx.Variable.add_axis` is called.

  A Variable (or Module holding Variables) shared *between* two of the modules
  is refused rather than copied into the stack: its one value would become one
  slice per layer, and updates to one slice would no longer reach the others, so
  the model would silently compute something else. Keep such a Variable outside
  the layers and pass it to the scanned function unstacked (``in_axes=None``).

  Args:
    modules: a non-empty sequence of Modules (or other graph nodes) of one
      structure, e.g. a model's ``blocks`` list (an ``nnx.List`` too).
    axis_name: the name of the stack axis in sharding metadata (default
      ``None``: the stack axis is replicated).

  Returns:
    A new Module of ``modules[0]``'s type.

  Raises:
    StackStructureError: no modules; two modules differ in structure (the
      message names the first differing path and the two types, static values,
      metadata, or shapes and dtypes); a Variable is shared between two modules
      (both paths named).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> layers = [nnx.Linear(4, 4, rngs=nnx.Rngs(i)) for i in range(3)]
    >>> stacked = nnx.stack(layers)
    >>> stacked.kernel.shape, bool((stacked.kernel[1] == layers[1].kernel[...]).all())
    ((3, 4, 4), True)
    >>> @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    ... def forward(x, layer):
    ...   return layer(x)
    >>> forward(jnp.ones((2, 4)), stacked).shape
    (2, 4)
  """
  modules = list(modules)
  if not modules:
    raise StackStructureError(
      "nnx.stack got no modules. Fix: pass a non-empty list of modules of one structure."
    )
  _check_not_shared(modules)
  graphdef, first = split(modules[0])
  flats = [first.to_flat_dict()]
  for i, m in enumerate(modules[1:], start=1):
    gd, state = split(m)
    if gd != graphdef:
      found = _first_difference(graphdef.defn, gd.defn)
      where, a, b = found if found else ((), "its GraphDef", "another GraphDef")
      raise StackStructureError(
        f"nnx.stack: modules[{i}] differs from modules[0] at {fmt_path(where)}: {b} in"
        f" modules[{i}], {a} in modules[0]. Fix: stack modules built by the same constructor"
        " with the same arguments (only array values may differ)."
      )
    flats.append(state.to_flat_dict())
  out = {}
  for path, leaf in flats[0].items():
    values = [_value(f[path]) for f in flats]
    for i, v in enumerate(values[1:], start=1):
      if _spec(v) != _spec(values[0]):
        raise StackStructureError(
          f"nnx.stack: modules[{i}] differs from modules[0] at {fmt_path(path)}: {_spec(v)}"
          f" in modules[{i}], {_spec(values[0])} in modules[0]. Fix: stack layers whose"
          " arrays have the same shapes and dtypes."
        )
    new = jax.tree.map(lambda *xs: jnp.stack(xs), *values)
    out[path] = leaf.replace(new) if isinstance(leaf, Variable) else new
  result = merge(graphdef, State.from_flat_path(out))
  for v in _own_variables(result):
    add_axis(v, 0, {PARTITION_NAME: axis_name})
  _version.bump()  # the metadata is part of the GraphDef
  return result


def unstack(module: Any, *, axis_name: str | None = None) -> list[Any]:
  """The inverse of :func:`stack`: one Module per index of the leading axis.

  ``unstack(module)[i].<path>`` is ``module.<path>[i]`` for every Variable and raw
  array; static attributes, Variable types and metadata are ``module``'s, with the
  stack axis removed from sharding metadata (each Variable's
  :meth:`~nnx.Variable.remove_axis` is called). ``unstack(stack(ms))`` equals
  ``ms`` bit for bit, and ``stack(unstack(m))`` equals ``m``. Works on any stacked
  module: one from :func:`stack`, from ``nnx.vmap`` over a constructor, or
  ``nnx.from_eqx`` of layers built with ``eqx.filter_vmap``.

  Args:
    module: a Module (or other graph node) whose arrays share a leading axis.
    axis_name: the stack axis's entry in sharding metadata, as given to
      :func:`stack` (or to ``transform_metadata={nnx.PARTITION_NAME: ...}``).

  Returns:
    A list of new Modules of ``module``'s type (the module is left unchanged).

  Raises:
    StackStructureError: the module has no arrays, an array has no leading axis,
      or two arrays disagree on its size (both paths and shapes named).
    ShardingError: a Variable's sharding metadata does not start with
      ``axis_name`` (the path named).

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> init = nnx.with_partitioning(jax.nn.initializers.ones, ("embed", "mlp"))
    >>> layers = [nnx.Linear(2, 3, kernel_init=init, rngs=nnx.Rngs(0)) for _ in range(4)]
    >>> stacked = nnx.stack(layers, axis_name="layers")
    >>> stacked.kernel.shape, stacked.kernel.out_sharding
    ((4, 2, 3), ('layers', 'embed', 'mlp'))
    >>> back = nnx.unstack(stacked, axis_name="layers")
    >>> len(back), back[0].kernel.shape, back[0].kernel.out_sharding
    (4, (2, 3), ('embed', 'mlp'))
  """
  graphdef, state = split(module)
  flat = state.to_flat_dict()
  size: int | None = None
  first: tuple[Any, Any] = ((), ())
  for path, leaf in flat.items():
    for x in jax.tree.leaves(_value(leaf)):
      shape = np.shape(x)
      if not shape:
        raise StackStructureError(
          f"nnx.unstack: {fmt_path(path)} is a scalar (shape ()), so it has no stack axis."
          " Fix: unstack a module whose every array has the leading layer axis (as"
          " nnx.stack or nnx.vmap build it)."
        )
      if size is None:
        size, first = shape[0], (path, shape)
      elif shape[0] != size:
        raise StackStructureError(
          f"nnx.unstack: the leading axes disagree: {fmt_path(first[0])} has shape"
          f" {first[1]} but {fmt_path(path)} has shape {shape}. Fix: unstack a module"
          " whose every array has the same leading layer axis."
        )
  if size is None:
    raise StackStructureError(
      "nnx.unstack: the module holds no arrays, so there is no stack axis to split."
      " Fix: pass a module built by nnx.stack or nnx.vmap."
    )
  out = []
  for i in range(size):
    items = {}
    for path, leaf in flat.items():
      new = jax.tree.map(lambda x: x[i], _value(leaf))  # noqa: B023 (used at once)
      items[path] = leaf.replace(new) if isinstance(leaf, Variable) else new
    one = merge(graphdef, State.from_flat_path(items))
    for path, v in _own_variables(one, with_paths=True):
      try:
        remove_axis(v, 0, {PARTITION_NAME: axis_name})
      except ShardingError as e:
        raise ShardingError(
          f"nnx.unstack: the sharding metadata of {fmt_path(path)} does not start with the"
          f" stack axis {axis_name!r} ({e}). Fix: pass the axis_name given to nnx.stack (or"
          " to transform_metadata={nnx.PARTITION_NAME: ...})."
        ) from None
    out.append(one)
  _version.bump()  # the metadata is part of the GraphDef
  return out


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _value(leaf: Any) -> Any:
  return leaf.get_value() if isinstance(leaf, Variable) else leaf


def _spec(value: Any) -> Any:
  """Shape and dtype of each array of a value (what stacking needs equal)."""

  def one(x):
    dtype = getattr(x, "dtype", None)
    return f"shape {np.shape(x)} {dtype if dtype is not None else type(x).__name__}"

  leaves, treedef = jax.tree.flatten(value)
  specs = [one(x) for x in leaves]
  if len(leaves) == 1 and not isinstance(value, (list, tuple, dict)):
    return specs[0]
  return f"{treedef} with {specs}"


def _own_variables(node: Any, with_paths: bool = False) -> list:
  """The Variables of ``node``, each once (at its first path)."""
  found = [(p, x) for p, x in iter_graph(node) if isinstance(x, Variable)]
  return found if with_paths else [v for _, v in found]


def _check_not_shared(modules: list) -> None:
  """Raises if one Variable is reachable from two of ``modules``."""
  owner: dict[int, tuple[int, tuple]] = {}
  for i, m in enumerate(modules):
    for path, v in _own_variables(m, with_paths=True):
      j, first = owner.setdefault(id(v), (i, path))
      if j != i:
        raise StackStructureError(
          f"nnx.stack: one {type(v).__name__} is shared by modules[{j}] (at"
          f" {fmt_path(first)}) and modules[{i}] (at {fmt_path(path)}); stacking would"
          " give each layer its own copy, and updates would no longer reach the others."
          " Fix: keep the shared Variable outside the layers and pass it to the scanned"
          " function unstacked (in_axes=None)."
        )


def _describe(d: tuple, name: str | None = None) -> str:
  """A GraphDef definition in words, for :func:`_first_difference` (``name``: the
  name to print for its type, see :func:`_describe_pair`)."""
  tag = d[0]
  if tag == NODE:
    return f"a {name or d[1].__name__}"
  if tag == VAR:
    md = d[3].value if d[3] else {}
    return f"a {name or d[1].__name__}" + (f" with metadata {md}" if md else "")
  if tag == STATIC:
    return f"the static value {d[1].value!r}"
  if tag == REF:
    return "a second reference to an object met earlier"
  if tag == LEAF:
    return "an array"
  if tag == SEQ:
    return f"a {name or d[1].__name__} of length {len(d[2])}"
  if tag == MAP:
    return f"a {name or getattr(d[1], '__name__', 'mapping')} with keys {[k for k, _ in d[2]]}"
  return repr(d)  # pragma: no cover - every tag is named above


def _describe_pair(a: tuple, b: tuple) -> tuple[str, str]:
  """Both sides of a difference in words; two different types of one short name
  (``nnx.Linear`` and ``nnx.bridge.Linear``) are printed by their public paths."""
  ta, tb = a[1] if len(a) > 1 else None, b[1] if len(b) > 1 else None
  if a[0] in (NODE, VAR, SEQ, MAP) and b[0] in (NODE, VAR, SEQ, MAP):
    if isinstance(ta, type) and isinstance(tb, type):
      na, nb = type_names(ta, tb)
      return _describe(a, na), _describe(b, nb)
  return _describe(a), _describe(b)


def _children(d: tuple) -> dict | None:
  if d[0] == NODE:
    return dict(d[3])
  if d[0] == SEQ:
    return dict(enumerate(d[2]))
  if d[0] == MAP:
    return dict(d[2])
  return None


def _first_difference(a: tuple, b: tuple) -> tuple[tuple, str, str] | None:
  """The first path (walk order) where two GraphDef definitions differ, with a
  description of each side; None if they are equal."""
  stack: list[tuple[tuple, tuple, tuple]] = [((), a, b)]
  while stack:
    path, x, y = stack.pop()
    ca, cb = _children(x), _children(y)
    if ca is None or cb is None or x[:2] != y[:2]:
      if x != y:
        return (path, *_describe_pair(x, y))
      continue
    if x[0] == NODE and x[4] != y[4]:
      return path, f"{_describe(x)} with {x[4]!r}", f"{_describe(y)} with {y[4]!r}"
    for k in [*ca, *(k for k in cb if k not in ca)]:
      if k not in cb or k not in ca:
        sa = _describe(ca[k]) if k in ca else "no attribute"
        sb = _describe(cb[k]) if k in cb else "no attribute"
        return (*path, k), sa, sb
    stack.extend(((*path, k), ca[k], cb[k]) for k in reversed(list(ca)))
  return None

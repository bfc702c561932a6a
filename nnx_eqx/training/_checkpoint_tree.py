"""The on-disk layout of nnx_eqx checkpoints: States as string-keyed nested dicts.

A State (or a graph's State) becomes a nested ``dict`` of arrays whose keys are
the State's path segments as strings, followed by the key path inside a
Variable's value when that value is itself a pytree (e.g. an optax state).
Typed PRNG keys are stored as their raw ``uint32`` key data and re-wrapped on
restore with the target's key implementation, so the files hold nothing but
plain numeric arrays.

Deep States (a name longer than :data:`MAX_NESTED` segments, e.g. a chain of
thousands of Modules) are stored flat instead, because orbax and ``jax.tree``
recurse through nested dicts and overflow Python's stack beyond about a thousand
levels: the arrays go into a one-level dict keyed ``"0"``, ``"1"``, ... and the
name of each (its list of segments) into the checkpoint's JSON metadata under
``names``. Restoring reads the metadata, so either layout restores into the
same targets; ordinary checkpoints keep the nested layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..graph._errors import GraphStructureError
from ..graph.state._state import State
from ..graph.variables._variables import Variable

_SCALARS = (bool, int, float, complex)

MAX_NESTED = 100
"""The most segments a name may have in the nested on-disk layout; a State with a
longer one is saved flat (see the module doc). Orbax itself fails near 1,000."""


class CheckpointMismatchError(GraphStructureError):
  """A checkpoint does not fit the restore target: paths missing or extra on
  either side, or arrays whose shape or dtype differ (each one is named)."""


def is_key(x: Any) -> bool:
  """True for typed PRNG key arrays and their abstract ``ShapeDtypeStruct``."""
  dtype = getattr(x, "dtype", None)
  return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def key_impl(x: Any) -> Any:
  """The PRNG implementation of a typed key array or of its ``ShapeDtypeStruct``."""
  if isinstance(x, jax.Array):
    return jax.random.key_impl(x)
  found: list = []
  jax.eval_shape(lambda k: found.append(jax.random.key_impl(k)), x)
  return found[0]


def segment(k: Any) -> str:
  """One JAX key-path entry as a string (dict key, attribute name or index)."""
  for attr in ("key", "name", "idx"):
    if hasattr(k, attr):
      return str(getattr(k, attr))
  return str(k)


def fmt(path: tuple) -> str:
  """``('l1', 'kernel')`` → ``'l1/kernel'``."""
  return "/".join(map(str, path)) or "<root>"


@dataclass
class Entry:
  """One array of a checkpoint: where it lives in the State and in the file."""

  state_path: tuple  # path of the State leaf holding it
  name: tuple[str, ...]  # its path in the saved nested dict
  value: Any  # the array (or abstract ShapeDtypeStruct) as found in the State


@dataclass
class Layout:
  """A State flattened into checkpoint entries, and how to rebuild it."""

  state: State
  entries: list[Entry]
  treedefs: dict  # state path -> treedef of that leaf's value
  flat: dict  # state path -> leaf (``state.to_flat_dict()``)

  def names(self) -> dict[str, Entry]:
    return {fmt(e.name): e for e in self.entries}


def layout(state: State) -> Layout:
  """Flattens ``state`` into checkpoint entries.

  Raises:
    CheckpointMismatchError: if two different paths map to the same name on
      disk (e.g. keys ``0`` and ``'0'`` in one mapping).
  """
  entries: list[Entry] = []
  treedefs: dict = {}
  seen: dict[tuple, tuple] = {}
  flat = state.to_flat_dict()
  for path, leaf in flat.items():
    value = leaf.value if isinstance(leaf, Variable) else leaf
    kv, treedef = jax.tree_util.tree_flatten_with_path(value)
    treedefs[path] = treedef
    for kp, x in kv:
      name = tuple(map(str, path)) + tuple(segment(k) for k in kp)
      if name in seen:
        raise CheckpointMismatchError(
          f"Paths {fmt(seen[name])} and {fmt(path + kp)} are both stored as"
          f" {fmt(name)}. Fix: rename one of the attributes or keys."
        )
      seen[name] = path + kp
      entries.append(Entry(path, name, x))
  return Layout(state, entries, treedefs, flat)


def _nest(items) -> dict:
  root: dict = {}
  for name, x in items:
    d = root
    for k in name[:-1]:
      d = d.setdefault(k, {})
    d[name[-1]] = x
  return root


def to_saveable(x: Any, where: str) -> Any:
  """An entry's value as written to disk (keys as key data, scalars as arrays).

  Raises:
    TypeError: for abstract or non-numeric leaves (the path is named).
  """
  if is_key(x):
    x = jax.random.key_data(x)
  if isinstance(x, _SCALARS):
    x = jnp.asarray(x)
  if isinstance(x, (jax.Array, np.ndarray, np.generic)):
    return x
  raise TypeError(
    f"Cannot save the leaf at {where}: it is a {type(x).__name__}, not an array."
    " Fix: save a concrete model (not one from `eval_shape`), and keep"
    " non-array values as static attributes rather than Variables."
  )


def _is_empty(x: Any) -> bool:
  return 0 in tuple(np.shape(x))


def saveable_tree(lay: Layout) -> tuple[dict, dict]:
  """The dict of arrays that orbax writes, and our JSON metadata for it.

  The metadata holds ``empty``, the zero-size arrays (``{name: [shape,
  dtype]}``: orbax cannot store them), and for a deep State ``names``, the
  segments of each array's name in the flat layout (see the module doc).

  Raises:
    CheckpointMismatchError: if there is no non-empty array to save.
  """
  arrays, empty = [], {}
  for e in lay.entries:
    x = to_saveable(e.value, fmt(e.name))
    if _is_empty(x):
      empty[fmt(e.name)] = [list(np.shape(x)), jnp.dtype(x.dtype).name]
    else:
      arrays.append((e.name, x))
  if not arrays:
    raise CheckpointMismatchError(
      "Nothing to save: the State holds no non-empty array. Fix: save a model"
      " that has Variables (a module without state needs no checkpoint)."
    )
  meta: dict = {"empty": empty}
  if any(len(name) > MAX_NESTED for name, _ in arrays):
    meta["names"] = [list(name) for name, _ in arrays]
    return {str(i): x for i, (_, x) in enumerate(arrays)}, meta
  return _nest(arrays), meta


def stored_name(key: tuple[str, ...], names: list | None) -> tuple[str, ...]:
  """The name of the array that orbax stores under the key path ``key``."""
  if names is None:
    return key
  (i,) = key
  return tuple(names[int(i)])


def unflatten(restored: dict, names: list | None) -> dict:
  """``restored`` (as orbax read it) as the nested dict of the nested layout."""
  if names is None:
    return restored
  return _nest((tuple(names[int(i)]), x) for i, x in restored.items())


def abstract(x: Any) -> jax.ShapeDtypeStruct:
  """The on-disk ``ShapeDtypeStruct`` of a target entry (key data for keys)."""
  sharding = getattr(x, "sharding", None)
  if is_key(x):
    sds = jax.eval_shape(jax.random.key_data, x)
    return jax.ShapeDtypeStruct(sds.shape, sds.dtype)
  if isinstance(x, _SCALARS):
    x = jax.eval_shape(jnp.asarray, x)
  return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)


def abstract_tree(lay: Layout, names: list | None = None) -> dict:
  """The restore target handed to orbax (zero-size arrays left out), nested, or
  flat when the checkpoint stores ``names`` (see the module doc)."""
  items = [(e.name, abstract(e.value)) for e in lay.entries]
  items = [(name, sds) for name, sds in items if not _is_empty(sds)]
  if names is None:
    return _nest(items)
  index = {tuple(n): str(i) for i, n in enumerate(names)}
  return {index[name]: sds for name, sds in items}


def add_empty(restored: dict, empty: dict) -> dict:
  """Puts the zero-size arrays recorded in the metadata back into ``restored``."""
  items = [(tuple(n.split("/")), jnp.zeros(shape, dtype)) for n, (shape, dtype) in empty.items()]
  for name, x in items:
    d = restored
    for k in name[:-1]:
      d = d.setdefault(k, {})
    d[name[-1]] = x
  return restored


def check_compatible(lay: Layout, stored: dict[str, tuple]) -> None:
  """Compares the target's entries with the checkpoint's ``{name: (shape, dtype)}``.

  Raises:
    CheckpointMismatchError: naming every path missing on either side and
      every shape or dtype difference.
  """
  target = {n: abstract(e.value) for n, e in lay.names().items()}
  missing = [n for n in target if n not in stored]
  extra = [n for n in stored if n not in target]
  differ = []
  for n, sds in target.items():
    if n in stored:
      shape, dtype = stored[n]
      if tuple(shape) != tuple(sds.shape) or np.dtype(dtype) != np.dtype(sds.dtype):
        differ.append(
          f"{n}: checkpoint {tuple(shape)} {np.dtype(dtype)}, target"
          f" {tuple(sds.shape)} {np.dtype(sds.dtype)}"
        )
  if not (missing or extra or differ):
    return
  parts = []
  for label, items in (
    ("not in the checkpoint", missing),
    ("in the checkpoint but not in the target", extra),
    ("shape/dtype differ", differ),
  ):
    if items:
      more = f" and {len(items) - 8} more" if len(items) > 8 else ""
      parts.append(f"{label}: " + "; ".join(items[:8]) + more)
  raise CheckpointMismatchError(
    "The checkpoint does not match the restore target (" + " | ".join(parts) + ")."
    " Fix: build the target with the same structure and sizes as the saved model"
    " (e.g. `nnx.eval_shape(lambda: Model(...same args...))`), or call"
    " `restore(directory)` without a target to inspect the raw arrays."
  )


def rebuild(lay: Layout, restored: dict) -> State:
  """A new State like ``lay.state`` holding the restored arrays."""
  by_path: dict[tuple, list] = {}
  for e in lay.entries:
    d: Any = restored
    for k in e.name:
      d = d[k]
    x = d
    if is_key(e.value):
      x = jax.random.wrap_key_data(x, impl=key_impl(e.value))
    elif isinstance(e.value, _SCALARS):
      x = type(e.value)(np.asarray(x).item())
    elif isinstance(e.value, (np.ndarray, np.generic)):
      x = np.asarray(x)
    by_path.setdefault(e.state_path, []).append(x)
  flat = {}
  for path, leaf in lay.flat.items():
    value = jax.tree_util.tree_unflatten(lay.treedefs[path], by_path.get(path, []))
    flat[path] = leaf.replace(value) if isinstance(leaf, Variable) else value
  return State.from_flat_path(flat)

"""``eqx.nn.State`` / ``eqx.nn.StateIndex`` on one side, Variables on the other.

Towards Equinox, every non-``Param`` Variable (``BatchStat``, ``Cache``,
counters, ``Rngs`` keys and counts) becomes an ``eqx.nn.StateIndex`` whose
value lives in an ``eqx.nn.State``. :func:`finalize` gives those indices the
markers ``eqx.nn.make_with_state`` would give them (the root class name plus
the key path), builds the State and deletes the initial values, so
``nnx.to_eqx_with_state`` returns exactly the pair ``make_with_state`` returns.
Towards NNX, :func:`state_value` reads an index's value from a State (or from
its initial value), and ``Link`` records which Variables hold it so that a
changed value can be written back.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax.tree_util as jtu
import numpy as np

from ...graph._errors import ShapeDtypeError
from ...graph.variables._variables import Variable
from .._errors import MissingStateError, fmt_path
from ._iter import map_pytree


class EqxState(Variable):
  """A value that Equinox keeps in ``eqx.nn.State`` (a converted ``eqx.nn.StateIndex``).

  ``nnx.from_eqx`` stores the state of a user's ``eqx.nn.StateIndex`` in one of
  these; ``nnx.to_eqx_with_state`` turns it back into a ``StateIndex``. Built-in
  layers use ``nnx.BatchStat`` instead (e.g. BatchNorm's running statistics).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> isinstance(nnx.bridge.EqxState(jnp.zeros(2)), nnx.Variable)
    True
  """


def is_index(x: Any) -> bool:
  return isinstance(x, eqx.nn.StateIndex)


def _init_deleted(init: Any) -> bool:
  # `eqx.nn.delete_init_state` (used by `make_with_state`) replaces the initial
  # value with an empty sentinel module.
  return isinstance(init, eqx.Module) and not jtu.tree_leaves(init)


def state_value(index: eqx.nn.StateIndex, state: Any, path: tuple, expected: Any = None) -> Any:
  """The value of ``index``: from ``state`` when given, else its initial value.

  A value read from ``state`` must match ``expected`` (a pytree of
  :class:`Spec`), or else the index's initial value where it was kept.

  Raises:
    MissingStateError: ``state`` has no entry for the index's marker, ``state``
      is stale, or no state was given and the initial value was deleted.
    ShapeDtypeError: the entry's shapes or dtypes are not those the model
      expects (a State made with another model, e.g. another layer size).
  """
  if state is not None:
    value = _read_state(index, state, path)
    if expected is None and not _init_deleted(index.init):
      expected = jtu.tree_map(_spec_of, index.init)
    if expected is not None:
      _check(value, expected, path)
    return value
  if _init_deleted(index.init):
    raise MissingStateError(
      f"nnx.from_eqx: the StateIndex at {fmt_path(path)} has no value: its initial"
      " value was deleted by `eqx.nn.make_with_state` and no `state` was given."
      " Fix: call `nnx.from_eqx(model, state)` with the State returned alongside"
      " the model."
    )
  return index.init


class Spec:
  """The shape and dtype (None: any) a State entry must have; a pytree leaf."""

  __slots__ = ("shape", "dtype")

  def __init__(self, shape: tuple, dtype: Any = None):
    self.shape, self.dtype = tuple(shape), None if dtype is None else np.dtype(dtype)

  def fits(self, other: Spec) -> bool:
    return self.shape == other.shape and (self.dtype is None or self.dtype == other.dtype)

  def __repr__(self) -> str:
    return f"{self.dtype or 'any dtype'}{list(self.shape)}"


def _spec_of(x: Any) -> Spec:
  return Spec(np.shape(x), getattr(x, "dtype", None) or np.result_type(x))


def _check(value: Any, expected: Any, path: tuple) -> None:
  given = jtu.tree_map(_spec_of, value)
  want_leaves, want_def = jtu.tree_flatten(expected)
  given_leaves, given_def = jtu.tree_flatten(given)
  same = want_def == given_def  # type: ignore[operator]
  if not same or not all(w.fits(g) for w, g in zip(want_leaves, given_leaves)):
    raise ShapeDtypeError(
      f"nnx.from_eqx: the eqx.nn.State entry for the StateIndex at {fmt_path(path)}"
      f" does not fit the model: expected {expected}, given {given}. Fix: pass the State"
      " created together with this model (by `eqx.nn.make_with_state` or"
      " `nnx.to_eqx_with_state`); a State of a model with other sizes or dtypes does"
      " not fit."
    )


def _read_state(index: eqx.nn.StateIndex, state: Any, path: tuple) -> Any:
  """``state.get(index)``; a missing entry or a State of the wrong type is named."""
  if not isinstance(state, eqx.nn.State):
    raise MissingStateError(
      f"nnx.from_eqx: `state` must be an eqx.nn.State, got {type(state).__name__}."
      " Fix: pass the State returned by `eqx.nn.make_with_state` (or"
      " `nnx.to_eqx_with_state`) together with its model."
    )
  try:
    return state.get(index)
  except KeyError:
    raise MissingStateError(
      f"nnx.from_eqx: the eqx.nn.State has no entry for the StateIndex at"
      f" {fmt_path(path)} (marker {index.marker!r}). Fix: pass the State that was"
      " created together with this model (by `eqx.nn.make_with_state` or"
      " `nnx.to_eqx_with_state`), not one from another model."
    ) from None
  except ValueError as e:
    raise MissingStateError(
      f"nnx.from_eqx: cannot read the StateIndex at {fmt_path(path)}: {e}"
    ) from None


def _same(old: Any, new: Any) -> bool:
  """True if ``new`` is ``old`` or a pytree of the very same leaf objects."""
  if new is old:
    return True
  a, ta = jtu.tree_flatten(old)
  b, tb = jtu.tree_flatten(new)
  return ta == tb and all(x is y for x, y in zip(a, b))  # type: ignore[operator]


class Link(NamedTuple):
  """The Variables that hold one StateIndex's value (one, or a tuple of them)."""

  state_index: eqx.nn.StateIndex
  variables: tuple
  packed: bool  # True: the value is a tuple with one element per Variable

  def read(self) -> Any:
    vals = tuple(v.value for v in self.variables)
    return vals if self.packed else vals[0]

  def write(self, value: Any) -> None:
    values = tuple(value) if self.packed else (value,)
    for v, x in zip(self.variables, values):
      if not _same(v.value, x):  # unchanged state is not written (no update under a trace)
        v.value = x


def finalize(tree: Any, links: dict) -> tuple[Any, Any, list[Link]]:
  """Assigns ``make_with_state`` markers, builds the State, deletes initial values.

  Args:
    tree: the converted Equinox pytree; its StateIndex objects carry unique
      temporary markers and their current values as ``init``.
    links: temporary marker -> tuple of Variables (and whether packed).

  Returns:
    ``(model, state, links)``: the model with markers ``<RootClass><keypath>``
    and deleted initial values, its ``eqx.nn.State`` (None when there is no
    StateIndex), and the Links keyed by the final indices.
  """
  if not links:
    return tree, None, []
  prefix = type(tree).__name__
  made: list = []
  final: list[Link] = []

  def replace(leaf: Any, kp: tuple) -> Any:
    variables, packed = links[leaf.marker]
    new = eqx.nn.StateIndex(leaf.init)
    object.__setattr__(new, "marker", prefix + jtu.keystr(kp))  # as make_with_state
    made.append(new)
    final.append(Link(new, variables, packed))
    return eqx.nn.delete_init_state(new)

  # (one level at a time: the model may be nested deeper than jax.tree can recurse)
  model = map_pytree(tree, replace, is_index)
  state = eqx.nn.State(tuple(made))  # the same entries, in the same order, as State(model)
  final = [link._replace(state_index=eqx.nn.delete_init_state(link.state_index)) for link in final]
  return model, state, final


def write_back(links: list[Link], state: Any) -> None:
  """Writes the values ``state`` holds for ``links`` into their Variables."""
  for link in links:
    link.write(state.get(link.state_index))

"""Equinox's file format for NNX modules: ``nnx.tree_serialise_leaves`` and
``nnx.tree_deserialise_leaves``.

Equinox writes a model's leaves one after another in the order of its pytree
(``eqx.tree_serialise_leaves``), in Equinox's layouts (``weight`` of shape
``(out, in)``, state in an ``eqx.nn.State``). An NNX module's own pytree view
has NNX's order and layouts (``kernel`` of shape ``(in, out)``), so a file
written by an Equinox model cannot be read with the NNX module as ``like``:
these functions go through the module's Equinox form in Equinox's native
layers, ``nnx.to_eqx_with_state(module, native=True)`` (an ``nnx.Linear`` is
written as an ``eqx.nn.Linear``), which is what the Equinox model of a
converted module serialises as ``(model, state)`` (and, for a stateless model,
as ``model`` alone: an empty ``eqx.nn.State`` has no leaves).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import equinox as eqx
import jax.tree_util as jtu

from ..graph.api._functional import clone, state, update
from ..training._checkpoint_faults import corrupt_file, innermost
from ..training.checkpoint import eqx_deserialise_filter_spec, eqx_serialise_filter_spec
from ._errors import BridgeError
from .convert._convert import gc_paused, to_eqx_parts, to_eqx_with_state
from .walk._context import FromEqxContext
from .walk._eqx_state import is_index
from .walk._to_eqx import ToEqxContext


class EqxFileMismatchError(BridgeError, RuntimeError):
  """An Equinox file does not hold the leaves of the Equinox form of ``like``
  (another model, other sizes, or extra leaves at the end)."""


def tree_serialise_leaves(
  path_or_file: Any,
  module: Any,
  filter_spec: Any = eqx_serialise_filter_spec,
) -> None:
  """Writes ``module`` in Equinox's file format, readable by its Equinox model.

  Writes ``eqx.tree_serialise_leaves(path_or_file, nnx.to_eqx_with_state(module,
  native=True))``:
  the leaves of the Equinox model and then of its ``eqx.nn.State``, in Equinox's
  layouts, so ``eqx.tree_deserialise_leaves(path, (model, state))`` (or
  ``(path, model)`` for a stateless model) loads it into the Equinox model.
  Arrays are written bit for bit (numpy ``.npy`` records, no pickle).

  Args:
    path_or_file: a file path or a binary file object open for writing.
    module: an NNX module (converted from Equinox or built natively).
    filter_spec: Equinox's ``filter_spec``; the default also writes typed PRNG
      keys (as their key data) so modules holding an ``nnx.Rngs`` can be saved,
      and otherwise writes what ``eqx.default_serialise_filter_spec`` writes.

  Raises:
    CycleError, SharedConversionError, UnconvertibleFieldError: ``module`` has
      no Equinox form (as :func:`nnx.to_eqx_with_state`; the path is named).

  Example:
    >>> import io, equinox as eqx, jax, nnx_eqx as nnx
    >>> model, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
    >>> module = nnx.from_eqx(model, state)
    >>> f = io.BytesIO()
    >>> nnx.tree_serialise_leaves(f, module)
    >>> _ = f.seek(0)
    >>> back = eqx.tree_deserialise_leaves(f, (model, state))
    >>> bool(eqx.tree_equal(back, (model, state)))
    True
  """
  pair = to_eqx_with_state(module, native=True)
  eqx.tree_serialise_leaves(path_or_file, pair, filter_spec=filter_spec)


def tree_deserialise_leaves(
  path_or_file: Any,
  like: Any,
  filter_spec: Any = eqx_deserialise_filter_spec,
) -> Any:
  """Reads a file in Equinox's format into a copy of the NNX module ``like``.

  The file is read as Equinox reads it into ``nnx.to_eqx_with_state(like,
  native=True)``, so
  a file that an **Equinox** model wrote with ``eqx.tree_serialise_leaves(path,
  (model, state))`` (or ``(path, model)`` when stateless) loads into that
  model's conversion, with Equinox's layouts turned into NNX's (``weight.T`` ->
  ``kernel``). Files written by :func:`tree_serialise_leaves` load too. ``like``
  is left unchanged; its Variables' types, metadata and sharing carry over.

  Passing the NNX module to ``eqx.tree_deserialise_leaves`` directly reads the
  file in NNX's leaf order and layouts instead, which do not match an Equinox
  file: use this function for Equinox files.

  Args:
    path_or_file: a file path or a binary file object open for reading. A path
      must hold exactly the leaves of ``like``; a file object is read from its
      current position, leaving the rest for further reads (as in Equinox).
    like: the NNX module to load into (same layers, sizes, dtypes and state as
      the model that wrote the file).
    filter_spec: Equinox's ``filter_spec``; the default also reads typed PRNG
      keys written by :func:`tree_serialise_leaves`, and otherwise reads what
      ``eqx.default_deserialise_filter_spec`` reads.

  Returns:
    A new NNX module like ``like`` holding the file's values.

  Raises:
    EqxFileMismatchError: (a ``RuntimeError``) the file does not fit the Equinox
      form of ``like``: a leaf's shape or dtype differs (its Equinox path is
      named), the file ends early at a leaf boundary, or a path holds leaves
      beyond ``like``'s.
    CheckpointCorruptError: (a ``ValueError``) the file is damaged: empty
      (zero-length), cut short inside a leaf's record, or garbled (the file and
      the Equinox path of the leaf are named). ``like`` is left unchanged.
    CycleError, SharedConversionError, UnconvertibleFieldError: ``like`` has no
      Equinox form (as :func:`nnx.to_eqx_with_state`).

  Example:
    >>> import io, equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> eqx_model = eqx.nn.Linear(3, 2, key=jax.random.key(0))
    >>> f = io.BytesIO()
    >>> eqx.tree_serialise_leaves(f, eqx_model)
    >>> _ = f.seek(0)
    >>> module = nnx.tree_deserialise_leaves(f, nnx.Linear(3, 2, rngs=nnx.Rngs(5)))
    >>> bool((module.kernel.value == eqx_model.weight.T).all())
    True
  """
  model, eqx_state, _, ctx = to_eqx_parts(like, native=True)
  if eqx_state is None:
    eqx_state = eqx.nn.State(())
  is_path = not hasattr(path_or_file, "read")
  name = repr(os.fspath(path_or_file)) if is_path else _file_name(path_or_file)
  opened: Any = open(path_or_file, "rb") if is_path else contextlib.nullcontext(path_or_file)
  start = None
  try:
    with opened as f:
      start = _position(f)
      loaded = eqx.tree_deserialise_leaves(f, (model, eqx_state), filter_spec=filter_spec)
      if is_path and f.read(1):
        raise EqxFileMismatchError(
          f"nnx.tree_deserialise_leaves: {name} holds more leaves than"
          " the Equinox form of `like`, so it was written by another model. Fix: pass as"
          " `like` a module with the layers, sizes and state of the model that wrote the file."
        )
  except EqxFileMismatchError:
    raise
  except RuntimeError as e:  # Equinox's shape/dtype checks and TreePathError
    cause = innermost(e)
    nothing = os.path.getsize(path_or_file) == 0 if is_path else _position(path_or_file) == start
    if isinstance(cause, EOFError) and start is not None and nothing:
      raise corrupt_file(f"nnx.tree_deserialise_leaves: {name}", None, "it is empty") from e
    if isinstance(cause, ValueError):  # numpy's .npy reader: a cut or garbled record
      why = f"a leaf's record is cut short or garbled (Equinox: {str(e).splitlines()[0]})"
      raise corrupt_file(f"nnx.tree_deserialise_leaves: {name}", cause, why) from e
    cut = (
      " If `like` is right, the file was cut short: save it again."
      if isinstance(cause, EOFError)
      else ""
    )
    raise EqxFileMismatchError(
      "nnx.tree_deserialise_leaves: the file does not fit the Equinox form of `like`,"
      f" nnx.to_eqx_with_state(like, native=True) (Equinox says: {e}). Paths index the pair"
      " (model, state). Fix: pass as `like` a module with the layers, sizes, dtypes and"
      f" state of the model that wrote the file.{cut}"
    ) from e
  out = clone(like)
  update(out, state(_back(loaded, model, ctx)))
  return out


def _back(loaded: tuple, model: Any, ctx: ToEqxContext) -> Any:
  """The NNX form of the loaded ``(model, state)``, with each layer converted to
  the class ``like`` holds there (native where ``to_eqx`` went native)."""
  back = FromEqxContext(loaded[1])
  if ctx.native_made:  # their key paths, in the tree before its StateIndexes were filled

    def made(x: Any) -> bool:
      return id(x) in ctx.native_made or is_index(x)

    def linear(x: Any) -> bool:
      return type(x) is eqx.nn.Linear or is_index(x)

    paths = {p for p, x in jtu.tree_flatten_with_path(ctx.tree, is_leaf=made)[0] if not is_index(x)}
    for p, x in jtu.tree_flatten_with_path(loaded[0], is_leaf=linear)[0]:
      if p in paths:
        back.native_ids.add(id(x))
  with gc_paused():
    out = back.convert(loaded[0], ())
  return out


def _file_name(f: Any) -> str:
  name = getattr(f, "name", None)
  return repr(name) if isinstance(name, str) else f"the {type(f).__name__} file object"


def _position(f: Any) -> int | None:
  try:
    return f.tell()
  except (AttributeError, OSError, ValueError):
    return None

"""Checkpoints with orbax-checkpoint, and Equinox serialisation of Modules.

:func:`save` writes the State of a Module (or of several: a Module and its
``nnx.Optimizer``, as a tuple or dict) to a directory with
``orbax.checkpoint.StandardCheckpointer``; :func:`restore` reads it back into a
target of the same structure — a concrete Module, an abstract one from
``nnx.eval_shape`` (restored arrays are allocated once, straight into the
target's Variables), or a State. This follows the flax.nnx checkpointing
guide (``nnx.state`` → orbax → ``nnx.update``/``nnx.merge``).

On disk a checkpoint is a nested dict of plain arrays keyed by attribute names
(``{"l1": {"kernel": ...}}``, like ``State.to_pure_dict``); typed PRNG keys are
stored as key data. A State nested deeper than
``nnx_eqx.training._checkpoint_tree.MAX_NESTED`` (100) levels, which orbax could
not walk, is stored flat: arrays under ``"0"``, ``"1"``, ... and their names in
the JSON metadata; :func:`restore` reads either layout. Loading goes through
orbax's tensorstore and JSON metadata only: no pickle anywhere. In a
multi-process job every process calls :func:`save`; one process alone can
restore the result (arrays whose saving devices it lacks land on its first local
device unless the target says where).

A directory without a checkpoint raises ``CheckpointNotFoundError``; a
checkpoint one of whose files is truncated, empty, garbled or deleted raises
``CheckpointCorruptError`` naming the file (orbax's own read errors,
translated), and the target is left unchanged.

Modules are also JAX pytrees, so ``eqx.tree_serialise_leaves`` and
``eqx.tree_deserialise_leaves`` work on them directly; pass
:func:`eqx_serialise_filter_spec`/:func:`eqx_deserialise_filter_spec` when the
model holds an ``nnx.Rngs`` (Equinox's defaults cannot store typed keys).

orbax-checkpoint is imported on first use (``pip install nnx_eqx[checkpoint]``).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

try:  # jax >= 0.10 (jax 0.12.1 deprecates the class's name)
  from jax.sharding import make_single_device_sharding
except ImportError:  # jax 0.7.2 to 0.9: the class is the constructor
  from jax.sharding import SingleDeviceSharding as make_single_device_sharding

from .._extras import require
from ..graph._errors import NnxError, refuse_other_library
from ..graph.api._functional import is_graph_node, update
from ..graph.api._functional import state as _state
from ..graph.state._state import State
from ..graph.tracing._lost_updates import overwriting
from . import _checkpoint_faults as _faults
from . import _checkpoint_tree as _tree
from ._checkpoint_faults import CheckpointCorruptError as CheckpointCorruptError
from ._checkpoint_tree import CheckpointMismatchError as CheckpointMismatchError

_META_KEY = "nnx_eqx"  # our entry in orbax's custom metadata (JSON)


class CheckpointNotFoundError(NnxError, FileNotFoundError):
  """:func:`restore` was given a directory that holds no checkpoint."""


class CheckpointExistsError(NnxError, FileExistsError):
  """:func:`save` would overwrite an existing checkpoint without ``force=True``."""


class CheckpointPathError(NnxError, OSError):
  """:func:`save` was given a directory it cannot write: its parent cannot be made
  (a path under ``/proc``, a file where a folder is needed) or is not writable
  (a read-only folder or file system). Raised before orbax starts, whose own
  failure there leaves the process waiting minutes at exit."""


def _check_writable(path: pathlib.Path) -> None:
  """Makes ``path``'s parent (as orbax would) and writes a probe file in it.

  Raises:
    CheckpointPathError: naming ``path``, the folder that failed and why.
  """
  parent = path.parent
  try:
    parent.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=parent, prefix=".nnx_eqx-write-check-")
  except OSError as e:
    reason = e.strerror or type(e).__name__
    where = f" ({e.filename})" if getattr(e, "filename", None) else ""
    raise CheckpointPathError(
      f"save: cannot write a checkpoint at {path}: its folder {parent} cannot be made or"
      f" written: {reason}{where}. Fix: pass a directory under a folder you can write"
      " (e.g. `tempfile.mkdtemp()` or one in your home or project folder)."
    ) from None
  os.close(fd)
  os.unlink(probe)


def _orbax():
  return require("orbax.checkpoint", "nnx_eqx.checkpoint")  # optional: the `checkpoint` extra


def _as_state(target: Any, what: str) -> State:
  if isinstance(target, State):
    return target
  if isinstance(target, (tuple, list, dict)) or is_graph_node(target):
    return _state(target)
  raise TypeError(
    f"{what} must be a Module, an nnx.Optimizer, a tuple/list/dict of them, or a"
    f" State; got {type(target).__name__}. Fix: pass the model (or `nnx.state(model)`)."
  )


def save(directory: str | os.PathLike, target: Any, *, force: bool = False) -> pathlib.Path:
  """Saves the State of ``target`` to ``directory`` with orbax.

  Args:
    directory: the checkpoint directory (made absolute; must not exist unless
      ``force``).
    target: a Module, an ``nnx.Optimizer``, a tuple/list/dict of them (e.g.
      ``(model, optimizer)``), or a State.
    force: overwrite an existing checkpoint.

  Returns:
    The absolute checkpoint path.

  Raises:
    CheckpointExistsError: ``directory`` exists and ``force`` is False.
    CheckpointPathError: ``directory``'s parent cannot be made or written (checked
      before orbax starts).
    CheckpointMismatchError: two paths would be stored under one name, or
      there is no non-empty array to save.
    WrongLibraryError: ``target`` is an ``eqx.Module`` (convert it with
      ``nnx.from_eqx``, or save it with ``eqx.tree_serialise_leaves``).
    TypeError: ``target`` is not a Module/State, or holds abstract or
      non-array leaves (the path is named).

  Example:
    >>> import tempfile, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> path = nnx.checkpoint.save(tempfile.mkdtemp() + "/ckpt", model)
    >>> path.name
    'ckpt'
  """
  refuse_other_library("nnx.checkpoint.save", target, arg="target")
  ocp = _orbax()
  path = pathlib.Path(directory).absolute()
  if path.exists() and not force:
    raise CheckpointExistsError(
      f"save: {path} already exists. Fix: pass force=True to overwrite it, or"
      " choose a new directory (e.g. one per step)."
    )
  _check_writable(path)
  tree, meta = _tree.saveable_tree(_tree.layout(_as_state(target, "save's target")))
  with ocp.StandardCheckpointer() as ckptr:
    ckptr.save(path, tree, force=force, custom_metadata={_META_KEY: meta})
    ckptr.wait_until_finished()
  return path


def _not_found(path: pathlib.Path) -> CheckpointNotFoundError:
  return CheckpointNotFoundError(
    f"restore: no checkpoint at {path}. Fix: pass the directory given to"
    " `nnx.checkpoint.save` (or returned by it)."
  )


def _stored_arrays(ocp: Any, path: pathlib.Path) -> tuple[dict[str, tuple], dict]:
  """``({name: (shape, dtype)}, meta)`` of every array in the checkpoint, where
  ``meta`` is our JSON metadata (``empty``, and ``names`` in the flat layout).

  Reads orbax's step metadata (our custom metadata) and its item metadata
  (the tree of arrays), letting orbax report what it cannot read.

  Raises:
    CheckpointNotFoundError: ``path`` holds neither metadata file.
    CheckpointCorruptError: one of them, or a file they lead to, cannot be read.
  """
  step: Any = None
  step_error: BaseException | None = None
  try:
    step = ocp.metadata.get_step_metadata(path)
  except _faults.READ_ERRORS as e:  # missing, or unreadable (orbax logs which)
    step_error = e
  handler = ocp.StandardCheckpointHandler()
  try:
    tree = handler.metadata(path).tree
  except FileNotFoundError as e:
    if step is None:  # no metadata at all: not a checkpoint
      raise _not_found(path) from e
    raise _faults.corrupt_checkpoint(path, e) from e
  except _faults.READ_ERRORS as e:
    if not _faults.is_damage(e):
      raise
    raise _faults.corrupt_checkpoint(path, e) from e
  finally:
    handler.close()
  if step is None:
    assert step_error is not None
    raise _faults.corrupt_checkpoint(path, step_error) from step_error
  meta = (step.custom_metadata or {}).get(_META_KEY, {})
  names = meta.get("names")
  flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: hasattr(x, "shape"))[0]
  stored = {}
  for kp, m in flat:
    name = _tree.stored_name(tuple(_tree.segment(k) for k in kp), names)
    stored[_tree.fmt(name)] = (tuple(m.shape), m.dtype)
  empty = meta.get("empty", {})
  stored.update({n: (tuple(shape), dtype) for n, (shape, dtype) in empty.items()})
  return stored, meta


def _read(ocp: Any, path: pathlib.Path, target: Any) -> Any:
  """The arrays of the checkpoint, laid out as ``target`` says (all of them if None).

  A leaf without a sharding is placed as saved, or on the first local device when
  the devices that saved it are not all here (a checkpoint saved by several
  processes, restored by one).

  Raises:
    CheckpointCorruptError: a file of the checkpoint cannot be read.
  """
  args = ocp.args.StandardRestore(
    target, fallback_sharding=make_single_device_sharding(jax.local_devices()[0])
  )
  try:
    with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as ckptr:
      return ckptr.restore(path, args=args)
  except _faults.READ_ERRORS as e:
    if not _faults.is_damage(e):
      raise
    raise _faults.corrupt_checkpoint(path, e) from e


def restore(directory: str | os.PathLike, target: Any = None) -> Any:
  """Restores a checkpoint written by :func:`save` into ``target``.

  Args:
    directory: the checkpoint directory.
    target: what to restore into:

      * a Module / Optimizer / tuple or dict of them (concrete, or abstract
        from ``nnx.eval_shape`` or ``jax.eval_shape``): its Variables are set
        in place and the same object is returned;
      * a State: a new State of the same structure is returned;
      * ``None``: the raw nested dict of arrays (PRNG keys as key data).

      Arrays go to the target's shardings; where the target has none (an
      abstract model), to the saved ones, or to the first local device when the
      saving devices are not all present (e.g. a checkpoint saved by several
      processes, restored by one).

  Returns:
    The restored target (see above).

  Raises:
    CheckpointNotFoundError: ``directory`` holds no checkpoint.
    CheckpointCorruptError: a file of the checkpoint is truncated, empty,
      garbled or missing (the file is named); ``target`` is left unchanged.
    CheckpointMismatchError: the checkpoint's paths, shapes or dtypes differ
      from the target's (every difference is named).
    WrongLibraryError: ``target`` is an ``eqx.Module`` (convert it with
      ``nnx.from_eqx``).
    TypeError: ``target`` is not a Module/State/None.

  Example:
    >>> import tempfile, nnx_eqx as nnx
    >>> path = nnx.checkpoint.save(tempfile.mkdtemp() + "/c", nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> abstract = nnx.eval_shape(lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(1)))
    >>> model = nnx.checkpoint.restore(path, abstract)
    >>> bool((model.kernel.value == nnx.Linear(2, 3, rngs=nnx.Rngs(0)).kernel.value).all())
    True
  """
  refuse_other_library("nnx.checkpoint.restore", target, arg="target")
  ocp = _orbax()
  path = pathlib.Path(directory).absolute()
  if not path.is_dir():
    raise _not_found(path)
  stored, meta = _stored_arrays(ocp, path)
  names, empty = meta.get("names"), meta.get("empty", {})
  if target is None:
    return _tree.add_empty(_tree.unflatten(_read(ocp, path, None), names), empty)
  with overwriting():  # (only shapes, dtypes and shardings are read: the values are replaced)
    lay = _tree.layout(_as_state(target, "restore's target"))
  _tree.check_compatible(lay, stored)
  restored = _tree.unflatten(_read(ocp, path, _tree.abstract_tree(lay, names)), names)
  new = _tree.rebuild(lay, _tree.add_empty(restored, empty))
  if isinstance(target, State):
    return new
  update(target, new)
  return target


# --------------------------------------------------------------------------
# Equinox serialisation (eqx.tree_serialise_leaves / tree_deserialise_leaves)
# --------------------------------------------------------------------------
def eqx_serialise_filter_spec(f: Any, x: Any) -> None:
  """``filter_spec`` for ``eqx.tree_serialise_leaves`` that also stores typed
  PRNG keys (as their key data); other leaves use Equinox's default.

  Example:
    >>> import io, equinox as eqx, nnx_eqx as nnx
    >>> f = io.BytesIO()
    >>> spec = nnx.checkpoint.eqx_serialise_filter_spec
    >>> eqx.tree_serialise_leaves(f, nnx.Rngs(0), filter_spec=spec)
  """
  if _tree.is_key(x):
    x = jax.random.key_data(x)
  eqx.default_serialise_filter_spec(f, x)


def eqx_deserialise_filter_spec(f: Any, x: Any) -> Any:
  """``filter_spec`` for ``eqx.tree_deserialise_leaves`` matching
  :func:`eqx_serialise_filter_spec`: key data is re-wrapped with the key
  implementation of the ``like`` leaf.

  Equinox checks that each loaded leaf has the type of its ``like`` leaf, so
  the ``like`` model must hold concrete keys (an ``nnx.Rngs``, not the
  ``ShapeDtypeStruct`` of ``eval_shape``); use :func:`restore` to load into an
  abstract model.

  Example:
    >>> import io, jax, equinox as eqx, nnx_eqx as nnx
    >>> f = io.BytesIO(); rngs = nnx.Rngs(0); _ = rngs()
    >>> save_spec = nnx.checkpoint.eqx_serialise_filter_spec
    >>> load_spec = nnx.checkpoint.eqx_deserialise_filter_spec
    >>> eqx.tree_serialise_leaves(f, rngs, filter_spec=save_spec)
    >>> _ = f.seek(0)
    >>> back = eqx.tree_deserialise_leaves(f, nnx.Rngs(5), filter_spec=load_spec)
    >>> int(back.default.count.value)
    1
  """
  if _tree.is_key(x):
    data = jnp.asarray(np.load(f, allow_pickle=False))
    return jax.random.wrap_key_data(data, impl=_tree.key_impl(x))
  return eqx.default_deserialise_filter_spec(f, x)

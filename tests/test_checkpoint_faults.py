"""Damaged checkpoints: every file of a real orbax checkpoint and an Equinox-format file
truncated, emptied, garbled or deleted. A damaged checkpoint raises CheckpointCorruptError
naming the file (a missing directory stays CheckpointNotFoundError), or, where orbax does not
need the file, restores exactly; the target is never changed by a failed restore."""

import io
import random
import shutil

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


def model(seed):
  return nnx.Sequential(
    nnx.Linear(3, 8, rngs=nnx.Rngs(seed)),
    nnx.BatchNorm(8, rngs=nnx.Rngs(seed)),
    nnx.Linear(8, 2, rngs=nnx.Rngs(seed + 1)),
  )


def truncate(p):
  p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def zero_length(p):
  p.write_bytes(b"")


def garble(p):
  p.write_bytes(random.Random(0).randbytes(max(p.stat().st_size, 16)))


def delete(p):
  p.unlink()


FAULTS = [truncate, zero_length, garble, delete]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """A checkpoint of model(0) and the relative paths of all its files."""
  path = nnx.checkpoint.save(tmp_path_factory.mktemp("good") / "ckpt", model(0))
  return path, sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def damaged(saved, tmp_path, name, fault):
  path = tmp_path / "ckpt"
  shutil.copytree(saved[0], path)
  fault(path / name)
  return path


def restore_and_check(path, target, expected):
  """Restores into ``target``; on CheckpointCorruptError checks ``target`` is unchanged
  and returns the error, else checks the values are exactly ``expected``."""
  before = nnx.state(target) if target is not None else None
  try:
    out = nnx.checkpoint.restore(path, target)
  except nnx.CheckpointCorruptError as e:
    if target is not None:
      assert_trees_equal(nnx.state(target), before)
    assert str(path) in str(e) and "Fix: save the checkpoint again" in str(e)
    return e
  assert_trees_equal(nnx.state(out) if target is not None else out, expected)
  return None


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__)
def test_every_damaged_file_is_refused_or_harmless(saved, tmp_path_factory, fault):
  """Each file of the checkpoint damaged in turn: restore raises CheckpointCorruptError
  naming that file (or "one of its files"), or restores the exact values; the files orbax
  reads to restore (its metadata, the OCDBT manifest) are always refused."""
  good, names = saved
  expected = nnx.state(model(0))
  refused = set()
  for name in names:
    path = damaged(saved, tmp_path_factory.mktemp("bad"), name, fault)
    error = restore_and_check(path, model(5), expected)
    if error is not None:
      refused.add(name)
      if f"its file {name} " in str(error):
        assert ("is missing" in str(error)) == (fault is delete)
      else:
        assert "one of its files is missing, truncated, empty or garbled" in str(error)
  assert {"_METADATA", "_CHECKPOINT_METADATA"} <= refused
  assert "manifest.ocdbt" not in names or "manifest.ocdbt" in refused


@pytest.mark.parametrize("fault", [truncate, zero_length, garble], ids=lambda f: f.__name__)
def test_damaged_array_data_is_named(saved, tmp_path, fault):
  """The OCDBT data files hold the arrays: damage to any of them is refused and named."""
  good, names = saved
  data = [n for n in names if n.startswith("d/")]
  assert data, names
  path = damaged(saved, tmp_path, data[0], fault)
  target = jax.eval_shape(lambda: model(5))
  with pytest.raises(nnx.CheckpointCorruptError, match=rf"damaged: its file {data[0]} \("):
    nnx.checkpoint.restore(path, target)
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(target))


def test_missing_metadata_file_is_corrupt_but_missing_directory_is_not_found(saved, tmp_path):
  path = damaged(saved, tmp_path, "_METADATA", delete)
  with pytest.raises(
    nnx.checkpoint.CheckpointCorruptError, match=r"its file _METADATA .* is missing"
  ):
    nnx.checkpoint.restore(path, model(5))
  with pytest.raises(nnx.checkpoint.CheckpointNotFoundError, match="no checkpoint at"):
    nnx.checkpoint.restore(tmp_path / "nowhere", model(5))
  (tmp_path / "empty").mkdir()
  with pytest.raises(nnx.checkpoint.CheckpointNotFoundError, match="no checkpoint at"):
    nnx.checkpoint.restore(tmp_path / "empty", model(5))
  assert issubclass(nnx.CheckpointCorruptError, (nnx.NnxError, ValueError))
  assert nnx.CheckpointCorruptError is nnx.checkpoint.CheckpointCorruptError


# --------------------------------------------------------------------------
# Equinox-format files (nnx.tree_serialise_leaves / tree_deserialise_leaves)
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eqx_bytes():
  f = io.BytesIO()
  nnx.tree_serialise_leaves(f, model(0))
  return f.getvalue()


EQX_FAULTS = {
  "truncated": (lambda b: b[: len(b) // 2], "record is cut short or garbled"),
  "last byte cut": (lambda b: b[:-1], "record is cut short or garbled"),
  "zero-length": (lambda b: b"", "it is empty"),
  "garbled": (lambda b: random.Random(0).randbytes(len(b)), "record is cut short or garbled"),
}


@pytest.mark.parametrize("fault", list(EQX_FAULTS))
@pytest.mark.parametrize("as_path", [True, False], ids=["path", "file"])
def test_damaged_equinox_file_is_refused_and_named(eqx_bytes, tmp_path, fault, as_path):
  damage, why = EQX_FAULTS[fault]
  path = tmp_path / "model.eqx"
  path.write_bytes(damage(eqx_bytes))
  like = model(5)
  before = nnx.state(like)
  with pytest.raises(nnx.CheckpointCorruptError, match=rf"{path}'? is damaged: .*{why}.*Fix"):
    if as_path:
      nnx.tree_deserialise_leaves(path, like)
    else:
      with open(path, "rb") as f:
        nnx.tree_deserialise_leaves(f, like)
  assert_trees_equal(nnx.state(like), before)
  good = nnx.tree_deserialise_leaves(io.BytesIO(eqx_bytes), like)  # the intact file loads
  assert_trees_equal(nnx.state(good), nnx.state(model(0)))


def test_equinox_file_cut_at_a_leaf_boundary_is_a_mismatch_that_mentions_truncation():
  # Indistinguishable from a file of a model with fewer leaves: EqxFileMismatchError.
  f = io.BytesIO()
  nnx.tree_serialise_leaves(f, nnx.Linear(3, 8, rngs=nnx.Rngs(0)))
  like = model(5)
  with pytest.raises(nnx.EqxFileMismatchError, match=r"If `like` is right, the file was cut short"):
    nnx.tree_deserialise_leaves(io.BytesIO(f.getvalue()), like)
  with pytest.raises(nnx.CheckpointCorruptError, match=r"BytesIO file object is damaged"):
    nnx.tree_deserialise_leaves(io.BytesIO(jnp.zeros(3).tobytes()), like)


@pytest.mark.devices(2)
def test_errors_that_are_not_damage_pass_through(saved):
  """orbax's other ValueErrors (here: a target sharding that cannot split the array) keep
  their own type and message."""
  mesh = jax.make_mesh((2,), ("x",))  # 2 does not divide the 3 rows
  target = jax.eval_shape(lambda: model(5))
  rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x", None))
  target.layers[0].kernel.value = jax.ShapeDtypeStruct((3, 8), jnp.float32, sharding=rows)
  with pytest.raises(ValueError, match="evenly divide") as e:
    nnx.checkpoint.restore(saved[0], target)
  assert not isinstance(e.value, nnx.CheckpointCorruptError)

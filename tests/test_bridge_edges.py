"""Where a converted model meets the rest of a program: per-example dropout masks
under ``nnx.vmap``, a converted BatchNorm called outside its batch axis, and
checkpoint paths that cannot be written."""

import os
import pathlib
import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

K1, K2 = jax.random.split(jax.random.key(0))
B = 4


class Net(eqx.Module):
  lin: eqx.nn.Linear
  drop: eqx.nn.Dropout

  def __call__(self, x, *, key=None):
    return self.drop(self.lin(x), key=key)


def _net():
  return Net(eqx.nn.Linear(8, 8, key=K1), eqx.nn.Dropout(0.5))


XS = jax.random.normal(K2, (B, 8))


# -- dropout under nnx.vmap: the guide's recipe ---------------------------------------
def _per_example(m, xs):
  """The guide's recipe: the dropout stream split across the batch."""
  f = nnx.split_rngs(splits=B, only="dropout")(
    nnx.vmap(
      lambda m, x: (m(x), m.drop.rngs.key[...]),
      in_axes=(nnx.StateAxes({"dropout": 0, ...: None}), 0),
    )
  )
  return f(m, xs)


def test_a_split_stream_draws_a_mask_per_example_as_equinox_with_per_example_keys():
  net = _net()
  m = nnx.from_eqx(net, rngs=nnx.Rngs(dropout=0))
  key0, count0 = m.drop.rngs.key[...], m.drop.rngs.count[...]
  ys, keys = _per_example(m, XS)
  masks = ys == 0
  assert all(bool((masks[i] != masks[j]).any()) for i in range(B) for j in range(i))
  # the keys are the stream's next key split across the batch (as flax's split_rngs)
  want_keys = jax.random.split(jax.random.fold_in(key0, count0), B)
  assert_trees_equal(jax.random.key_data(keys), jax.random.key_data(want_keys))
  # each example draws its key's first key: Equinox's model fed those keys drops the same
  draws = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
  eqx_ys = jax.vmap(net)(XS, key=draws)
  assert_trees_equal(masks, eqx_ys == 0)
  assert_trees_close(ys, eqx_ys)
  # the stream advanced once per call, restored to its unsplit shape
  assert m.drop.rngs.key[...].shape == () and int(m.drop.rngs.count[...]) == int(count0) + 1
  ys2, _ = _per_example(m, XS)
  assert bool((ys2 != ys).any())  # a new mask on the next call


def test_a_broadcast_stream_draws_one_mask_for_the_whole_batch():
  m = nnx.from_eqx(_net(), rngs=nnx.Rngs(dropout=0))
  ys = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(m, XS)
  masks = ys == 0
  assert bool(masks.any()) and all(bool((masks[i] == masks[0]).all()) for i in range(B))


def test_the_recipe_with_batchnorm_over_the_batch_axis():
  class WithNorm(eqx.Module):
    lin: eqx.nn.Linear
    norm: eqx.nn.BatchNorm
    drop: eqx.nn.Dropout

    def __call__(self, x, state, *, key=None):
      y, state = self.norm(self.lin(x), state)
      return self.drop(y, key=key), state

  model, state = eqx.nn.make_with_state(WithNorm)(
    eqx.nn.Linear(8, 8, key=K1), eqx.nn.BatchNorm(8, "batch", mode="batch"), eqx.nn.Dropout(0.5)
  )
  m = nnx.from_eqx(model, state, rngs=nnx.Rngs(dropout=0))
  f = nnx.split_rngs(splits=B, only="dropout")(
    nnx.vmap(
      lambda m, x: m(x, None)[0],
      in_axes=(nnx.StateAxes({"dropout": 0, ...: None}), 0),
      axis_name="batch",
    )
  )
  masks = f(m, XS) == 0
  assert bool((masks[0] != masks[1]).any())
  assert int(m.norm.counter[...]) == 1  # the statistics were written back once


# -- a converted BatchNorm outside its batch axis -------------------------------------
def _converted_batchnorm():
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  return nnx.from_eqx(bn, state)


@pytest.mark.parametrize(
  "call",
  [
    lambda m: m(jnp.ones(3)),  # one example, no map at all
    lambda m: jax.vmap(lambda x: m(x))(jnp.ones((4, 3))),  # mapped, but without the axis
    lambda m: nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(m, jnp.ones((4, 3))),
  ],
  ids=["unmapped", "jax.vmap", "nnx.vmap"],
)
def test_batchnorm_outside_its_axis_names_axis_name_and_the_vmap_recipe(call):
  m = _converted_batchnorm()
  before = nnx.clone(nnx.state(m))
  with pytest.raises(nnx.bridge.UnboundAxisError) as info:
    call(m)
  message = str(info.value)
  assert "axis_name='batch'" in message
  assert "nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name='batch')" in message
  assert "jax.vmap(model, axis_name='batch', in_axes=(0, None), out_axes=(0, None))" in message
  assert isinstance(info.value, NameError) and info.value.__cause__ is None
  assert_trees_equal(nnx.state(m), before)  # nothing changed


def test_batchnorm_error_names_its_path_inside_a_model():
  class Outer(eqx.Module):
    layers: eqx.nn.Sequential

  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  seq = nnx.from_eqx(eqx.nn.Sequential([eqx.nn.Linear(3, 3, key=K1), bn]), state)
  with pytest.raises(nnx.bridge.UnboundAxisError, match=r"at root\.layers\[1\]"):
    seq(jnp.ones(3))


def test_batchnorm_with_its_axis_bound_is_equinox_s_program():
  m = _converted_batchnorm()
  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  x = jnp.arange(12.0).reshape(4, 3)
  ours = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name="batch")(m, x)
  theirs, state = jax.vmap(bn, in_axes=(0, None), out_axes=(0, None), axis_name="batch")(x, state)
  assert_trees_close(ours, theirs)
  assert int(m.counter[...]) == 1
  m.eval()
  assert_trees_close(m(x[0]), eqx.nn.inference_mode(bn)(x[0], state)[0])  # no axis needed


# -- checkpoint paths that cannot be written ------------------------------------------
_SAVE = textwrap.dedent(
  """
  import sys, nnx_eqx as nnx
  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  try:
    nnx.checkpoint.{fn}(sys.argv[1], model)
  except nnx.checkpoint.{error} as e:
    print("refused:", e)
  """
)
# orbax waits about 300 s at exit after a failed save; a refusal before it starts exits
# at once (the limit leaves room for a slow import on a busy machine)
LIMIT_S = 120


def _run(fn: str, error: str, path: str) -> str:
  code = _SAVE.format(fn=fn, error=error)
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
  done = subprocess.run(
    [sys.executable, "-c", code, path],
    capture_output=True,
    text=True,
    timeout=LIMIT_S,
    env=env,
    check=True,
  )
  return done.stdout


@pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="needs a /proc file system")
def test_saving_under_proc_fails_at_once_and_the_process_exits():
  out = _run("save", "CheckpointPathError", "/proc/nope/ckpt")
  assert out.startswith("refused: save: cannot write a checkpoint at /proc/nope/ckpt")
  assert "/proc/nope" in out and "Fix:" in out
  out = _run("restore", "CheckpointNotFoundError", "/proc/nope/ckpt")
  assert out.startswith("refused: restore: no checkpoint at /proc/nope/ckpt")


def test_saving_below_a_file_fails_at_once(tmp_path):
  (tmp_path / "a-file").write_text("not a folder")
  target = tmp_path / "a-file" / "ckpt"
  with pytest.raises(nnx.checkpoint.CheckpointPathError, match=r"cannot write a checkpoint at"):
    nnx.checkpoint.save(target, nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
  out = _run("save", "CheckpointPathError", str(target))
  assert out.startswith(f"refused: save: cannot write a checkpoint at {target}")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only folders")
def test_saving_into_a_read_only_folder_fails_at_once(tmp_path):
  folder = tmp_path / "read-only"
  folder.mkdir()
  folder.chmod(0o555)
  try:
    with pytest.raises(nnx.checkpoint.CheckpointPathError, match=r"Permission denied"):
      nnx.checkpoint.save(folder / "ckpt", nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
  finally:
    folder.chmod(0o755)


def test_missing_parents_are_made_as_before(tmp_path):
  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  path = nnx.checkpoint.save(tmp_path / "run" / "step-1", model)
  assert path.is_dir() and not [p for p in path.parent.iterdir() if p.name.startswith(".")]
  back = nnx.checkpoint.restore(path, nnx.Linear(2, 3, rngs=nnx.Rngs(1)))
  assert_trees_equal(nnx.state(back), nnx.state(model))

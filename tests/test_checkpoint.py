"""Checkpoints: orbax round trips, abstract targets, mismatches, resume, Equinox serialisation."""

import io
import pickle

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import assume, given, settings

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal, graphs, tree_allclose


class Model(nnx.Module):
  """Params, a batch statistic, a bfloat16 param, an integer counter and Rngs."""

  def __init__(self, din=3, dout=2, *, rngs):
    self.l1 = nnx.Linear(din, 8, rngs=rngs)
    self.l2 = nnx.Linear(8, dout, rngs=rngs)
    self.mean = nnx.BatchStat(jnp.zeros(8))
    self.scale = nnx.Param(jnp.ones((), jnp.bfloat16))
    self.steps = nnx.Variable(jnp.zeros((), jnp.int32))
    self.rngs = rngs

  def __call__(self, x):
    h = self.l1(x)
    self.mean.value = 0.9 * self.mean.value + 0.1 * h.mean(0)
    self.steps.value = self.steps.value + 1
    noise = 1e-3 * jax.random.normal(self.rngs.dropout(), h.shape)
    return self.l2(jax.nn.relu(h - self.mean.value + noise)) * self.scale.value.astype(jnp.float32)


def make(seed=0):
  return Model(rngs=nnx.Rngs(seed, dropout=seed + 1))


def used_model():
  """A model whose batch stats, counters and Rngs counts have all moved."""
  m = make(0)
  for _ in range(3):
    m(jnp.ones((4, 3)))
  return m


def raw(x):
  return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x


# --------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------
def test_round_trip_into_abstract_model_is_bit_exact(tmp_path):
  m = used_model()
  nnx.checkpoint.save(tmp_path / "ckpt", m)
  abstract = jax.eval_shape(lambda: make(7))
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(abstract))
  restored = nnx.checkpoint.restore(tmp_path / "ckpt", abstract)
  assert restored is abstract  # filled in place: no second model allocated
  assert all(isinstance(x, jax.Array) for x in jax.tree.leaves(restored))
  assert_trees_equal(nnx.state(restored), nnx.state(m))
  assert int(restored.rngs.dropout.count.value) == 3
  assert int(restored.steps.value) == 3
  assert restored.scale.value.dtype == jnp.bfloat16
  # The restored streams continue exactly where the saved ones stopped.
  assert (raw(restored.rngs.dropout()) == raw(m.rngs.dropout())).all()
  x = jnp.ones((2, 3))
  assert (restored(x) == m(x)).all()


def test_round_trip_into_concrete_model_and_state(tmp_path):
  m = used_model()
  path = nnx.checkpoint.save(tmp_path / "c", m)
  other = make(5)
  assert not tree_allclose(nnx.state(other), nnx.state(m))
  assert nnx.checkpoint.restore(path, other) is other
  assert_trees_equal(nnx.state(other), nnx.state(m))

  target = nnx.state(make(9), nnx.Param)
  params = nnx.checkpoint.save(tmp_path / "p", nnx.state(m, nnx.Param))
  back = nnx.checkpoint.restore(params, target)
  assert isinstance(back, nnx.State)
  assert_trees_equal(back, nnx.state(m, nnx.Param))


def test_restore_places_arrays_on_the_target_sharding(tmp_path):
  n = jax.device_count()  # 8 fake CPU devices, or what the accelerator machine has
  mesh = jax.make_mesh((n,), ("model",))
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "model"))
  m = nnx.Linear(4, 2 * n, rngs=nnx.Rngs(0))
  m.kernel.value = jax.device_put(m.kernel.value, sharding)
  nnx.checkpoint.save(tmp_path / "c", m)
  target = nnx.eval_shape(lambda: nnx.Linear(4, 2 * n, rngs=nnx.Rngs(1)))
  target.kernel.value = jax.ShapeDtypeStruct((4, 2 * n), jnp.float32, sharding=sharding)
  nnx.checkpoint.restore(tmp_path / "c", target)
  assert target.kernel.value.sharding == sharding
  assert (target.kernel.value == m.kernel.value).all()


def test_restore_without_target_gives_plain_arrays(tmp_path):
  m = used_model()
  raw_tree = nnx.checkpoint.restore(nnx.checkpoint.save(tmp_path / "c", m))
  assert sorted(raw_tree) == ["l1", "l2", "mean", "rngs", "scale", "steps"]
  assert (raw_tree["l1"]["kernel"] == m.l1.kernel.value).all()
  key_data = raw_tree["rngs"]["dropout"]["key"]
  assert key_data.dtype == jnp.uint32
  assert (key_data == jax.random.key_data(m.rngs.dropout.key.value)).all()


def test_shared_variable_is_stored_once_and_restored_shared(tmp_path):
  m = make(0)
  m.tied = m.l1.kernel  # a second path to one Variable
  nnx.checkpoint.save(tmp_path / "c", m)
  raw_tree = nnx.checkpoint.restore(tmp_path / "c")
  assert "tied" not in raw_tree
  target = make(1)
  target.tied = target.l1.kernel
  nnx.checkpoint.restore(tmp_path / "c", target)
  assert target.tied is target.l1.kernel
  assert (target.tied.value == m.l1.kernel.value).all()


def test_zero_size_arrays_and_numpy_leaves_round_trip(tmp_path):
  m = make(0)
  m.empty = nnx.BatchStat(jnp.zeros((0, 3), jnp.float16))
  m.host = nnx.Variable(np.arange(4, dtype=np.int32))
  nnx.checkpoint.save(tmp_path / "c", m)
  target = make(1)
  target.empty = nnx.BatchStat(jnp.ones((0, 3), jnp.float16))
  target.host = nnx.Variable(np.zeros(4, np.int32))
  nnx.checkpoint.restore(tmp_path / "c", target)
  assert target.empty.value.shape == (0, 3) and target.empty.value.dtype == jnp.float16
  assert isinstance(target.host.value, np.ndarray)
  assert_trees_equal(nnx.state(target), nnx.state(m))
  target.empty = nnx.BatchStat(jnp.ones((0, 4), jnp.float16))
  with pytest.raises(nnx.CheckpointMismatchError, match=r"empty: checkpoint \(0, 3\) float16"):
    nnx.checkpoint.restore(tmp_path / "c", target)


@settings(max_examples=8, database=None)
@given(graphs(cycles=True, sharing=True))
def test_round_trip_law_on_random_graphs(tmp_path_factory, m):
  assume(any(np.size(x) for x in jax.tree.leaves(m)))  # an empty graph has nothing to save
  path = tmp_path_factory.mktemp("law") / "c"
  nnx.checkpoint.save(path, m)
  target = jax.tree.map(jnp.zeros_like, m)  # same graph, different values
  nnx.checkpoint.restore(path, target)
  assert_trees_equal(nnx.state(target), nnx.state(m))


# --------------------------------------------------------------------------
# Optimizer state and resuming training
# --------------------------------------------------------------------------
def make_trainable(seed=0):
  model = make(seed)
  return model, nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def train_step(model, opt, x, y):
  loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
  opt.update(model, grads)
  return loss


def train(model, opt, data):
  return [float(train_step(model, opt, x, y)) for x, y in data]


def batches(n, seed=0):
  keys = jax.random.split(jax.random.key(seed), n)
  return [(jax.random.normal(k, (8, 3)), jnp.ones((8, 2))) for k in keys]


def test_optimizer_state_round_trip_is_bit_exact(tmp_path):
  model, opt = make_trainable(0)
  train(model, opt, batches(3))
  nnx.checkpoint.save(tmp_path / "c", (model, opt))
  m2, o2 = make_trainable(1)
  nnx.checkpoint.restore(tmp_path / "c", (m2, o2))
  assert_trees_equal(nnx.state((m2, o2)), nnx.state((model, opt)))
  assert int(o2.step.value) == 3
  adam = nnx.state(o2, nnx.training.OptState)
  assert_trees_equal(adam, nnx.state(opt, nnx.training.OptState))
  assert len(jax.tree.leaves(adam)) == 1 + 1 + 2 * 5  # step, count, mu and nu of 5 params


def test_variable_holding_an_optax_pytree_round_trips(tmp_path):
  model = make(0)
  tx = optax.adam(1e-2)
  params = nnx.state(model, nnx.Param)
  with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes int32 counts and floats
    state = tx.update(params, tx.init(params), params)[1]
  holder = nnx.Module()
  holder.opt = nnx.Variable(state)  # one Variable whose value is a namedtuple tree
  nnx.checkpoint.save(tmp_path / "c", holder)
  assert sorted(nnx.checkpoint.restore(tmp_path / "c")["opt"]["0"]) == ["count", "mu", "nu"]
  target = nnx.Module()
  target.opt = nnx.Variable(jax.tree.map(jnp.zeros_like, state))
  nnx.checkpoint.restore(tmp_path / "c", target)
  assert type(target.opt.value[0]) is type(state[0])
  assert_trees_equal(target.opt.value, state)


def test_resumed_training_matches_uninterrupted_run(tmp_path):
  data = batches(8, seed=3)
  uninterrupted = train(*make_trainable(0), data)

  model, opt = make_trainable(0)
  first = train(model, opt, data[:5])
  nnx.checkpoint.save(tmp_path / "step5", {"model": model, "opt": opt})
  del model, opt
  fresh, fresh_opt = nnx.eval_shape(lambda: make_trainable(0))  # abstract: nothing allocated
  assert not [x for x in jax.tree.leaves((fresh, fresh_opt)) if isinstance(x, jax.Array)]
  nnx.checkpoint.restore(tmp_path / "step5", {"model": fresh, "opt": fresh_opt})
  resumed = first + train(fresh, fresh_opt, data[5:])
  assert resumed == uninterrupted  # exact float equality, step by step
  assert int(fresh_opt.step.value) == 8


# --------------------------------------------------------------------------
# Errors and safety
# --------------------------------------------------------------------------
def test_mismatched_structure_names_paths_and_shapes(tmp_path):
  nnx.checkpoint.save(tmp_path / "c", make(0))
  wider = Model(din=5, rngs=nnx.Rngs(0, dropout=1))
  with pytest.raises(
    nnx.CheckpointMismatchError, match=r"l1/kernel: checkpoint \(3, 8\) float32, target \(5, 8\)"
  ):
    nnx.checkpoint.restore(tmp_path / "c", wider)
  fewer = Model(rngs=nnx.Rngs(0))  # no dropout stream
  with pytest.raises(
    nnx.CheckpointMismatchError, match=r"in the checkpoint but not in the target: rngs/dropout"
  ):
    nnx.checkpoint.restore(tmp_path / "c", fewer)
  with pytest.raises(nnx.CheckpointMismatchError, match=r"not in the checkpoint: rngs/noise"):
    nnx.checkpoint.restore(tmp_path / "c", Model(rngs=nnx.Rngs(0, dropout=1, noise=2)))
  wrong_dtype = make(0)
  wrong_dtype.scale = nnx.Param(jnp.ones((), jnp.float32))
  with pytest.raises(nnx.CheckpointMismatchError, match=r"scale: checkpoint \(\) bfloat16"):
    nnx.checkpoint.restore(tmp_path / "c", wrong_dtype)
  assert isinstance(nnx.CheckpointMismatchError("x"), (nnx.NnxError, ValueError))


def test_mismatch_leaves_target_unchanged(tmp_path):
  nnx.checkpoint.save(tmp_path / "c", make(0))
  target = Model(din=5, rngs=nnx.Rngs(4, dropout=1))
  before = nnx.state(target)
  with pytest.raises(nnx.CheckpointMismatchError):
    nnx.checkpoint.restore(tmp_path / "c", target)
  assert_trees_equal(nnx.state(target), before)


def test_save_refuses_to_overwrite_and_restore_needs_a_checkpoint(tmp_path):
  nnx.checkpoint.save(tmp_path / "c", make(0))
  with pytest.raises(nnx.checkpoint.CheckpointExistsError, match="force=True"):
    nnx.checkpoint.save(tmp_path / "c", make(1))
  nnx.checkpoint.save(tmp_path / "c", make(1), force=True)
  assert (
    nnx.checkpoint.restore(tmp_path / "c", make(2)).l1.kernel.value == make(1).l1.kernel.value
  ).all()
  with pytest.raises(nnx.checkpoint.CheckpointNotFoundError, match="no checkpoint at"):
    nnx.checkpoint.restore(tmp_path / "missing", make(0))
  (tmp_path / "not_a_checkpoint").mkdir()
  with pytest.raises(nnx.checkpoint.CheckpointNotFoundError, match="not_a_checkpoint"):
    nnx.checkpoint.restore(tmp_path / "not_a_checkpoint", make(0))
  with pytest.raises(TypeError, match="not an array"):
    nnx.checkpoint.save(tmp_path / "abstract", jax.eval_shape(lambda: make(0)))
  with pytest.raises(nnx.CheckpointMismatchError, match="Nothing to save"):
    nnx.checkpoint.save(tmp_path / "empty", nnx.Sequence([]))
  with pytest.raises(TypeError, match="must be a Module"):
    nnx.checkpoint.save(tmp_path / "bad", jnp.ones(3))


def test_restore_never_unpickles(tmp_path, monkeypatch):
  m = used_model()
  nnx.checkpoint.save(tmp_path / "c", m)

  def refuse(*args, **kwargs):
    raise AssertionError("pickle used on a load path")

  class Refusing:
    def __init__(self, *args, **kwargs):
      refuse()

  monkeypatch.setattr(pickle, "load", refuse)
  monkeypatch.setattr(pickle, "loads", refuse)
  monkeypatch.setattr(pickle, "Unpickler", Refusing)
  restored = nnx.checkpoint.restore(tmp_path / "c", jax.eval_shape(lambda: make(1)))
  assert_trees_equal(nnx.state(restored), nnx.state(m))
  buf = io.BytesIO()
  eqx.tree_serialise_leaves(buf, m, filter_spec=nnx.checkpoint.eqx_serialise_filter_spec)
  buf.seek(0)
  like = make(1)
  back = eqx.tree_deserialise_leaves(
    buf, like, filter_spec=nnx.checkpoint.eqx_deserialise_filter_spec
  )
  assert_trees_equal(nnx.state(back), nnx.state(m))


# --------------------------------------------------------------------------
# Equinox serialisation
# --------------------------------------------------------------------------
def test_eqx_serialise_leaves_round_trip_without_rngs(tmp_path):
  m = nnx.Sequence([nnx.Linear(3, 4, rngs=nnx.Rngs(0)), nnx.Linear(4, 2, rngs=nnx.Rngs(1))])
  eqx.tree_serialise_leaves(tmp_path / "m.eqx", m)  # Equinox's defaults suffice
  like = nnx.Sequence([nnx.Linear(3, 4, rngs=nnx.Rngs(5)), nnx.Linear(4, 2, rngs=nnx.Rngs(6))])
  back = eqx.tree_deserialise_leaves(tmp_path / "m.eqx", like)
  assert type(back) is nnx.Sequence
  assert_trees_equal(nnx.state(back), nnx.state(m))


def test_eqx_serialise_leaves_with_rngs_needs_the_key_filter_spec(tmp_path):
  m = used_model()
  with pytest.raises(Exception, match=r"rngs"):
    eqx.tree_serialise_leaves(tmp_path / "plain.eqx", m)
  eqx.tree_serialise_leaves(
    tmp_path / "m.eqx", m, filter_spec=nnx.checkpoint.eqx_serialise_filter_spec
  )
  back = eqx.tree_deserialise_leaves(
    tmp_path / "m.eqx", make(3), filter_spec=nnx.checkpoint.eqx_deserialise_filter_spec
  )
  assert_trees_equal(nnx.state(back), nnx.state(m))
  assert (raw(back.rngs.dropout()) == raw(m.rngs.dropout())).all()


def test_shared_variable_serialises_once_with_eqx(tmp_path):
  m = make(0)
  m.tied = m.l1.kernel
  n_leaves = len(jax.tree.leaves(m))
  assert n_leaves == len(jax.tree.leaves(make(0)))  # the tied kernel is one leaf
  eqx.tree_serialise_leaves(
    tmp_path / "m.eqx", m, filter_spec=nnx.checkpoint.eqx_serialise_filter_spec
  )
  like = make(1)
  like.tied = like.l1.kernel
  back = eqx.tree_deserialise_leaves(
    tmp_path / "m.eqx", like, filter_spec=nnx.checkpoint.eqx_deserialise_filter_spec
  )
  assert back.tied is back.l1.kernel
  assert_trees_equal(back.tied.value, m.l1.kernel.value)

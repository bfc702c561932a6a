"""Rngs helpers of flax.nnx 0.12: with_rngs, fork_rngs, reseed, split/broadcast, samplers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


def _data(key):
  return np.asarray(jax.random.key_data(key))


def test_sampler_methods_draw_the_next_key_of_the_stream():
  rngs = nnx.Rngs(0, params=1)
  assert_trees_equal(
    rngs.normal((2, 3)), jax.random.normal(jax.random.fold_in(jax.random.key(0), 0), (2, 3))
  )
  assert_trees_equal(
    rngs.params.uniform((4,)), jax.random.uniform(jax.random.fold_in(jax.random.key(1), 0), (4,))
  )
  init = rngs.lecun_normal()
  expected = jax.nn.initializers.lecun_normal()(jax.random.fold_in(jax.random.key(0), 1), (3, 2))
  assert_trees_equal(init((3, 2)), expected)
  assert int(rngs.default.count.value) == 2


def test_stream_split_and_broadcast_shapes():
  s = nnx.RngStream(0, tag="params")
  split, bcast = s.split(3), s.broadcast((2, 2))
  assert split.key.shape == split.count.shape == (3,)
  assert bcast.key.shape == (2, 2)
  assert np.all(_data(bcast.key.value) == _data(bcast.key.value)[0, 0])
  assert int(s.count.value) == 2


def test_rngs_split_mapping_first_match_wins_and_none_keeps():
  rngs = nnx.Rngs(params=0, dropout=1, noise=2)
  new = rngs.split({"params": 4, "dropout": None, ...: (2, 3)})
  assert new.params.key.shape == (4,)
  assert new.dropout is rngs.dropout
  assert new.noise.key.shape == (2, 3)


def test_with_rngs_returns_a_copy_and_leaves_original_keys():
  rngs = nnx.Rngs(params=0, dropout=1)
  key_var = rngs.params.key
  new = nnx.with_rngs(rngs, split={"params": 4}, fork=..., graph_updates=False)
  assert new.params.key.shape == (4,) and new.dropout.key.shape == ()
  assert rngs.params.key is key_var and rngs.params.key.shape == ()
  assert int(rngs.params.count.value) == 1 and int(rngs.dropout.count.value) == 1


def test_with_rngs_conflicting_rules_raise():
  with pytest.raises(ValueError, match="multiple rules"):
    nnx.with_rngs(nnx.Rngs(params=0), split={"params": 2}, fork="params", graph_updates=False)


def test_with_rngs_in_place_graph_mode_is_rejected():
  with pytest.raises(NotImplementedError, match="graph_updates=False"):
    nnx.with_rngs(nnx.Rngs(0), split=2, graph=True, graph_updates=True)


def test_with_rngs_decorator_applies_to_arguments():
  @nnx.with_rngs(split=4, graph_updates=False)
  def f(r):
    return r.params.key.shape

  assert f(nnx.Rngs(params=0)) == (4,)


def test_fork_rngs_in_place_then_restore():
  rngs = nnx.Rngs(params=0)
  before = _data(rngs.params.key.value)
  backups = nnx.fork_rngs(rngs)
  assert not np.array_equal(_data(rngs.params.key.value), before)
  nnx.restore_rngs(backups)
  assert_trees_equal(_data(rngs.params.key.value), before)


def test_fork_rngs_functional_copy():
  rngs = nnx.Rngs(params=0)
  before = _data(rngs.params.key.value)
  new = nnx.fork_rngs(rngs, graph_updates=False)
  assert_trees_equal(_data(rngs.params.key.value), before)
  assert not np.array_equal(_data(new.params.key.value), before)


def test_split_rngs_functional_form():
  rngs = nnx.Rngs(params=0, dropout=1)
  new = nnx.split_rngs(rngs, splits=5, only="params", graph_updates=False)
  assert new.params.key.shape == (5,) and new.dropout.key.shape == ()
  assert rngs.params.key.shape == ()


def test_reseed_resets_dropout_masks():
  drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=3))
  y1 = drop(jnp.ones(16))
  nnx.reseed(drop, dropout=3)
  assert_trees_equal(drop(jnp.ones(16)), y1)


def test_reseed_policies():
  rngs = nnx.Rngs(params=0).split({"params": 3})
  with pytest.raises(ValueError, match="match_shape"):
    nnx.reseed(rngs, params=1)
  nnx.reseed(rngs, params=1, policy="match_shape")
  assert rngs.params.key.shape == (3,) and rngs.params.count.shape == (3,)


def test_unknown_stream_is_an_attribute_error():
  rngs = nnx.Rngs(params=0)
  assert not hasattr(rngs, "dropout")
  with pytest.raises(nnx.UnknownStreamError, match="No RngStream named 'dropout'"):
    rngs.dropout()


def test_stream_used_from_another_trace_raises_before_drawing():
  rngs = nnx.Rngs(0)

  @jax.jit
  def f():
    with pytest.raises(nnx.TraceContextError, match="from a different trace level"):
      rngs()
    return 0

  f()
  assert int(rngs.default.count.value) == 0

"""Dropout: exact masks from the forked stream, rng counts, reproducibility, the
``deterministic`` flag (module attribute, train()/eval(), call argument wins), errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.nn.stochastic import next_key, own_stream
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close, assert_trees_equal

X = jnp.asarray(np.random.default_rng(0).standard_normal((4, 6)), jnp.float32)


def test_mask_is_bernoulli_from_the_forked_dropout_stream():
  drop = nnx.Dropout(0.3, rngs=nnx.Rngs(params=1, dropout=7))
  # The layer forks rngs["dropout"] once: its base key is fold_in(key(7), 0); call n
  # then draws fold_in(base, n).
  base = jax.random.fold_in(jax.random.key(7), 0)
  for n in range(2):
    keep = jax.random.bernoulli(jax.random.fold_in(base, n), 0.7, X.shape)
    assert_trees_close(drop(X), jnp.where(keep, X / 0.7, 0.0))
  assert int(drop.rngs.count.value) == 2


def test_masks_differ_across_calls_and_repeat_under_the_same_seed():
  a, b = nnx.Dropout(0.5, rngs=nnx.Rngs(0)), nnx.Dropout(0.5, rngs=nnx.Rngs(0))
  ya1, ya2 = a(X), a(X)
  assert not np.array_equal(ya1 == 0, ya2 == 0)
  assert_trees_equal(ya1, b(X))
  assert_trees_equal(ya2, b(X))
  kept = ya1 != 0
  assert_trees_close(ya1[kept], (X / 0.5)[kept])


def test_counts_advance_through_nnx_jit():
  drop = nnx.Dropout(0.5, rngs=nnx.Rngs(0))
  counter = TraceCounter()
  f = nnx.jit(counter(lambda m, x: m(x)))
  y1 = f(drop, X)
  with assert_no_retrace(counter):
    y2 = f(drop, X)
  assert int(drop.rngs.count.value) == 2 and not np.array_equal(y1, y2)
  assert_trees_equal(y1, nnx.Dropout(0.5, rngs=nnx.Rngs(0))(X))


def test_broadcast_dims_share_the_mask():
  drop = nnx.Dropout(0.5, broadcast_dims=(0,), rngs=nnx.Rngs(0))
  zeros = drop(jnp.ones((5, 8))) == 0
  assert (zeros == zeros[0]).all() and 0 < zeros[0].sum() < 8


def test_rate_zero_and_one():
  assert nnx.Dropout(0.0)(X) is X  # no key needed
  assert_trees_equal(nnx.Dropout(1.0)(X), jnp.zeros_like(X))


def test_deterministic_attribute_and_the_call_argument_wins():
  drop = nnx.Dropout(0.5, deterministic=True, rngs=nnx.Rngs(0))
  assert drop(X) is X
  assert not np.array_equal(drop(X, deterministic=False), X)  # the argument wins
  drop.train()
  assert drop.deterministic is False and not np.array_equal(drop(X), X)
  assert drop(X, deterministic=True) is X  # the argument wins again
  drop.deterministic = None
  with pytest.raises(nnx.MissingFlagError, match="Dropout: `deterministic` is None"):
    drop(X)


class Net(nnx.Module):
  def __init__(self, rngs):
    self.lin = nnx.Linear(6, 6, rngs=rngs)
    self.bn = nnx.BatchNorm(6, rngs=rngs)
    self.blocks = [nnx.Dropout(0.5, rngs=rngs), nnx.Dropout(0.2, rngs=rngs)]

  def __call__(self, x):
    x = self.bn(self.lin(x))
    for d in self.blocks:
      x = d(x)
    return x


def test_train_eval_and_set_attributes_switch_the_whole_graph():
  net = Net(nnx.Rngs(0))
  net.eval()
  assert [d.deterministic for d in net.blocks] == [True, True] and net.bn.use_running_average
  y = net(X)
  assert_trees_equal(y, net(X))  # deterministic and stats frozen
  assert_trees_equal(net.bn.mean.value, jnp.zeros(6))
  net.train()
  assert not net.bn.use_running_average and not any(d.deterministic for d in net.blocks)
  assert not np.array_equal(net(X), net(X))
  net.set_attributes(nnx.Dropout, deterministic=True)  # only the Dropout layers
  assert all(d.deterministic for d in net.blocks) and not net.bn.use_running_average


def test_eval_inside_nnx_jit_switches_mode_and_retraces_once_per_mode():
  net = Net(nnx.Rngs(0))
  counter = TraceCounter()
  f = nnx.jit(counter(lambda m, x: m(x)))
  f(net, X)
  net.eval()
  f(net, X)
  net.train()
  with assert_no_retrace(counter):  # both modes are cached
    f(net, X)
    net.eval()
    f(net, X)
  assert counter.count == 2


def test_rngs_given_to_the_call_take_precedence():
  drop = nnx.Dropout(0.5)  # no stream of its own
  with pytest.raises(
    nnx.MissingRngsError,
    match="no `rngs` argument was provided to Dropout .the layer holds no rngs",
  ):
    drop(X)
  rngs = nnx.Rngs(dropout=3)
  y = drop(X, rngs=rngs)
  assert int(rngs.dropout.count.value) == 1
  key = jax.random.fold_in(jax.random.key(3), 0)
  assert_trees_equal(y, drop(X, rngs=key))  # a raw key works too
  assert_trees_equal(y, drop(X, rngs=nnx.RngStream(3, tag="dropout")))
  # A wrong rngs type is a TypeError; with the annotation checks of the test suite the
  # signature rejects it first, so the layer's own messages are checked on its helpers.
  with pytest.raises(TypeError):
    drop(X, rngs=3)
  with pytest.raises(nnx.RngsTypeError, match="call argument `rngs`.*got int"):
    next_key(3, None, "dropout", "Dropout")
  with pytest.raises(nnx.RngsTypeError, match="Dropout: `rngs` must be.*got str"):
    own_stream("dropout", "dropout", "Dropout")


def test_rng_collection_picks_the_stream_and_falls_back_to_default():
  a = nnx.Dropout(0.5, rng_collection="noise", rngs=nnx.Rngs(noise=5))
  b = nnx.Dropout(0.5, rng_collection="noise", rngs=nnx.Rngs(5))  # default stream
  assert_trees_equal(a(X), b(X))

"""RngStreams passed through nnx.vmap and used to seed new Rngs (as flax.nnx)."""

import jax
import jax.numpy as jnp

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


def test_rngs_from_a_stream_takes_its_base_key_with_a_fresh_count():
  stream = nnx.RngStream(3, tag="params")
  stream()
  rngs = nnx.Rngs(params=stream)
  assert int(rngs.params.count[...]) == 0
  assert_trees_equal(
    jax.random.key_data(rngs.params.key[...]), jax.random.key_data(stream.key[...])
  )
  assert int(stream.count[...]) == 1


def test_vmap_builds_layers_from_split_and_broadcast_streams():
  rngs = nnx.Rngs(params=0, dropout=1).split({"dropout": 5})
  counter = TraceCounter()

  @nnx.vmap(in_axes=(None, 0), out_axes=nnx.StateAxes({"dropout": 0, ...: None}))
  @counter
  def make(params, dropout):
    r = nnx.Rngs(params=params, dropout=dropout)
    return nnx.Dropout(0.5, deterministic=False, rngs=r), nnx.Linear(2, 3, rngs=r)

  drop, lin = make(rngs.params, rngs.dropout)
  assert lin.kernel.shape == (2, 3)
  assert drop.rngs.key.shape == (5,)
  keys = jax.random.key_data(drop.rngs.key[...])
  assert not bool(jnp.all(keys[0] == keys[1]))
  with assert_no_retrace(counter):
    make(rngs.params, rngs.dropout)

"""Sharding behaviours that flax's NNX sharding guide (flax_gspmd) relies on."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Block(nnx.Module):
  def __init__(self, rngs: nnx.Rngs):
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
    self.dot = nnx.Linear(4, 8, kernel_init=init, use_bias=False, rngs=rngs)


def test_vmap_partition_name_none_inserts_a_replicated_axis():
  traces = []

  @nnx.vmap(transform_metadata={nnx.PARTITION_NAME: None})
  def create(r):
    traces.append(1)
    return Block(r)

  stacked = create(nnx.Rngs(0).fork(split=3))
  assert stacked.dot.kernel.shape == (3, 4, 8)
  assert stacked.dot.kernel.out_sharding == (None, None, "model")
  assert len(traces) == 1


def test_scan_partition_name_none_removes_the_axis_inside():
  traces, seen = [], []

  @nnx.vmap(transform_metadata={nnx.PARTITION_NAME: None})
  def create(r):
    return Block(r)

  stacked = create(nnx.Rngs(0).fork(split=2))

  @nnx.scan(
    in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, transform_metadata={nnx.PARTITION_NAME: None}
  )
  def forward(x, block):
    traces.append(1)
    seen.append(block.dot.kernel.out_sharding)
    return x

  forward(jnp.ones((2, 4)), stacked)
  assert seen == [(None, "model")]
  assert stacked.dot.kernel.out_sharding == (None, None, "model")
  assert len(traces) == 1


def test_remove_axis_of_another_name_raises_and_keeps_metadata():
  p = nnx.Param(jnp.ones((2, 3)), out_sharding=("layers", "embed"))
  with pytest.raises(nnx.ShardingError, match="Expected None at index 0"):
    nnx.spmd.remove_axis(p, 0, {nnx.PARTITION_NAME: None})
  assert p.out_sharding == ("layers", "embed")


def test_transform_metadata_without_partition_name_leaves_sharding_alone():
  p = nnx.Param(jnp.ones((2, 3)), out_sharding=("embed",))
  nnx.spmd.add_axis(p, 0, {"other": "x"})
  assert p.out_sharding == ("embed",)
  assert jax.tree.leaves(p)[0].shape == (2, 3)

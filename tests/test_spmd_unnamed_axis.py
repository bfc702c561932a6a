"""A stacked axis with no mesh name (``partition=None`` / ``{PARTITION_NAME: None}``)
still removes and inserts its ``None`` entry in a Variable's sharding, as flax.nnx."""

import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


def test_remove_and_add_an_unnamed_axis():
  p = nnx.Param(jnp.ones((4, 3)), sharding=(None, "embed"))
  assert nnx.spmd.remove_axis(p, 0, {nnx.PARTITION_NAME: None}).sharding == ("embed",)
  assert nnx.spmd.add_axis(p, 1, {nnx.PARTITION_NAME: None}).sharding == ("embed", None)


def test_metadata_without_a_partition_name_leaves_the_sharding():
  p = nnx.Param(jnp.ones((4, 3)), sharding=("layers", "embed"))
  assert nnx.spmd.add_axis(p, 0, {}).sharding == ("layers", "embed")


def test_transform_metadata_with_partition_none():
  v = nnx.Param(jnp.array(1), out_sharding=(None, "dout"), eager_sharding=False)

  @nnx.transform_metadata(in_axes=0, out_axes=1, partition=None)
  def f(v):
    assert v.out_sharding == ("dout",)
    v[...] += 1
    return nnx.Param(jnp.array(10), out_sharding=("dmid", "dout"), eager_sharding=False)

  v2 = f(v)
  assert v.out_sharding == (None, "dout") and int(v[...]) == 2
  assert v2.out_sharding == ("dmid", None, "dout")


def test_unnamed_axis_mismatch_names_the_entry():
  p = nnx.Param(jnp.ones((4, 3)), sharding=("layers", "embed"))
  with pytest.raises(nnx.spmd.ShardingError, match="Expected None at index 0"):
    nnx.spmd.remove_axis(p, 0, {nnx.PARTITION_NAME: None})
  assert p.sharding == ("layers", "embed")

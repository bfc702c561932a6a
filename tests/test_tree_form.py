"""to_tree/from_tree: pure pytrees of NodeStates and back, with sharing and contexts."""

import functools

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Pair(nnx.Module):
  def __init__(self, a, b):
    self.a = nnx.Param(a)
    self.b = nnx.BatchStat(b)


def test_round_trip_restores_sharing_with_new_objects():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  pure = nnx.to_tree((m, 1, {"b": m}))
  first, second = pure[0], pure[2]["b"]
  assert isinstance(first, nnx.NodeStates) and pure[1] == 1
  assert isinstance(first.graphdef.nodes[0], nnx.graphlib.NodeDef)
  assert isinstance(second.graphdef.nodes[0], nnx.graphlib.NodeRef)
  assert len(nnx.to_flat_state(first.state)) == 2 and len(nnx.to_flat_state(second.state)) == 0
  out = nnx.from_tree(pure)
  assert out[0] is out[2]["b"] and out[0] is not m and out[1] == 1


def test_inconsistent_prefixes_for_one_object_raise():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  nnx.to_tree((m, 1, {"b": m}), prefix=(0, None, 0))
  with pytest.raises(ValueError, match=r"Inconsistent aliasing detected: .* 0 .* 2/b"):
    nnx.to_tree((m, 1, {"b": m}), prefix=(0, None, 1))


def test_node_states_accessors():
  ns = nnx.NodeStates.from_prefixes((None, 0))
  with pytest.raises(nnx.GraphStructureError, match="No graphdef available"):
    ns.graphdef
  with pytest.raises(nnx.GraphStructureError, match="Expected exactly one State, got 2"):
    ns.state
  assert nnx.NodeStates.from_states(1).state == 1


def test_vmap_round_trip_updates_the_outer_objects_in_place():
  m1 = Pair(jnp.array(0.0), jnp.arange(5.0))
  m2 = Pair(jnp.array(1.0), jnp.array(2.0))
  args = (m1, m2, {"b": m1})
  in_axes = ("split", None, {"b": "split"})

  def split_fn(ctx, path, prefix, x):
    if prefix == "split":
      return nnx.NodeStates.from_split(*ctx.split(x, nnx.Param, nnx.BatchStat))
    return nnx.NodeStates.from_split(*ctx.split(x))

  split_axes = nnx.NodeStates.from_prefixes((None, 0))
  jax_axes = (split_axes, None, {"b": split_axes})

  with nnx.update_context("vmap"):
    pure = nnx.to_tree(args, prefix=in_axes, split_fn=split_fn, ctxtag="vmap")

    @functools.partial(jax.vmap, in_axes=jax_axes, out_axes=(jax_axes, 0))
    def f(*pure_args):
      inner = nnx.from_tree(pure_args, ctxtag="vmap", is_inner=True)
      assert inner[0] is inner[2]["b"]
      inner[0].b.value = inner[0].b.value + inner[0].a.value + inner[1].a.value
      out = nnx.extract.clear_non_graph_nodes(inner)
      return nnx.to_tree((out, 0.0), prefix=(in_axes, 0), split_fn=split_fn, ctxtag="vmap")

    pure_out, _ = f(*pure)
    out = nnx.from_tree(pure_out, ctxtag="vmap", is_inner=False)

  assert out[0] is m1 and out[1] is m2 and out[2]["b"] is m1
  assert m1.b.value.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]

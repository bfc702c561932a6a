"""Key paths of a Module's leaves are JAX's own keys (``.name`` / ``[0]``; a Variable's
value is ``.value``), as in flax.nnx 0.12."""

import jax
import jax.numpy as jnp

import nnx_eqx as nnx


def test_list_items_print_as_sequence_keys():
  class MLP(nnx.Module):
    def __init__(self):
      self.layers = nnx.List([nnx.Linear(1, 1, rngs=nnx.Rngs(0)) for _ in range(2)])
      self.t = nnx.data((jnp.ones(1),))

  flat = jax.tree.flatten_with_path(MLP())[0]
  paths = [jax.tree_util.keystr(p) for p, _ in flat]
  assert paths == [
    ".layers[0].bias.value",
    ".layers[0].kernel.value",
    ".layers[1].bias.value",
    ".layers[1].kernel.value",
    ".t[0]",
  ]
  own = (jax.tree_util.GetAttrKey, jax.tree_util.SequenceKey, jax.tree_util.DictKey)
  assert all(type(k) in own for p, _ in flat for k in p)

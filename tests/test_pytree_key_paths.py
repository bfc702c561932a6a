"""Key paths of a Module's leaves print as JAX prints its own (``.name`` / ``[0]``), as in flax."""

import jax
import jax.numpy as jnp

import nnx_eqx as nnx


def test_list_items_print_as_sequence_keys():
  class MLP(nnx.Module):
    def __init__(self):
      self.layers = nnx.List([nnx.Linear(1, 1, rngs=nnx.Rngs(0)) for _ in range(2)])
      self.t = nnx.data((jnp.ones(1),))

  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree.flatten_with_path(MLP())[0]]
  assert paths == [
    ".layers[0].bias",
    ".layers[0].kernel",
    ".layers[1].bias",
    ".layers[1].kernel",
    ".t[0]",
  ]

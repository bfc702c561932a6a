"""A tree-mode ``nnx.prefix`` is a prefix of its graph as a JAX pytree, so plain
``jax.vmap(in_axes=...)`` takes it (as in flax.nnx)."""

from functools import partial

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


class Foo(nnx.Module):
  def __init__(self, rngs):
    self.w = nnx.Param(rngs.normal((4, 2, 3)))
    self.b = nnx.BatchStat(jnp.zeros((3,)))
    self.n = 3  # static: not a leaf of either


def test_prefix_flattens_like_the_graph_with_axis_leaves():
  model = Foo(nnx.Rngs(0))
  axes = nnx.prefix(model, {nnx.Param: 0, ...: None}, graph=False)
  assert axes.w == 0 and axes.b is None and axes.n == 3
  # a prefix of the model: its leaves stand where the model's Variables are
  prefix = jax.tree.structure(axes, is_leaf=lambda x: x is None)
  subtrees = prefix.flatten_up_to(model)
  assert [type(s) for s in subtrees] == [nnx.BatchStat, nnx.Param]
  keys = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(axes)[0]]
  assert keys == [".w"]  # the None leaf (b) drops out of a plain flatten


def test_plain_jax_vmap_takes_the_prefix():
  model = Foo(nnx.Rngs(0))
  axes = nnx.prefix(model, {nnx.Param: 0, ...: None}, graph=False)
  traces = []

  @partial(jax.vmap, in_axes=(axes, None))
  def forward(m, x):
    traces.append(1)
    return x @ m.w + m.b

  x = jnp.ones((2,))
  y = forward(model, x)
  forward(model, x)
  assert y.shape == (4, 3) and len(traces) == 2  # plain jax.vmap traces each call
  assert_trees_close(y, jnp.einsum("i,lij->lj", x, model.w[...]))


def test_mismatched_prefix_is_refused_and_the_model_kept():
  model = Foo(nnx.Rngs(0))
  other = nnx.prefix(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), {nnx.Param: 0}, graph=False)
  before = nnx.state(model)
  with pytest.raises(ValueError):
    jax.vmap(lambda m: m.w, in_axes=(other,))(model)
  nnx.testing.assert_trees_equal(nnx.state(model), before)

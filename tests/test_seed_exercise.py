"""The modern flax.nnx exercise from the seeds runs unchanged with ``import nnx_eqx as nnx``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


class BatchStat(nnx.Variable):
  pass


class MultiState(nnx.Module):
  def __init__(self, in_features, hidden, rngs):
    key = rngs.params()
    self.kernel = nnx.Param(
      jax.random.normal(key, (in_features, hidden)) * (1 / np.sqrt(in_features))
    )
    self.bias = nnx.Param(jnp.zeros((hidden,)))
    self.running_mean = BatchStat(jnp.zeros((hidden,)))
    self.running_var = BatchStat(jnp.ones((hidden,)))
    self.step_count = nnx.Variable(jnp.array(0.0))
    self.cache = nnx.Cache(jnp.zeros((4, hidden)))

  def __call__(self, x):
    return x @ self.kernel + self.bias


def multi_state_filter(seed, x, hidden, eps):
  model = MultiState(x.shape[-1], int(hidden), rngs=nnx.Rngs(int(seed)))
  params = nnx.state(model, nnx.Param)
  batch_stats = nnx.state(model, BatchStat)
  plain_vars = nnx.state(
    model, nnx.All(nnx.Variable, nnx.Not(nnx.Param), nnx.Not(BatchStat), nnx.Not(nnx.Cache))
  )
  param_leaves = len(jax.tree_util.tree_leaves(params))
  bs_leaves = len(jax.tree_util.tree_leaves(batch_stats))
  plain_leaves = len(jax.tree_util.tree_leaves(plain_vars))
  return jnp.array([float(param_leaves), float(bs_leaves), float(plain_leaves)]) + 0.0 * float(eps)


@pytest.mark.parametrize("seed,n,hidden", [(0.0, 3, 5.0), (7.0, 1, 2.0), (123.0, 6, 16.0)])
def test_exercise_counts(seed, n, hidden):
  out = multi_state_filter(seed, jnp.arange(n, dtype=jnp.float32), hidden, 1e-5)
  assert_trees_equal(np.asarray(out), [2.0, 2.0, 1.0])


def test_worked_example():
  m = MultiState(3, 5, rngs=nnx.Rngs(0))
  assert len(jax.tree_util.tree_leaves(nnx.state(m))) == 6
  assert len(jax.tree_util.tree_leaves(nnx.state(m, nnx.Param))) == 2
  assert len(jax.tree_util.tree_leaves(nnx.state(m, BatchStat))) == 2
  assert m(jnp.ones((2, 3))).shape == (2, 5)
  # nnx.Variable matches everything: it is the root of the hierarchy.
  assert len(jax.tree_util.tree_leaves(nnx.state(m, nnx.Variable))) == 6

"""Pure (the seeds' PureModule): what ``Module.partition`` returns."""

import copy

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal, graphs, same_graph


class Count(nnx.Variable):
  pass


class Model(nnx.Module):
  def __init__(self, rngs):
    self.encoder = nnx.Linear(3, 4, rngs=rngs)
    self.layers = nnx.Sequence([nnx.Linear(4, 4, rngs=rngs), nnx.Linear(4, 2, rngs=rngs)])
    self.count = Count(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    return self.layers(self.encoder(x))

  def encode(self, x):
    self.count += 10
    return self.encoder(x)


def test_partition_returns_pure_that_unpacks_like_the_seed_pair():
  model = Model(nnx.Rngs(0))
  pure = model.partition()
  assert isinstance(pure, nnx.Pure) and nnx.PureModule is nnx.Pure
  state, moduledef = pure
  assert pure.states is state and pure.graphdef is moduledef and pure.moduledef is moduledef
  assert moduledef == nnx.graphdef(model)
  (params, counts), moduledef2 = model.partition(nnx.Param, Count)
  assert moduledef2 == moduledef
  assert sorted(counts.to_flat_dict()) == [("count",)]
  assert len(jax.tree.leaves(params)) == 6


def test_merge_and_get_state():
  model = Model(nnx.Rngs(0))
  pure = model.partition(nnx.Param, ...)
  merged = pure.merge()
  assert type(merged) is Model and merged is not model
  assert merged.encoder.kernel is not model.encoder.kernel
  assert_trees_equal(merged.encoder.kernel.value, model.encoder.kernel.value)
  whole = pure.get_state()
  assert sorted(whole.to_flat_dict()) == sorted(nnx.state(model).to_flat_dict())


def test_apply_returns_output_and_new_pure_and_leaves_input_untouched():
  model = Model(nnx.Rngs(0))
  pure = model.partition(nnx.Param, Count)
  x = jnp.ones((2, 3))
  y, new = pure.apply(x)
  assert_trees_equal(y, model(x))
  assert isinstance(new, nnx.Pure) and new.graphdef == pure.graphdef
  assert int(new.get_state().count.value) == 1
  assert int(pure.get_state().count.value) == 0  # the input is unchanged
  y2, newer = new.apply(x)
  assert int(newer.get_state().count.value) == 2


def test_apply_and_call_chain_attributes_methods_and_items():
  model = Model(nnx.Rngs(0))
  pure = model.partition()
  x = jnp.ones((2, 3))
  h, after = pure.apply.encode(x)
  assert_trees_equal(h, model.encoder(x))
  assert int(after.get_state().count.value) == 10
  h2, _ = pure.apply.encoder(x)
  assert_trees_equal(h2, h)
  z, _ = pure.apply.layers[1](jnp.ones((2, 4)))
  assert_trees_equal(z, model.layers[1](jnp.ones((2, 4))))
  out = pure.call(x)
  assert_trees_equal(out, model(x))
  assert_trees_equal(pure.call.layers[0](jnp.ones((1, 4))), model.layers[0](jnp.ones((1, 4))))


def test_pure_is_a_jit_argument_and_result_without_retrace():
  model = Model(nnx.Rngs(0))
  pure = model.partition()  # apply returns one State, so the output fits the input
  counter = TraceCounter()

  @jax.jit
  @counter
  def step(pure, x):
    return pure.apply(x)

  x = jnp.ones((2, 3))
  y, pure2 = step(pure, x)
  with assert_no_retrace(counter):
    y3, pure3 = step(pure2, x)
  assert counter.count == 1
  assert int(pure3.get_state().count.value) == 2
  assert_trees_equal(y, y3)
  leaves = jax.tree.leaves(pure)
  assert len(leaves) == len(jax.tree.leaves(nnx.state(model)))


def test_pure_training_loop_matches_the_moduledef_apply_loop():
  """A Pure-based SGD loop gives exactly what the seeds' moduledef.apply loop gives."""
  x = jax.random.normal(jax.random.key(1), (8, 3))
  y = jax.random.normal(jax.random.key(2), (8, 2))

  @jax.jit
  def pure_step(pure, x, y):
    (params, counts), moduledef = pure.partition(nnx.Param, Count)

    def loss_fn(params):
      y_pred, updates = nnx.Pure((params, counts), moduledef).apply(x)
      return jnp.mean((y_pred - y) ** 2), updates

    grads, updates = jax.grad(loss_fn, has_aux=True)(params)
    params = jax.tree.map(lambda w, g: w - 0.1 * g, params, grads)
    return updates.update_state(params)

  (params, counts), moduledef = Model(nnx.Rngs(0)).partition(nnx.Param, Count)

  @jax.jit
  def seed_step(params, counts, x, y):
    def loss_fn(params):
      y_pred, (updates, _) = moduledef.apply(params, counts)(x)
      return jnp.mean((y_pred - y) ** 2), updates.filter(Count)

    grads, counts = jax.grad(loss_fn, has_aux=True)(params)
    return jax.tree.map(lambda w, g: w - 0.1 * g, params, grads), counts

  pure = Model(nnx.Rngs(0)).partition()
  for _ in range(3):
    pure = pure_step(pure, x, y)
    params, counts = seed_step(params, counts, x, y)
  a = pure.merge()
  b = moduledef.merge(params, counts)
  assert int(a.count.value) == int(b.count.value) == 3
  assert_trees_equal(nnx.state(a), nnx.state(b))  # exact: rtol=atol=0


def test_filter_partition_pop_and_update_state():
  model = Model(nnx.Rngs(0))
  pure = model.partition()
  assert sorted(pure.filter(Count)) == ["count"]
  params, counts = pure.filter(nnx.Param, Count)
  assert len(jax.tree.leaves(params)) == 6
  split = pure.partition(nnx.Param, ...)
  assert isinstance(split, nnx.Pure) and len(split.states) == 2
  with pytest.raises(nnx.FilterError, match="not matched: count"):
    pure.partition(nnx.Param)
  popped, rest = pure.pop_state(Count)
  assert sorted(popped) == ["count"] and "count" not in rest.states
  zeros = jax.tree.map(jnp.zeros_like, params)
  updated = pure.update_state(zeros)
  assert float(updated.merge().encoder.kernel.value.sum()) == 0.0
  assert float(pure.merge().encoder.kernel.value.sum()) != 0.0
  from_module = pure.update_state(Model(nnx.Rngs(5)))
  assert_trees_equal(
    from_module.merge().encoder.kernel.value, Model(nnx.Rngs(5)).encoder.kernel.value
  )


def test_pure_on_a_module_is_one_state_leaf_and_copies():
  holder = nnx.Module()
  pure = nnx.Linear(2, 2, rngs=nnx.Rngs(0)).partition()
  holder.pure = pure
  assert nnx.is_node_leaf(pure) and not hasattr(pure, "_fields")
  assert list(nnx.state(holder)) == ["pure"]
  assert len(jax.tree.leaves(nnx.state(holder))) == 2
  c = copy.copy(pure)
  assert isinstance(c, nnx.Pure) and c.graphdef == pure.graphdef
  assert "Pure(states=" in repr(pure)


@given(graphs())
def test_pure_round_trip_law(root):
  """partition → flatten → unflatten → merge rebuilds the same graph (sharing included)."""
  for pure in (root.partition(), root.partition(nnx.Param, ...)):
    leaves, treedef = jax.tree.flatten(pure)
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert isinstance(rebuilt, nnx.Pure) and rebuilt.graphdef == pure.graphdef
    assert same_graph(rebuilt.merge(), root)

"""Every example of the original NNX README (0.0.7/0.0.8), ported to nnx_eqx.

Ported with ``ctx: nnx.Context`` → ``rngs: nnx.Rngs``, ``ctx.make_rng("params")`` →
``rngs.params()``, ``jax.tree_map`` → ``jax.tree.map``, and Context flags →
module attributes set by ``eval()``/``set_attributes``. Each test asserts what
the README states about the example.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

# -- Getting Started ----------------------------------------------------------------


class Count(nnx.Variable):
  pass


class Linear(nnx.Module):
  def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
    key = rngs.params()
    self.w = nnx.Param(jax.random.uniform(key, (din, dout)))
    self.b = nnx.Param(jnp.zeros((dout,)))
    self.count = Count(0)  # track the number of calls

  def __call__(self, x):
    self.count += 1
    return x @ self.w + self.b


X = jnp.ones((8, 12))
Y = jnp.zeros((8, 2))


def getting_started():
  model = Linear(din=12, dout=2, rngs=nnx.Rngs(0))
  y = model(X)
  return model, y


def test_getting_started_counts_calls():
  model, y = getting_started()
  assert y.shape == (8, 2)
  assert model.count == 1


def test_training_with_the_functional_api():
  model, _ = getting_started()
  (params, counts), moduledef = model.partition(nnx.Param, Count)

  @jax.jit
  def train_step(params, counts, x, y):
    def loss_fn(params):
      y_pred, (updates, _) = moduledef.apply(params, counts)(x)
      loss = jax.numpy.mean((y_pred - y) ** 2)
      return loss, updates.filter(Count)

    # compute gradient
    grads, counts = jax.grad(loss_fn, has_aux=True)(params)
    # SGD update
    params = jax.tree.map(lambda w, g: w - 0.1 * g, params, grads)

    return params, counts

  # execute the training step
  new_params, counts = train_step(params, counts, X, Y)
  model = moduledef.merge(new_params, counts)
  assert model.count == 2
  expected_w = params.w.value - 0.1 * jax.grad(
    lambda w: jnp.mean((X @ w + params.b.value - Y) ** 2)
  )(params.w.value)
  assert_trees_close(model.w.value, expected_w)


def test_training_with_lifted_transforms():
  model, _ = getting_started()
  w0 = model.w.value

  @nnx.jit
  def train_step(model, x, y):
    def loss_fn(model):
      y_pred = model(x)
      return jax.numpy.mean((y_pred - y) ** 2)

    # compute gradient
    grads: nnx.State = nnx.grad(loss_fn, wrt=nnx.Param)(model)
    # SGD update
    model.update_state(jax.tree.map(lambda w, g: w - 0.1 * g, model.filter(nnx.Param), grads))

  # execute the training step
  train_step(model, X, Y)
  assert model.count == 2
  assert not np.array_equal(model.w.value, w0)  # the update propagated out without a return


# -- User Guide: Modules, Functional API, Partitioning, Filters ---------------------


class Foo(nnx.Module):
  def __init__(self, rngs: nnx.Rngs):
    # node attributes
    self.variable = nnx.Param(jnp.array(1))
    self.np_buffer = np.array(2)
    self.jax_buffer = jnp.array(3)
    self.node = nnx.Node([4, 5])
    self.submodule = nnx.Linear(2, 4, rngs=rngs)
    # static attributes
    self.int = 1
    self.float = 2.0
    self.str = "hello"
    self.list = [1, 2, 3]

  def some_method(self, x):
    return self.submodule(x) * self.variable


def test_modules_node_and_static_attributes():
  model = Foo(rngs=nnx.Rngs(0))
  state, moduledef = model.partition()
  flat = state.to_flat_dict()
  assert list(flat) == [
    ("jax_buffer",),
    ("node",),
    ("np_buffer",),
    ("submodule", "bias"),
    ("submodule", "kernel"),
    ("variable",),
  ]
  assert repr(flat[("node",)]) == "Node(value=[4, 5])"
  assert type(flat[("variable",)]) is nnx.Param and type(flat[("submodule", "kernel")]) is nnx.Param
  # static attributes (python containers of non-nodes included) live in the moduledef
  rebuilt = moduledef.merge(state)
  assert (rebuilt.int, rebuilt.float, rebuilt.str, rebuilt.list) == (1, 2.0, "hello", [1, 2, 3])


def test_functional_api_merge_and_apply():
  model = Foo(rngs=nnx.Rngs(0))
  state, moduledef = model.partition()
  # State and ModuleDef are pytrees: they can be passed to JAX transformations
  assert jax.tree.leaves(moduledef) == []
  state2, moduledef2 = jax.jit(lambda s, m: (s, m))(state, moduledef)
  assert moduledef2 == moduledef
  model = moduledef.merge(state2)
  x = jnp.ones((1, 2))
  # run __call__-like methods, any nested method, or a submodule
  y, (state, moduledef) = moduledef.apply(state).some_method(x)
  assert_trees_equal(y, model.some_method(x))
  y, (state, moduledef) = moduledef.apply(state).submodule(x)
  assert_trees_equal(y, model.submodule(x))


class WithStats(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(2, 2, rngs=rngs)
    self.bn = nnx.BatchNorm(2, rngs=rngs)
    self.extra = nnx.Node(jnp.ones(1))

  def __call__(self, x):
    return self.bn(self.linear(x)) * self.extra.value


def test_partitioning_state():
  model = WithStats(nnx.Rngs(0))
  x = jnp.ones((4, 2))
  # partition the module into the state with all the nodes and the moduledef
  state, moduledef = model.partition()
  # verify that the state contains only params, else raise an error
  with pytest.raises(nnx.FilterError, match=r"not matched: bn/mean \(BatchStat\), bn/var"):
    model.partition(nnx.Param)
  params, _ = nnx.Linear(2, 2, rngs=nnx.Rngs(0)).partition(nnx.Param)
  assert sorted(params) == ["bias", "kernel"]
  # split into params and batch_stats; with nodes left over this raises
  with pytest.raises(nnx.FilterError, match=r"not matched: extra \(Node\)"):
    model.partition(nnx.Param, nnx.BatchStat)
  # if there are any nodes left, use the `...` filter to capture them
  (params, batch_stats, rest), moduledef = model.partition(nnx.Param, nnx.BatchStat, ...)
  assert sorted(batch_stats.bn) == ["mean", "var"] and list(rest) == ["extra"]
  # using `...` as the only filter is equivalent to not passing any filters
  everything, moduledef_all = model.partition(...)
  assert moduledef_all == moduledef
  assert_trees_equal(everything, state)
  # a predicate filter: (path, value) -> bool
  (kernels, others), _ = model.partition(lambda path, v: path[-1] == "kernel", ...)
  assert list(kernels.to_flat_dict()) == [("linear", "kernel")]
  # merge and apply take the substates
  merged = moduledef.merge(params, batch_stats, rest)
  y, (state, moduledef) = moduledef.apply(params, batch_stats, rest)(x)
  assert_trees_equal(y, merged(x))
  # apply returns one state; re-partition it with State.partition
  params, batch_stats, rest = state.partition(nnx.Param, nnx.BatchStat, ...)
  assert not np.array_equal(batch_stats.bn.mean.value, model.bn.mean.value)  # stats updated
  # State.filter does not raise for unmatched nodes
  only_params = state.filter(nnx.Param)
  params2, batch_stats2 = state.filter(nnx.Param, nnx.BatchStat)
  assert_trees_equal(only_params, params)
  assert_trees_equal((params2, batch_stats2), (params, batch_stats))


def test_filters_not_and_buffers():
  module = Foo(rngs=nnx.Rngs(0))
  rest = module.filter(nnx.Not(nnx.Param))
  buffers = module.filter(nnx.buffers)
  assert sorted(rest) == ["jax_buffer", "node", "np_buffer"]
  assert sorted(buffers) == ["jax_buffer", "np_buffer"]
  # a tuple of filters matches nodes matching any of them
  assert sorted(module.filter((nnx.Node, nnx.buffers))) == ["jax_buffer", "node", "np_buffer"]


# -- Capturing Intermediate Values ----------------------------------------------------


class CapturingLinear(nnx.Module):
  def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
    key = rngs.params()
    self.w = nnx.Param(jax.random.uniform(key, (din, dout)))
    self.b = nnx.Param(jnp.zeros((dout,)))

  def __call__(self, x):
    y = x @ self.w + self.b
    self.y = nnx.Intermediate(y)
    return y


def test_capturing_intermediates_with_pop_state():
  model = CapturingLinear(12, 2, rngs=nnx.Rngs(0))
  assert not hasattr(model, "y")  # not available upon initialization
  y = model(jnp.ones((8, 12)))
  intermediates = model.pop_state(nnx.Intermediate)
  assert list(intermediates.to_flat_dict()) == [("y",)]
  assert type(intermediates.y) is nnx.Intermediate
  assert_trees_equal(intermediates.y.value, y)
  assert not hasattr(model, "y")  # removed from the module's attributes


def test_capturing_intermediates_with_the_functional_api_and_sow():
  model = CapturingLinear(12, 2, rngs=nnx.Rngs(0))
  state, moduledef = model.partition()
  y, (new_state, _) = moduledef.apply(state)(jnp.ones((8, 12)))
  # "pop" the intermediates from the state
  intermediates, new_state = new_state.partition("intermediates", ...)
  assert_trees_equal(intermediates.y.value, y)
  assert sorted(new_state) == ["b", "w"] and "y" not in state  # the input state is untouched
  # State.filter retrieves them without removing them
  _, (state2, _) = moduledef.apply(new_state)(jnp.ones((8, 12)))
  assert "y" in state2.filter(nnx.Intermediate) and "y" in state2
  # sow accumulates values in a tuple, as the seeds' Module.sow
  model.sow(nnx.Intermediate, "acts", y)
  model.sow(nnx.Intermediate, "acts", 2 * y)
  acts = model.pop_state(nnx.Intermediate).acts.value
  assert len(acts) == 2
  assert_trees_equal(acts[1], 2 * y)


# -- Manual Lifting: scan over layers with jax.vmap + jax.lax.scan --------------------


class Block(nnx.Module):
  def __init__(self, dim: int, *, rngs: nnx.Rngs):
    self.linear = nnx.Linear(dim, dim, rngs=rngs)
    self.dropout = nnx.Dropout(0.5)

  def __call__(self, x: jax.Array, *, train: bool, rngs: nnx.Rngs) -> jax.Array:
    x = self.linear(x)
    x = self.dropout(x, deterministic=not train, rngs=rngs)
    x = jax.nn.gelu(x)
    return x


class ScanMLP(nnx.Module):
  def __init__(self, dim: int, *, n_layers: int, rngs: nnx.Rngs):
    params_key = jax.random.split(rngs.params(), n_layers)
    self.n_layers = n_layers
    self.layers = jax.vmap(lambda key: Block(dim, rngs=nnx.Rngs(params=key)).partition())(
      params_key
    ).merge()

  def __call__(self, x: jax.Array, *, train: bool, rngs: nnx.Rngs) -> jax.Array:
    dropout_key = jax.random.split(rngs.dropout(), self.n_layers)
    params, moduledef = self.layers.partition(nnx.Param)

    def scan_fn(x, inputs):
      params, dropout_key = inputs
      module = moduledef.merge(params)
      x = module(x, train=train, rngs=nnx.Rngs(dropout=dropout_key))
      return x, module.filter(nnx.Param)

    x, params = jax.lax.scan(scan_fn, x, (params, dropout_key))
    self.layers.update_state(params)
    return x


def unrolled(model: ScanMLP, x, *, train: bool, seed: int):
  """The same computation as ScanMLP.__call__, one layer at a time in Python."""
  keys = jax.random.split(nnx.Rngs(dropout=seed).dropout(), model.n_layers)
  params, moduledef = model.layers.partition(nnx.Param)
  for i in range(model.n_layers):
    block = moduledef.merge(jax.tree.map(lambda a: a[i], params))
    x = block(x, train=train, rngs=nnx.Rngs(dropout=keys[i]))
  return x


def test_scan_over_layers_by_hand():
  model = ScanMLP(10, n_layers=5, rngs=nnx.Rngs(0))
  kernels = model.layers.linear.kernel.value
  assert kernels.shape == (5, 10, 10)  # one Block whose params have a `layer` axis
  assert all(not np.array_equal(kernels[0], kernels[i]) for i in range(1, 5))  # per-layer params
  x = jnp.ones((3, 10))
  y = model(x, train=True, rngs=nnx.Rngs(dropout=1))
  assert y.shape == (3, 10)
  assert_trees_close(y, unrolled(model, x, train=True, seed=1))
  y_eval = model(x, train=False, rngs=nnx.Rngs(dropout=1))
  assert_trees_close(y_eval, unrolled(model, x, train=False, seed=1))
  assert not np.allclose(y, y_eval)  # dropout was applied in training mode
  assert_trees_equal(model.layers.linear.kernel.value, kernels)  # state written back


# -- Case study: Shared State ------------------------------------------------------------


class SharedBlock(nnx.Module):
  def __init__(self, linear: nnx.Linear, *, rngs: nnx.Rngs):
    self.linear = linear
    self.bn = nnx.BatchNorm(2, rngs=rngs)

  def __call__(self, x):
    x = self.linear(x)
    x = self.bn(x)
    x = nnx.relu(x)
    return x


class Model(nnx.Module):
  def __init__(self, *, rngs: nnx.Rngs):
    shared = nnx.Linear(2, 2, rngs=rngs)
    self.block1 = SharedBlock(shared, rngs=rngs)
    self.block2 = SharedBlock(shared, rngs=rngs)

  def __call__(self, x):
    x = self.block1(x)
    x = self.block2(x)
    return x


def loss_fn(model: Model, x: jax.Array, y: jax.Array):
  y_pred = model(x)
  return jnp.mean((y - y_pred) ** 2)


def test_shared_state_stays_in_sync_including_gradient_updates():
  model = Model(rngs=nnx.Rngs(0))
  model.set_attributes(use_running_average=True)  # the seeds' Context flag, for every BatchNorm
  assert model.block1.bn.use_running_average and model.block2.bn.use_running_average
  x = jax.random.normal(jax.random.key(1), (4, 2))
  y = jax.random.normal(jax.random.key(2), (4, 2))
  paths = [p for p in nnx.state(model, nnx.Param).to_flat_dict() if "linear" in p]
  assert paths == [("block1", "linear", "bias"), ("block1", "linear", "kernel")]  # stored once

  @nnx.jit
  def train_step(model, x, y):
    grads = nnx.grad(loss_fn, wrt=nnx.Param)(model, x, y)
    model.update_state(jax.tree.map(lambda w, g: w - 0.1 * g, model.filter(nnx.Param), grads))
    return grads

  stats = nnx.state(model, nnx.BatchStat)
  w = model.block1.linear.kernel.value
  grads = train_step(model, x, y)
  assert model.block1.linear is model.block2.linear  # still one module after the update
  assert_trees_equal(model.block2.linear.kernel.value, w - 0.1 * grads.block1.linear.kernel.value)
  assert_trees_equal(nnx.state(model, nnx.BatchStat), stats)  # running averages

  # the gradient of the shared kernel accumulates both uses
  def by_hand(kernel):
    m = nnx.clone(model)
    m.block1.linear.kernel.value = kernel
    return loss_fn(m, x, y)

  g_hand = jax.grad(by_hand)(model.block1.linear.kernel.value)
  g_nnx = nnx.grad(loss_fn)(model, x, y).block1.linear.kernel.value
  assert_trees_close(g_nnx, g_hand)

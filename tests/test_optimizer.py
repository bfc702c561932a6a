"""nnx.Optimizer: bit-for-bit equal to a hand-written optax loop, wrt filters, extra
arguments, optimizer state as graph state (split/merge/nnx.jit), trace counts, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close, assert_trees_equal

RNG = np.random.default_rng(0)
X = jnp.asarray(RNG.standard_normal((16, 3)), jnp.float32)
Y = jnp.asarray(RNG.standard_normal((16, 2)), jnp.float32)


def np_init(key, shape, dtype=jnp.float32):
  return jnp.asarray(0.5 * np.random.default_rng(sum(shape)).standard_normal(shape), dtype)


class MLP(nnx.Module):
  def __init__(self, rngs, **kw):
    init = {"kernel_init": np_init, "bias_init": np_init}
    self.l1 = nnx.Linear(3, 8, rngs=rngs, **init, **kw)
    self.l2 = nnx.Linear(8, 2, rngs=rngs, **init)

  def __call__(self, x):
    return self.l2(jax.nn.relu(self.l1(x)))


def loss_pure(p, x, y):
  """The same model and loss, hand-written on a plain dict of parameters."""
  h = jax.nn.relu(x @ p["l1"]["kernel"] + p["l1"]["bias"])
  return ((h @ p["l2"]["kernel"] + p["l2"]["bias"] - y) ** 2).mean()


def params_of(model, *filters):
  return nnx.state(model, *(filters or (nnx.Param,))).to_pure_dict()


def nnx_step():
  counter = TraceCounter()

  @nnx.jit
  @counter
  def step(model, opt, x, y, **extra):
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    opt.update(model, grads, **extra)
    return loss

  return step, counter


def leaves(tree):
  return jax.tree.leaves(tree, is_leaf=lambda v: isinstance(v, nnx.Variable))


@pytest.mark.parametrize("make_tx", [lambda: optax.sgd(0.1), lambda: optax.adam(1e-2)])
def test_bit_for_bit_equal_to_a_hand_written_optax_loop(make_tx):
  model = MLP(nnx.Rngs(0))
  tx = make_tx()
  opt = nnx.Optimizer(model, tx, wrt=nnx.Param)
  params = params_of(model)
  with jax.numpy_dtype_promotion("standard"):  # optax's own code needs standard promotion
    state = tx.init(params)

    @jax.jit
    def ref_step(params, state, x, y):
      loss, grads = jax.value_and_grad(loss_pure)(params, x, y)
      updates, state = tx.update(grads, state, params)
      return optax.apply_updates(params, updates), state, loss

    step, counter = nnx_step()
    for i in range(6):
      params, state, ref_loss = ref_step(params, state, X, Y)
      loss = step(model, opt, X, Y)
      assert float(loss) == float(ref_loss), i
      jax.tree.map(np.testing.assert_array_equal, params_of(model), params)
      opt_values = [v.value for v in leaves(opt.opt_state)]
      assert len(opt_values) == len(jax.tree.leaves(state))
      jax.tree.map(np.testing.assert_array_equal, opt_values, jax.tree.leaves(state))
  assert int(opt.step.value) == 6 and opt.step.value.dtype == jnp.uint32
  assert counter.count == 1  # traced once for six steps


def test_wrt_filter_updates_only_the_selected_variables():
  model = MLP(nnx.Rngs(0))
  wrt = nnx.All(nnx.Param, nnx.PathContains("l1"))
  opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=wrt)
  assert sorted(opt.opt_state[0].mu) == ["l1"]
  l2_before = params_of(model)["l2"]
  l1_before = params_of(model)["l1"]
  step, counter = nnx_step()  # grads w.r.t. every Param: the optimizer picks its subset
  step(model, opt, X, Y)
  step(model, opt, X, Y)
  jax.tree.map(np.testing.assert_array_equal, params_of(model)["l2"], l2_before)
  assert not np.array_equal(params_of(model)["l1"]["kernel"], l1_before["kernel"])
  assert counter.count == 1

  # grads computed with the same filter work too
  grads = nnx.grad(lambda m: ((m(X) - Y) ** 2).mean(), wrt=wrt)(model)
  opt.update(model, grads)
  assert int(opt.step.value) == 3


def test_extra_args_value_for_reduce_on_plateau():
  tx = optax.chain(optax.sgd(0.1), optax.contrib.reduce_on_plateau(patience=1, factor=0.5))
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, tx)
  params = params_of(model)
  with jax.numpy_dtype_promotion("standard"):
    state = tx.init(params)

    @jax.jit
    def ref_step(params, state, x, y, value):
      grads = jax.grad(loss_pure)(params, x, y)
      updates, state = tx.update(grads, state, params, value=value)
      return optax.apply_updates(params, updates), state

    step, _ = nnx_step()
    for value in [3.0, 3.0, 3.0, 3.0]:  # a plateau: the scale drops
      params, state = ref_step(params, state, X, Y, jnp.float32(value))
      step(model, opt, X, Y, value=jnp.float32(value))
  jax.tree.map(np.testing.assert_array_equal, params_of(model), params)
  assert float(opt.opt_state[1].scale.value) == float(state[1].scale) < 1.0


def test_extra_args_value_fn_for_a_line_search():
  tx = optax.chain(optax.sgd(1.0), optax.scale_by_backtracking_linesearch(max_backtracking_steps=8))
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, tx)

  @nnx.jit
  def step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    value_fn = lambda p: loss_pure(p, x, y)  # noqa: E731
    opt.update(model, grads, value=loss, grad=grads, value_fn=value_fn)
    return loss

  losses = [float(step(model, opt, X, Y)) for _ in range(4)]
  assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0]


def test_optimizer_state_is_graph_state():
  model = MLP(nnx.Rngs(0), kernel_metadata={"sharding": (None, "hidden")})
  opt = nnx.Optimizer(model, optax.adam(1e-2))
  mu = opt.opt_state[0].mu
  assert isinstance(mu["l1"]["kernel"], nnx.OptVariable)
  assert mu["l1"]["kernel"].sharding == (None, "hidden")  # the parameter's metadata
  assert isinstance(opt.opt_state[0].count, nnx.OptArray)
  opt_leaves = jax.tree.leaves(nnx.state(opt, nnx.OptState))
  assert len(opt_leaves) == 1 + 1 + 2 * 4  # step, count, mu and nu of four params
  assert len(nnx.state(opt, nnx.Param)) == 0  # moments are not Params

  graphdef, state = nnx.split(opt)
  model2, opt2 = nnx.clone(model), nnx.merge(graphdef, state, copy=True)
  step, _ = nnx_step()
  step(model, opt, X, Y)
  step(model2, opt2, X, Y)
  jax.tree.map(np.testing.assert_array_equal, params_of(model2), params_of(model))
  jax.tree.map(np.testing.assert_array_equal, nnx.state(opt2), nnx.state(opt))


def test_eager_update_and_a_raw_dict_of_grads():
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.sgd(0.5))
  before = params_of(model)
  grads = jax.grad(loss_pure)(before, X, Y)
  updates = opt.update(model, grads)
  jax.tree.map(lambda p, b, g: assert_trees_equal(p, b - 0.5 * g), params_of(model), before, grads)
  jax.tree.map(lambda u, g: assert_trees_equal(u, -0.5 * g), updates, grads)


def test_jitted_step_does_not_retrace_and_the_optimizer_is_unchanged_on_error():
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.adam(1e-2))
  step, counter = nnx_step()
  step(model, opt, X, Y)
  with assert_no_retrace(counter):
    step(model, opt, X, Y)
  before = [np.asarray(v) for v in jax.tree.leaves(nnx.state(opt))]

  @nnx.jit
  def broken(model, opt, x):
    opt.update(model, nnx.grad(lambda m: m(x).sum())(model))
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    broken(model, opt, X)
  after = jax.tree.leaves(nnx.state(opt))
  assert_trees_equal(after, before)  # a failed update leaves the state untouched


def test_grads_missing_paths_raise_naming_them():
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.sgd(0.1))
  grads = nnx.grad(lambda m: m(X).sum(), wrt=nnx.All(nnx.Param, nnx.PathContains("l1")))(model)
  with pytest.raises(nnx.StateMismatchError, match="grads lack the paths l2/bias, l2/kernel"):
    opt.update(model, grads)
  with pytest.raises(nnx.StateMismatchError, match="grads must be a State"):
    opt.update(model, [1.0])


class RawLinear(nnx.Module):
  """Raw jax.Array attributes as graph leaves (flax.nnx 0.12's 07_array_leaves)."""

  def __init__(self):
    self.w = jnp.asarray(RNG.standard_normal((3, 2)), jnp.float32)
    self.b = jnp.zeros((2,))
    self.count = jnp.array(0)

  def __call__(self, x):
    self.count += 1
    return x @ self.w + self.b


def _is_wb(path, value) -> bool:
  return path[-1] in ("w", "b")


def test_raw_array_leaves_are_optimized_like_an_optax_loop():
  model = RawLinear()
  opt = nnx.Optimizer(model, optax.adam(0.1), wrt=_is_wb)
  assert type(opt.opt_state[0].mu["w"]).__name__ == "OptArray"
  counter = TraceCounter()

  @nnx.jit
  @counter
  def step(model, opt):
    grads = nnx.grad(lambda m: jnp.mean((m(X) - Y) ** 2), argnums=nnx.DiffState(0, _is_wb))(model)
    opt.update(model, grads)

  tx = optax.adam(0.1)
  params = {"b": model.b, "w": model.w}
  with jax.numpy_dtype_promotion("standard"):  # optax relies on it
    opt_state = tx.init(params)
    for _ in range(3):
      grads = jax.grad(lambda p: jnp.mean((X @ p["w"] + p["b"] - Y) ** 2))(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      params = optax.apply_updates(params, updates)
  step(model, opt)
  with assert_no_retrace(counter):
    step(model, opt)
    step(model, opt)
  assert_trees_close({"b": model.b, "w": model.w}, params)
  assert int(model.count) == 3 and int(opt.step.value) == 3


def test_a_failed_update_of_raw_array_leaves_changes_nothing():
  model = RawLinear()
  opt = nnx.Optimizer(model, optax.sgd(0.1), wrt=_is_wb)
  before = jax.tree.leaves((nnx.state(model), nnx.state(opt)))

  @nnx.jit
  def broken(model, opt):
    grads = nnx.grad(lambda m: jnp.sum(m(X)), argnums=nnx.DiffState(0, _is_wb))(model)
    opt.update(model, grads)
    raise ValueError("after the update")

  with pytest.raises(ValueError, match="after the update"):
    broken(model, opt)
  assert_trees_equal(jax.tree.leaves((nnx.state(model), nnx.state(opt))), before)


def test_update_accepts_gradients_as_a_module_copy():
  model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.sgd(0.5), wrt=nnx.Param)
  grads = nnx.grad(lambda m: jnp.sum(m(jnp.ones((1, 2)))), graph=False)(model)
  assert isinstance(grads, nnx.Linear)
  before = model.kernel[...]
  opt.update(model, grads)
  assert_trees_close(model.kernel[...], before - 0.5 * grads.kernel[...])

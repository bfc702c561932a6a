"""nnx.jit_partial, nnx.jit's in_shardings/out_shardings (with nnx.StateSharding)
and ahead-of-time lower().compile() with updates written back."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close

P = jax.sharding.PartitionSpec


class Counted(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.ones((2, 3)))
    self.count = nnx.Variable(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    return x @ self.w


def mesh_1d():
  return jax.sharding.Mesh(np.array(jax.devices()), ("d",))


def test_jit_partial_binds_modules_and_writes_updates_back():
  m = Counted()
  counter = TraceCounter()
  f = nnx.jit_partial(counter(lambda m, x: m(x)), m)
  x = jnp.ones((4, 2))
  assert_trees_close(f(x), jnp.full((4, 3), 2.0))
  with assert_no_retrace(counter):
    m.w.value = jnp.zeros((2, 3))  # a new value, not a new structure
    assert_trees_close(f(x), jnp.zeros((4, 3)))
  assert int(m.count.value) == 2


def test_jit_partial_train_step_matches_jit():
  def train_step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    opt.update(model, grads)
    return loss

  x, y = jnp.ones((8, 2)), jnp.zeros((8, 3))
  a, b = nnx.Linear(2, 3, rngs=nnx.Rngs(0)), nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  opt_a = nnx.Optimizer(a, optax.sgd(0.1), wrt=nnx.Param)
  opt_b = nnx.Optimizer(b, optax.sgd(0.1), wrt=nnx.Param)
  step = nnx.jit_partial(train_step, a, opt_a)
  ref = nnx.jit(train_step)
  for _ in range(3):
    assert_trees_close(step(x, y), ref(b, opt_b, x, y))
  assert_trees_close(nnx.state(a), nnx.state(b))


def test_lower_compile_runs_and_writes_updates_back():
  m = Counted()
  f = nnx.jit_partial(lambda m, x: m(x), m)
  compiled = f.lower(jnp.ones((1, 2))).compile()
  assert "dot_general" in f.lower(jnp.ones((1, 2))).as_text()
  compiled(jnp.ones((1, 2)))
  compiled(jnp.ones((1, 2)))
  assert int(m.count.value) == 2


def test_compiled_call_with_other_structure_raises():
  m = Counted()
  compiled = nnx.jit(lambda m, x: m(x)).lower(m, jnp.ones((1, 2))).compile()
  with pytest.raises(nnx.CompiledStructureError, match="lower and compile again"):
    compiled(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), jnp.ones((1, 2)))


@pytest.mark.devices(2)  # a sharding that a single device would not keep
def test_state_sharding_places_module_state_and_keeps_it():
  mesh = mesh_1d()
  rows = jax.sharding.NamedSharding(mesh, P("d"))
  spec = nnx.StateSharding({nnx.PathContains("kernel"): rows, ...: None})
  m = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
  before = m.kernel.value

  @nnx.jit(in_shardings=(spec, None))
  def step(m, x):
    m.kernel.value = m.kernel.value * 2
    return m(x)

  y = step(m, jnp.ones((3, 8)))
  assert m.kernel.value.sharding == rows  # the updated kernel kept its input sharding
  assert_trees_close(m.kernel.value, before * 2)
  assert_trees_close(y, jnp.ones((3, 8)) @ (before * 2) + m.bias.value)


def test_in_shardings_with_static_argnames_given_positionally():
  mesh = mesh_1d()
  xs = jax.sharding.NamedSharding(mesh, P("d"))
  counter = TraceCounter()

  @nnx.jit(in_shardings=(xs, None), static_argnames="relu")
  @counter
  def f(x, scale, relu):
    y = x * scale
    return jnp.maximum(y, 0).sum() if relu else y.sum()

  x = jnp.linspace(-1.0, 1.0, 16).reshape(8, 2)
  assert float(f(x, 0.5, True)) != float(f(x, 0.5, False))
  with assert_no_retrace(counter):
    f(x, 0.25, True)
  f(x, 0.5, relu=True)  # by keyword: the static value is still honoured
  assert counter.count == 3


def test_out_shardings():
  mesh = mesh_1d()
  rows = jax.sharding.NamedSharding(mesh, P("d"))
  y = nnx.jit(lambda x: x + 1, out_shardings=rows)(jnp.zeros((8, 2)))
  assert y.sharding == rows


def test_exception_leaves_bound_module_unchanged():
  m = Counted()

  def f(m, x):
    m(x)
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    nnx.jit_partial(f, m)(jnp.ones((1, 2)))
  assert int(m.count.value) == 0


def test_state_axes_map_prefix():
  axes = nnx.StateAxes({nnx.PathContains("kernel"): 0, ...: None})
  assert axes.map_prefix(("linear", "kernel"), None) == 0
  assert axes.map_prefix(("linear", "bias"), None) is None
  with pytest.raises(nnx.AxisSpecError, match="no filter"):
    nnx.StateAxes({nnx.Param: 0}).map_prefix(("a",), nnx.Variable(1))

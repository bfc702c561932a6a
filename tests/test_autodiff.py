"""nnx.grad / nnx.value_and_grad: wrt filters, argnums, has_aux, state propagation."""

import jax
import jax.numpy as jnp

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
)


class Model(nnx.Module):
  def __init__(self, rngs):
    self.l1 = nnx.Linear(3, 4, rngs=rngs)
    self.l2 = nnx.Linear(4, 1, rngs=rngs)
    self.calls = nnx.Variable(jnp.array(0))
    self.scale = nnx.BatchStat(jnp.array(2.0))

  def __call__(self, x):
    self.calls += 1
    return self.l2(jax.nn.relu(self.l1(x))) * self.scale


def loss(m, x):
  return (m(x) ** 2).mean()


def test_grad_matches_jax_grad_over_split_state():
  m = Model(nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (5, 3))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  ref = jax.grad(lambda p: loss(nnx.merge(graphdef, p, rest), x))(params)
  grads = nnx.grad(loss)(m, x)
  assert_trees_equal(grads, ref)
  assert isinstance(grads.l1.kernel, nnx.Param)
  assert int(m.calls.value) == 1  # the update made inside grad propagated


def test_wrt_filter_and_has_aux():
  m = Model(nnx.Rngs(0))
  x = jnp.ones((2, 3))
  (value, aux), grads = nnx.value_and_grad(
    lambda m: (loss(m, x), "aux"), has_aux=True, wrt=nnx.All(nnx.Param, nnx.PathContains("l2"))
  )(m)
  assert aux == "aux" and sorted(grads) == ["l2"]
  g_scale = nnx.grad(lambda m: loss(m, x), wrt=nnx.BatchStat)(m)
  assert list(g_scale.to_flat_dict()) == [("scale",)]


def test_argnums_module_and_array():
  m = Model(nnx.Rngs(0))
  x = jnp.ones((2, 3))
  g_m, g_x = nnx.grad(loss, argnums=(0, 1))(m, x)
  ref_x = jax.grad(lambda x: loss(nnx.clone(m), x))(x)
  assert_trees_close(g_x, ref_x)
  assert sorted(g_m) == ["l1", "l2"]


def test_grad_inside_jit_no_retrace():
  counter = TraceCounter()
  m = Model(nnx.Rngs(0))

  @nnx.jit
  @counter
  def step(m, x):
    value, grads = nnx.value_and_grad(loss)(m, x)
    params = nnx.state(m, nnx.Param)
    nnx.update(m, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads))
    return value

  x = jnp.ones((2, 3))
  losses = [float(step(m, x))]
  with assert_no_retrace(counter):
    losses += [float(step(m, x)) for _ in range(4)]
  assert losses[-1] < losses[0] and int(m.calls.value) == 5


# -- flax's functional convention (graph=False or graph_updates=False) -------------


def test_functional_grads_have_the_arguments_type():
  m = Model(nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (5, 3))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  ref_params = jax.grad(lambda p: loss(nnx.merge(graphdef, p, rest), x))(params)

  def loss_of_scale(s):
    model = nnx.merge(graphdef, params, rest)
    model.scale.value = s
    return loss(model, x)

  ref_scale = jax.grad(loss_of_scale)(rest["scale"].value)
  for kw in ({"graph": False}, {"graph_updates": False}):
    calls = int(m.calls.value)
    g = nnx.grad(loss, **kw)(m, x)
    assert type(g) is Model and g is not m
    assert isinstance(g.l1.kernel, nnx.Param) and isinstance(g.scale, nnx.BatchStat)
    assert_trees_close(nnx.state(g, nnx.Param), ref_params)
    assert_trees_close(g.scale.value, ref_scale)  # every inexact leaf, not just Params
    assert g.calls.value.dtype == jax.dtypes.float0  # integer leaves get no gradient
    assert int(m.calls.value) == calls + 1  # updates inside f still reach the module


def test_functional_value_and_grad_with_aux_and_a_state_argument():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)

  def f(params, rest):
    model = nnx.merge(graphdef, params, rest)
    return model(jnp.ones((1, 2))).sum(), "aux"

  (value, aux), g = nnx.value_and_grad(f, has_aux=True, graph=False)(params, rest)
  assert aux == "aux" and isinstance(g, nnx.State)
  assert_trees_equal(g["bias"].value, jnp.ones(3))


def test_functional_grad_under_jit_traces_once_and_rolls_back_on_error():
  counter = TraceCounter()
  m = Model(nnx.Rngs(0))
  x = jnp.ones((2, 3))

  @nnx.jit
  @counter
  def step(m, x):
    g = nnx.grad(loss, graph_updates=False)(m, x)
    return g.l2.bias.value

  step(m, x)
  with assert_no_retrace(counter):
    for _ in range(3):
      step(m, x)
  assert counter.count == 1
  before = nnx.state(m)

  def bad(m):
    m.scale.value = m.scale.value * 3
    raise RuntimeError("boom")

  try:
    nnx.grad(bad, graph=False)(m)
  except RuntimeError:
    pass
  assert_trees_equal(nnx.state(m), before)


def test_container_of_variables_gets_a_container_of_gradients():
  p1, p2 = nnx.Param(jnp.array(10.0)), nnx.Param(jnp.array(20.0))
  tree = {"a": [p1, p2], "b": p1}
  g = nnx.grad(lambda t: t["a"][0] + t["a"][1] + t["b"])(tree)
  assert isinstance(g["a"][0], nnx.Param) and float(g["a"][0].value) == 2.0
  assert float(g["a"][1].value) == 1.0
  assert isinstance(g["b"], nnx.State) and len(g["b"]) == 0  # p1 is counted once, under "a"
  gf = nnx.grad(lambda t: t["a"][0] + t["a"][1] + t["b"], graph_updates=False)(tree)
  assert gf["a"][0] is gf["b"] and float(gf["b"].value) == 2.0  # sharing kept

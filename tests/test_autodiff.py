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
  assert list(g_scale.flat_state()) == [("scale",)]


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

"""Equinox's transforms and tree tools on nnx_eqx modules directly (they are pytrees)."""

import io

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  sharing_classes,
)


class MLP(nnx.Module):
  def __init__(self, rngs, counting=True):
    self.l1 = nnx.Linear(3, 4, rngs=rngs)
    self.l2 = nnx.Linear(4, 4, rngs=rngs)
    self.l3 = nnx.Linear(4, 4, rngs=rngs)
    self.l3.kernel = self.l2.kernel  # tied
    self.count = nnx.Variable(jnp.array(0))
    self.counting = counting

  def __call__(self, x):
    if self.counting:  # a count made inside a gradient or vmap and not returned is
      self.count += 1  # a dropped update (nnx.LostUpdateError; test_state_under_transforms)
    return self.l3(jax.nn.relu(self.l2(jax.nn.relu(self.l1(x)))))


X = jnp.linspace(-1, 1, 15).reshape(5, 3)


def loss(m, x):
  return jnp.mean(m(x) ** 2)


def test_filter_jit_traces_once_and_state_comes_back_via_return():
  m = MLP(nnx.Rngs(0))
  counter = TraceCounter()
  f = eqx.filter_jit(counter(lambda m, x: (m(x), m)))
  y, m2 = f(m, X)
  with assert_no_retrace(counter):
    y, m2 = f(m, X)
  # The caller's module is untouched; the returned one carries the new count.
  assert int(m.count.value) == 0 and int(m2.count.value) == 1
  assert sharing_classes(m2) == sharing_classes(m)  # the tie survives the round trip
  nnx.update(m, nnx.state(m2, nnx.Variable))  # write it back in place
  assert int(m.count.value) == 1
  assert_trees_close(y, nnx.clone(m)(X))


def test_filter_grad_and_value_and_grad_accumulate_tied_gradients():
  m = MLP(nnx.Rngs(0), counting=False)
  g = eqx.filter_grad(loss)(m, X)
  v, g2 = eqx.filter_value_and_grad(loss)(m, X)
  ref_v, ref_g = nnx.value_and_grad(loss)(m, X)
  assert_trees_close(v, ref_v)
  assert type(g) is MLP and g.l2.kernel is g.l3.kernel  # one gradient for the tied kernel
  assert_trees_close(g.l2.kernel.value, ref_g["l2"]["kernel"].value)
  assert_trees_equal(g, g2)


def test_optax_on_filtered_module():
  m = MLP(nnx.Rngs(1), counting=False)
  opt = optax.sgd(0.1)
  params = eqx.filter(m, eqx.is_inexact_array)
  state = opt.init(params)
  counter = TraceCounter()

  @eqx.filter_jit
  @counter
  def step(m, state):
    g = eqx.filter_grad(loss)(m, X)
    updates, state = opt.update(g, state, eqx.filter(m, eqx.is_inexact_array))
    return eqx.apply_updates(m, updates), state

  before = float(loss(nnx.clone(m), X))
  for _ in range(3):
    m, state = step(m, state)
  assert float(loss(nnx.clone(m), X)) < before and counter.count == 1
  assert m.l2.kernel is m.l3.kernel


def test_filter_vmap_and_checkpoint():
  m = MLP(nnx.Rngs(0), counting=False)
  xs = jnp.stack([X, 2 * X])
  ys = eqx.filter_vmap(lambda m, x: m(x), in_axes=(None, 0))(m, xs)
  assert_trees_close(ys[1], nnx.clone(m)(2 * X))
  yc = eqx.filter_checkpoint(lambda m, x: m(x))(m, X)
  assert_trees_close(yc, nnx.clone(m)(X))
  gc = eqx.filter_grad(eqx.filter_checkpoint(loss))(m, X)
  assert_trees_close(gc, eqx.filter_grad(loss)(m, X))


def test_partition_combine_tree_at():
  m = MLP(nnx.Rngs(0))
  params, static = eqx.partition(m, eqx.is_inexact_array)
  assert params.count.value is None and static.l1.kernel.value is None
  back = eqx.combine(params, static)
  assert_trees_equal(back, m)
  assert sharing_classes(back) == sharing_classes(m)
  # tree_at selects Variable values (`.value`): the Variables are not pytree nodes.
  new = eqx.tree_at(lambda m: m.l2.kernel.value, m, jnp.zeros((4, 4)))
  assert float(jnp.abs(new.l3.kernel.value).sum()) == 0.0  # tied: both uses see it
  assert float(jnp.abs(m.l2.kernel.value).sum()) > 0.0  # the original is untouched


def test_tree_serialise_roundtrip():
  m = MLP(nnx.Rngs(0))
  m(X)
  buf = io.BytesIO()
  eqx.tree_serialise_leaves(buf, m)
  buf.seek(0)
  like = MLP(nnx.Rngs(5))
  restored = eqx.tree_deserialise_leaves(buf, like)
  assert_trees_equal(restored, m)
  assert int(restored.count.value) == 1

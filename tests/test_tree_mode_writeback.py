"""Tree-mode write-back: a lifted transform given States (or other pytrees) of
Variables writes what the function changed back to those Variables (as flax.nnx
0.12), in every mode, and leaves them untouched when the function raises."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal, graphs


class Counter(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.ones(3))
    self.count = nnx.BatchStat(jnp.array(0))

  def __call__(self, x):
    self.count.value += 1
    return (self.w * x).sum()


@pytest.mark.parametrize("graph", [True, False])
def test_jit_writes_back_to_state_variables(graph):
  m = Counter()
  graphdef, state = nnx.split(m)
  traces = 0

  @nnx.jit(graph=graph, graph_updates=False)
  def f(state, x):
    nonlocal traces
    traces += 1
    return nnx.merge(graphdef, state)(x)

  f(state, jnp.ones(3))
  f(state, jnp.ones(3))
  assert int(m.count[...]) == 2  # split keeps the Variables: the module sees it
  assert int(state["count"][...]) == 2
  assert traces == 1


@pytest.mark.parametrize("graph", [True, False])
def test_value_and_grad_writes_back_and_returns_state_grads(graph):
  m = Counter()
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  traces = 0

  @nnx.value_and_grad(graph=graph, graph_updates=False)
  def loss(params, rest):
    nonlocal traces
    traces += 1
    model = nnx.merge(graphdef, params, rest)
    out = model(jnp.full(3, 2.0))
    model.w.set_value(jnp.zeros(3))
    return out

  value, grads = loss(params, rest)
  assert_trees_equal(value, jnp.array(6.0))
  assert isinstance(grads, nnx.State)
  assert_trees_equal(grads["w"][...], jnp.full(3, 2.0))
  assert_trees_equal(m.w[...], jnp.zeros(3))
  assert int(m.count[...]) == 1
  assert traces == 1


def test_vmap_tree_mode_writes_back_mapped_state():
  v = nnx.Param(jnp.zeros(4))
  state = nnx.State({"v": v})
  traces = 0

  @nnx.vmap(in_axes=0, graph=False)
  def add(state):
    nonlocal traces
    traces += 1
    state["v"].value += 1.0

  add(state)
  add(state)
  assert_trees_equal(v[...], jnp.full(4, 2.0))
  assert traces == 1


def test_pytree_of_variables_in_a_namedtuple():
  from typing import NamedTuple

  class Vars(NamedTuple):
    a: nnx.Variable
    b: jax.Array

  a = nnx.Variable(jnp.array(1.0))

  @nnx.jit(graph=False)
  def f(vs):
    vs.a.value = vs.a.value + vs.b

  f(Vars(a, jnp.array(2.0)))
  assert_trees_equal(a[...], jnp.array(3.0))


@pytest.mark.parametrize("graph", [True, False])
def test_exception_leaves_state_variables_unchanged(graph):
  m = Counter()
  graphdef, state = nnx.split(m)

  @nnx.jit(graph=graph, graph_updates=False)
  def f(state):
    model = nnx.merge(graphdef, state)
    model(jnp.ones(3))
    model.w.set_value(jnp.zeros(3))
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    f(state)
  assert int(m.count[...]) == 0
  assert_trees_equal(m.w[...], jnp.ones(3))


def test_custom_vjp_functional_state_arguments_write_back():
  m = Counter()
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)

  @nnx.custom_vjp(graph_updates=False)
  def f(params, rest):
    model = nnx.merge(graphdef, params, rest)
    return model(jnp.ones(3))

  def f_fwd(params, rest):
    return f(params, rest), None

  def f_bwd(res, g):
    p_g = jax.tree.map(lambda x: jnp.full_like(x, 7.0) * g, params)
    r_g = jax.tree.map(jnp.zeros_like, rest)
    return p_g, r_g

  f.defvjp(f_fwd, f_bwd)
  grads = nnx.grad(lambda p, r: f(p, r), graph_updates=False)(params, rest)
  assert_trees_equal(grads["w"][...], jnp.full(3, 7.0))
  assert int(m.count[...]) == 1  # the forward pass counted once, written back


def test_state_of_specs_resolves_by_path_inside_the_argument():
  mesh = jax.sharding.Mesh(jax.devices()[:1], ("a",))
  P = jax.sharding.PartitionSpec
  graphdef, state = nnx.split(nnx.Linear(2, 4, rngs=nnx.Rngs(0)))
  specs = nnx.State({"kernel": P(None, "a"), "bias": P()})

  @nnx.shard_map(mesh=mesh, in_specs=(specs,), out_specs=P(None, "a"), graph=False)
  def f(state):
    return nnx.merge(graphdef, state)(jnp.ones((1, 2)))

  assert f(state).shape == (1, 4)


@settings(deadline=None, max_examples=25)
@given(graphs(sharing=False, cycles=False, raw_arrays=False, dtypes=("float32", "int32")))
def test_write_back_law_every_variable_of_a_state_argument_gets_its_new_value(m):
  _, state = nnx.split(m)
  before = {p: v[...] for p, v in nnx.to_flat_state(state)}

  @nnx.jit(graph=False)
  def bump(state):
    for _, v in nnx.to_flat_state(state):
      v[...] = v[...] + 1

  bump(state)
  after = {p: v[...] for p, v in nnx.to_flat_state(nnx.state(m))}
  assert after.keys() == before.keys()
  for p in before:
    assert_trees_equal(after[p], before[p] + 1)

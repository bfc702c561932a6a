"""Namedtuples inside a graph are keyed by field name (JAX's key path), as in flax.nnx:
optax states are reachable as ``state['opt_state'][0]['mu']``."""

import collections

import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal

Point = collections.namedtuple("Point", ["y", "x"])


@pytest.mark.parametrize("graph", [True, False])
def test_flatten_paths_are_field_names_and_round_trip(graph):
  p = Point(y=nnx.Param(jnp.array(1.0)), x=jnp.array(2.0))
  graphdef, flat = nnx.graphlib.flatten(p, graph=graph)
  assert [path for path, _ in flat] == [("x",), ("y",)]
  p2 = nnx.graphlib.unflatten(graphdef, flat)
  assert type(p2) is Point
  assert_trees_equal((p2.y[...], p2.x), (jnp.array(1.0), jnp.array(2.0)))


def test_raw_array_in_namedtuple_is_updated_through_jit():
  m = nnx.Module()
  m.p = Point(y=jnp.zeros(()), x=jnp.zeros(()))
  traces = []

  @nnx.jit
  def step(m):
    traces.append(1)
    m.p = m.p._replace(x=m.p.x + 1)

  step(m)
  step(m)
  assert type(m.p) is Point and len(traces) == 1
  assert_trees_equal((m.p.x, m.p.y), (jnp.array(2.0), jnp.array(0.0)))
  assert list(nnx.state(m)["p"]) == ["x", "y"]


def test_optimizer_state_paths_name_the_optax_fields():
  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0), use_bias=False)
  opt = nnx.Optimizer(model, optax.adam(0.1), wrt=nnx.Param)
  state = nnx.state(opt)
  assert set(state["opt_state"][0]) == {"count", "mu", "nu"}
  assert state["opt_state"][0]["mu"]["kernel"][...].shape == (2, 3)
  opt2 = nnx.merge(nnx.graphdef(opt), state)
  assert type(opt2.opt_state[0]) is type(opt.opt_state[0])
  grads = jax.tree.map(jnp.ones_like, nnx.state(model, nnx.Param))
  opt.update(model, grads)
  assert_trees_equal(opt.opt_state[0].count[...], jnp.array(1, dtype=jnp.int32))


def test_error_inside_jit_leaves_the_namedtuple_unchanged():
  m = nnx.Module()
  m.p = Point(y=jnp.zeros(()), x=jnp.zeros(()))
  before = m.p

  @nnx.jit
  def broken(m):
    m.p = m.p._replace(x=m.p.x + 1)
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    broken(m)
  assert m.p is before

"""nnx.pmap: the same results as nnx.vmap (whose axis handling it shares), run
over devices; updates written back; no retrace; atomic on error."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close

N = min(2, jax.device_count())  # conftest fakes 8 CPU devices; one GPU maps over 1


class Counter(nnx.Module):
  def __init__(self, rngs):
    self.w = nnx.Param(jax.random.normal(rngs.params(), (2, 3)))
    self.count = nnx.BatchStat(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    return x @ self.w


def make_stack(transform):
  @nnx.split_rngs(splits=N)
  @transform(axis_size=N)
  def make(rngs):
    return Counter(rngs)

  return make(nnx.Rngs(0))


def test_pmap_builds_the_same_stack_as_vmap():
  p, v = make_stack(nnx.pmap), make_stack(nnx.vmap)
  assert p.w.value.shape == (N, 2, 3)
  assert_trees_close(nnx.state(p), nnx.state(v))


def test_pmap_forward_updates_and_no_retrace():
  m = make_stack(nnx.pmap)
  counter = TraceCounter()
  f = nnx.pmap(counter(lambda m, x: m(x)), in_axes=(0, None))
  x = jnp.ones((4, 2))
  y = f(m, x)
  assert_trees_close(y, jnp.einsum("bi,nio->nbo", x, m.w.value))
  assert m.count.value.tolist() == [1] * N
  traces = counter.count
  with assert_no_retrace(counter):
    f(m, x)
  assert traces >= 1 and m.count.value.tolist() == [2] * N


def test_pmap_broadcast_state_and_collectives():
  m = Counter(nnx.Rngs(0))
  axes = nnx.StateAxes({nnx.Param: None, ...: None})

  @nnx.pmap(in_axes=(axes, 0), axis_name="i")
  def f(m, x):
    return jax.lax.psum(x @ m.w, "i")

  y = f(m, jnp.ones((N, 1, 2)))
  assert_trees_close(y[0], N * (jnp.ones((1, 2)) @ m.w.value))


def test_pmap_exception_leaves_module_unchanged():
  m = make_stack(nnx.pmap)
  before = nnx.state(m)

  @nnx.pmap(in_axes=(0, None))
  def f(m, x):
    m(x)
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    f(m, jnp.ones((1, 2)))
  assert_trees_close(nnx.state(m), before)
  assert m.count.value.tolist() == [0] * N

"""nnx.vjp and nnx.jvp: the same numbers as jax.vjp/jax.jvp over the split
state, Module-shaped (co)tangents, state updates written back, atomic on error."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_trees_close


class Scale(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.array([1.0, 2.0, 3.0]))
    self.count = nnx.BatchStat(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    return jnp.sum(self.w * x)


X = jnp.array([4.0, 5.0, 6.0])


def tangent_of(m):
  """Ones for the float leaves, float0 zeros for the integer counter."""
  dm = jax.tree.map(jnp.ones_like, m)
  dm.count.value = jnp.zeros((), jax.dtypes.float0)
  return dm


def test_vjp_matches_jax_and_returns_module_cotangent():
  m = Scale()
  out, vjp_fn = nnx.vjp(lambda m, x: m(x), m, X)
  ref_out, ref_vjp = jax.vjp(lambda w, x: jnp.sum(w * x), m.w.value, X)
  assert_trees_close(out, ref_out)
  m_ct, x_ct = vjp_fn(jnp.ones(()))
  w_ct, ref_x_ct = ref_vjp(jnp.ones(()))
  assert type(m_ct) is Scale and m_ct is not m
  assert_trees_close(m_ct.w.value, w_ct)
  assert_trees_close(x_ct, ref_x_ct)
  assert m_ct.count.value.dtype == jax.dtypes.float0
  assert int(m.count.value) == 1  # the update is written back at once


def test_vjp_has_aux_and_decorator():
  @nnx.vjp(has_aux=True)
  def f(m, x):
    return m(x), {"x": x}

  m = Scale()
  out, vjp_fn, aux = f(m, X)
  assert float(out) == 32.0
  assert_trees_close(aux["x"], X)
  (m_ct, _) = vjp_fn(jnp.array(2.0))
  assert_trees_close(m_ct.w.value, 2 * X)


def test_vjp_traces_once_per_call():
  counter = TraceCounter()
  m = Scale()
  _, vjp_fn = nnx.vjp(counter(lambda m, x: m(x)), m, X)
  vjp_fn(jnp.ones(()))
  vjp_fn(jnp.ones(()))
  assert counter.count == 1


def test_jvp_matches_jax_and_updates_state():
  m = Scale()
  dm = tangent_of(m)
  out, t_out = nnx.jvp(lambda m, x: m(x), (m, X), (dm, jnp.ones(3)))
  ref_out, ref_t = jax.jvp(lambda w, x: jnp.sum(w * x), (m.w.value, X), (jnp.ones(3), jnp.ones(3)))
  assert_trees_close((out, t_out), (ref_out, ref_t))
  assert int(m.count.value) == 1


def test_jvp_decorator_with_aux():
  @nnx.jvp(has_aux=True)
  def f(w, x):
    return jnp.sum(w * x), x + 1

  out, t_out, aux = f((X, X), (jnp.ones(3), jnp.zeros(3)))
  assert float(out) == float(jnp.sum(X * X)) and float(t_out) == float(X.sum())
  assert_trees_close(aux, X + 1)


def test_jvp_tangent_structure_mismatch_raises():
  m = Scale()
  with pytest.raises(nnx.TangentStructureError, match="graph structure"):
    nnx.jvp(lambda m: m(X), (m,), (nnx.Linear(2, 2, rngs=nnx.Rngs(0)),))


@pytest.mark.parametrize("transform", ["vjp", "jvp"])
def test_exception_leaves_module_unchanged(transform):
  m = Scale()

  def f(m, x):
    m.count += 5
    m.w.value = m.w.value * 0
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    if transform == "vjp":
      nnx.vjp(f, m, X)
    else:
      nnx.jvp(f, (m, X), (tangent_of(m), X))
  assert int(m.count.value) == 0
  assert m.w.value.tolist() == [1.0, 2.0, 3.0]

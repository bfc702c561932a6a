"""nnx.custom_vjp: bwd's tangents reach nnx.grad (both conventions), nondiff
and DiffState arguments, state updates written back, trace counts, atomicity."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close


class Foo(nnx.Module):
  def __init__(self):
    self.x = nnx.Param(jnp.array(1.0))
    self.y = nnx.Param(jnp.array(2.0))
    self.calls = nnx.BatchStat(jnp.array(0))


def body(m):
  m.calls += 1
  return jnp.sin(m.x.value) * m.y.value


def scaled_bwd_graph(cos_sin_m, g):
  """Returns 10x the true gradient, so a test sees that bwd was used."""
  cos_x, sin_x, m = cos_sin_m
  (m_g,), out_g = g
  assert isinstance(m_g, nnx.State)
  m_g["x"].value = 10 * cos_x * out_g * m.y.value
  m_g["y"].value = 10 * sin_x * out_g
  return (m_g,)


def fwd(m):
  return f_graph(m), (jnp.cos(m.x.value), jnp.sin(m.x.value), m)


f_graph = nnx.custom_vjp(body)
f_graph.defvjp(fwd, scaled_bwd_graph)


def test_graph_updates_convention_uses_bwd_and_writes_updates():
  m = Foo()
  grads = nnx.grad(f_graph)(m)
  assert_trees_close(grads["x"].value, 10 * jnp.cos(1.0) * 2.0)
  assert_trees_close(grads["y"].value, 10 * jnp.sin(1.0))
  assert int(m.calls.value) == 1
  assert_trees_close(f_graph(m), jnp.sin(1.0) * 2.0)  # the primal alone
  assert int(m.calls.value) == 2


def test_module_tangent_convention():
  @nnx.custom_vjp(graph_updates=False)
  def f(m):
    return body(m)

  def f_fwd(m):
    return f(m), (jnp.cos(m.x.value), m)

  def f_bwd(res, g):
    cos_x, m = res
    m_g = jax.tree.map(jnp.zeros_like, m)
    m_g.x.value = 3 * cos_x * g * m.y.value
    return (m_g,)

  f.defvjp(f_fwd, f_bwd)
  m = Foo()
  grads = nnx.grad(f)(m)
  assert_trees_close(grads["x"].value, 3 * jnp.cos(1.0) * 2.0)
  assert_trees_close(grads["y"].value, jnp.zeros(()))


def test_nondiff_argnums_and_array_arguments():
  @nnx.custom_vjp(nondiff_argnums=(0,), graph_updates=False)
  def f(scale, m, x):
    return scale * m.x.value * x

  def f_fwd(scale, m, x):
    return f(scale, m, x), (m.x.value, x)

  def f_bwd(scale, res, g):
    mx, x = res
    m_g = jax.tree.map(jnp.zeros_like, Foo())
    m_g.x.value = scale * g * x
    return m_g, scale * g * mx * 100  # x's tangent scaled to show it is used

  f.defvjp(f_fwd, f_bwd)
  m = Foo()
  gm, gx = nnx.grad(f, argnums=(1, 2))(2.0, m, jnp.array(3.0))
  assert_trees_close(gm["x"].value, jnp.array(6.0))
  assert_trees_close(gx, jnp.array(200.0))


def test_diff_state_limits_the_tangent():
  x_only = nnx.DiffState(0, nnx.PathContains("x"))

  @nnx.custom_vjp(nondiff_argnums=(x_only,))
  def f(m):
    return body(m)

  def f_fwd(m):
    return f(m), (jnp.cos(m.x.value), m)

  def f_bwd(res, g):
    cos_x, m = res
    (m_g,), out_g = g
    assert sorted(m_g) == ["calls", "x", "y"]  # the whole state, as flax; only x is used
    m_g["x"].value = cos_x * out_g * m.y.value
    return (m_g,)

  f.defvjp(f_fwd, f_bwd)
  g = nnx.grad(f, argnums=x_only)(Foo())
  assert sorted(g) == ["x"]
  assert_trees_close(g["x"].value, jnp.cos(1.0) * 2.0)


def test_jit_of_grad_does_not_retrace():
  counter = TraceCounter()
  f = nnx.custom_vjp(counter(body))
  f.defvjp(fwd, scaled_bwd_graph)
  step = nnx.jit(nnx.grad(f))
  m = Foo()
  step(m)
  with assert_no_retrace(counter):
    step(m)
  assert int(m.calls.value) == 2


def test_errors_and_atomicity():
  f = nnx.custom_vjp(body)
  with pytest.raises(nnx.CustomVjpError, match="defvjp"):
    f(Foo())

  def bad_fwd(m):
    m.calls += 1
    raise RuntimeError("boom")

  g = nnx.custom_vjp(body)
  g.defvjp(bad_fwd, scaled_bwd_graph)
  m = Foo()
  with pytest.raises(RuntimeError, match="boom"):
    nnx.grad(g)(m)
  assert int(m.calls.value) == 0
  with pytest.raises(nnx.CustomVjpError, match="cannot contain `DiffState` objects"):
    nnx.custom_vjp(body, nondiff_argnums=(nnx.DiffState(0, ...),), graph_updates=False)


def test_functional_convention_passes_updates_g_and_drops_structure_changes():
  seen = {}

  @nnx.custom_vjp(graph_updates=False)
  def f(m):
    m.calls += 1  # a Variable update: written back
    m.note = "set inside"  # a structural change: dropped without graph updates
    return jnp.sin(m.x.value) * m.y.value

  def f_fwd(m):
    return f(m), (jnp.cos(m.x.value), m)

  def f_bwd(res, g, updates_g):
    (m_up,) = updates_g
    seen["updated"] = m_up.calls
    seen["not_updated"] = (m_up.x, m_up.y)
    cos_x, m = res
    m_g = nnx.clone(m)
    m_g.x.value = cos_x * g * m.y.value
    m_g.y.value = jnp.zeros(())
    return (m_g,)

  f.defvjp(f_fwd, f_bwd)
  m = Foo()
  g = nnx.grad(f, graph_updates=False)(m)
  assert type(g) is Foo
  assert_trees_close(g.x.value, jnp.cos(1.0) * 2.0)
  assert isinstance(seen["updated"], nnx.BatchStat) and seen["not_updated"] == (None, None)
  assert int(m.calls.value) == 1 and not hasattr(m, "note")


def test_functional_convention_module_outputs_and_state_arguments():
  @nnx.custom_vjp(nondiff_argnums=(1,), graph_updates=False)
  def f(params, rest, m2):
    return params["x"].value * rest["y"].value, nnx.clone(m2)

  def f_fwd(params, rest, m2):
    return f(params, rest, m2), (rest["y"].value,)

  def f_bwd(rest, res, g):
    (y,) = res
    out_g, m2_g = g
    assert isinstance(m2_g, Foo)  # a Module output's cotangent is a Module
    p_g = nnx.clone(params)
    p_g["x"].value = 5 * y * out_g
    return p_g, m2_g

  f.defvjp(f_fwd, f_bwd)
  graphdef, params, rest = nnx.split(Foo(), nnx.PathContains("x"), ...)
  m2 = Foo()

  def loss(params, m2):
    out, m2_out = f(params, rest, m2)
    return out + m2_out.x.value * m2_out.y.value

  gp, gm2 = nnx.grad(loss, argnums=(0, 1), graph_updates=False)(params, m2)
  assert isinstance(gp, nnx.State) and isinstance(gm2, Foo)
  assert_trees_close(gp["x"].value, jnp.array(10.0))  # 5 * y * 1
  assert_trees_close(gm2.x.value, jnp.array(2.0))  # d(x * y)/dx through the Module output

"""Graph updates through lifted transforms: Variables and Modules swapped or
replaced inside keep their identity outside (graph_updates=True), are dropped
(graph_updates=False), or are refused where they cannot be carried (loops)."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


class Pair(nnx.Module):
  def __init__(self):
    self.a = nnx.Param(jnp.array(1.0))
    self.b = nnx.Param(jnp.array(2.0))


class Two(nnx.Module):
  def __init__(self):
    self.a = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    self.b = nnx.Linear(2, 2, rngs=nnx.Rngs(1))


def test_jit_swapping_variables_keeps_their_identity_without_retrace():
  counter = TraceCounter()

  @nnx.jit
  @counter
  def swap(m):
    m.a, m.b = m.b, m.a

  m = Pair()
  a, b = m.a, m.b
  swap(m)
  assert m.a is b and m.b is a
  assert float(m.a[...]) == 2.0
  with assert_no_retrace(counter):
    swap(m)
  assert m.a is a and m.b is b
  assert counter.count == 1


def test_jit_swapping_modules_in_a_pytree_argument():
  counter = TraceCounter()

  @nnx.jit
  @counter
  def swap(tree):
    m = tree[0]["m"]
    m.a, m.b = m.b, m.a

  m = Two()
  a, b = m.a, m.b
  swap(({"m": m},))
  assert m.a is b and m.b is a
  with assert_no_retrace(counter):
    swap(({"m": m},))
  assert m.a is a and m.b is b


def test_jit_without_graph_updates_drops_the_swap_but_keeps_values():
  @nnx.jit(graph_updates=False)
  def swap(m):
    m.a, m.b = m.b, m.a
    m.a[...] += 10.0

  m = Pair()
  a, b = m.a, m.b
  swap(m)
  assert m.a is a and m.b is b
  # the swapped-in object was b: its new value reaches b outside
  assert_trees_equal((m.a[...], m.b[...]), (jnp.array(1.0), jnp.array(12.0)))


def test_jit_without_graph_updates_refuses_a_returned_input_and_leaves_it_unchanged():
  v = nnx.Param(jnp.array(1.0))

  @nnx.jit(graph=True, graph_updates=False)
  def f(v):
    v[...] += 1.0
    return v

  with pytest.raises(nnx.SharedReferenceError, match=r"Duplicate Param.*argument 0"):
    f(v)
  assert float(v[...]) == 1.0
  out = nnx.jit(lambda v: nnx.clone(v), graph_updates=False)(v)
  assert out is not v and float(out[...]) == 1.0


@pytest.mark.devices(2)
def test_jit_with_in_shardings_keeps_the_sharding_of_a_replaced_variable():
  mesh = jax.sharding.Mesh(jax.devices()[:2], ("a",))
  rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("a"))
  cols = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "a"))
  m = nnx.Linear(8, 8, rngs=nnx.Rngs(0))

  @nnx.jit(in_shardings=(nnx.StateSharding({nnx.PathContains("kernel"): rows, ...: None}),))
  def f(m):
    m.kernel = jax.lax.with_sharding_constraint(m.kernel, cols)

  f(m)
  assert m.kernel.value.sharding.spec == jax.sharding.PartitionSpec("a")


@pytest.mark.parametrize("graph,graph_updates", [(True, True), (True, False), (False, False)])
def test_while_loop_replacing_a_variable_is_refused_and_caller_unchanged(graph, graph_updates):
  m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  kernel, before = m.kernel, m.kernel[...]

  def body(val):
    m, c = val
    m.kernel = nnx.Param(jnp.zeros_like(m.kernel))
    return m, c - 1.0

  with pytest.raises(ValueError, match="replaced a Variable"):
    nnx.while_loop(lambda v: v[-1] > 0, body, (m, 2.0), graph=graph, graph_updates=graph_updates)
  assert m.kernel is kernel
  assert_trees_equal(m.kernel[...], before)


@pytest.mark.parametrize("graph", [True, False])
def test_eval_shape_without_graph_updates_refuses_aliasing(graph):
  v = nnx.Param(jnp.array(1.0))
  with pytest.raises(ValueError, match="Duplicate Param"):
    nnx.eval_shape(lambda v: v, v, graph=graph, graph_updates=False)

  def bump(v1, v2):
    v1[...] += 1

  with pytest.raises(ValueError, match="Duplicate Param"):
    nnx.eval_shape(bump, v, v, graph=graph, graph_updates=False)
  assert float(v[...]) == 1.0
  out = nnx.eval_shape(lambda v: v[...] * 2, v, graph=graph, graph_updates=False)
  assert out.shape == () and float(v[...]) == 1.0


@pytest.mark.parametrize("graph", [True, False])
def test_vmap_without_graph_updates_refuses_returning_an_input(graph):
  class Foo(nnx.Module):
    def __init__(self):
      self.a = nnx.Param(jnp.zeros((2, 3)))

  m = Foo()
  f = nnx.vmap(lambda m: m, in_axes=0, out_axes=1, graph=graph, graph_updates=False)
  with pytest.raises(ValueError, match=r"Duplicate Param.*argument 0 at a"):
    f(m)
  assert m.a.shape == (2, 3)
  g = nnx.vmap(lambda m: m.a[...] * 2, in_axes=0, graph=graph, graph_updates=False)
  assert g(m).shape == (2, 3)


def test_vmap_broadcast_update_error_names_the_state_and_the_batched_axis():
  class Env(nnx.Module):
    def __init__(self):
      self.count = nnx.BatchStat(jnp.array(0))
      self.index = nnx.Param(jnp.arange(4))

  env = Env()

  @nnx.vmap(in_axes=(nnx.StateAxes({nnx.BatchStat: None, ...: 0}),))
  def f(env):
    env.count[...] += env.index[...]

  with pytest.raises(
    nnx.BroadcastUpdateError,
    match=r"state count has out axis None.*at vmap 'count': got axis spec None but output"
    r" was batched on axis 0",
  ):
    f(env)
  assert int(env.count[...]) == 0


def test_custom_vjp_without_graph_updates_refuses_a_variable_passed_twice():
  v = nnx.Param(jnp.array(1.0))

  @nnx.custom_vjp(nondiff_argnums=(1,), graph_updates=False)
  def f(a, b):
    return a[...] + b[...]

  f.defvjp(lambda a, b: (f(a, b), ()), lambda b, res, g: (nnx.clone(b),))
  with pytest.raises(ValueError, match=r"Duplicate Param.*argument 0.*argument 1"):
    f(v, v)
  assert float(f(v, nnx.Param(jnp.array(2.0)))) == 3.0


def test_custom_vjp_returning_an_input_module_gets_its_state_cotangent():
  class Foo(nnx.Module):
    def __init__(self, x, y):
      self.x, self.y = nnx.Param(jnp.array(x)), nnx.Param(jnp.array(y))

  @nnx.custom_vjp
  def f(m1, m2):
    return jnp.sin(m1.x[...]) * m1.y[...], m2

  def f_fwd(m1, m2):
    return f(m1, m2), (jnp.cos(m1.x[...]), m1)

  def f_bwd(res, g):
    (m1_g, m2_g), (y_g, _) = g
    cos_x, m = res
    return nnx.State({"x": cos_x * y_g * m.y[...], "y": jnp.zeros(())}), m2_g

  f.defvjp(f_fwd, f_bwd)

  def loss(m1, m2):
    y, m2 = f(m1, m2)
    return y + m2.x[...] * m2.y[...]

  g1, g2 = nnx.grad(loss, argnums=(0, 1))(Foo(1.0, 2.0), Foo(3.0, 4.0))
  assert_trees_equal((g2["x"][...], g2["y"][...]), (jnp.array(4.0), jnp.array(3.0)))

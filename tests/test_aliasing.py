"""Shared Variables that two paths give different prefixes, and tree-mode duplicates.

A Variable reached by two paths (passed twice, or inside a Module shared by
two arguments) must get one prefix (axis, sharding, differentiation): else
the lifted transform raises ``InconsistentAliasingError`` listing every path
with its prefix. In tree mode (``graph=False``) the same object may not be
passed twice at all: ``SharedReferenceError`` names the duplicated Variable.
"""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Holder(nnx.Module):
  def __init__(self, inner):
    self.inner = inner


def _param(shape=(3, 3)):
  return nnx.Param(jnp.zeros(shape))


def test_vmap_same_variable_two_axes_lists_both_paths():
  shared = nnx.Linear(3, 3, rngs=nnx.Rngs(0))
  f = nnx.vmap(lambda a, b: None, in_axes=(0, 1))
  msg = r"(?s)Inconsistent aliasing.*argument 0, state inner/bias: 0.*argument 1, state inner/bias"
  with pytest.raises(nnx.InconsistentAliasingError, match=msg):
    f(Holder(shared), Holder(shared))


def test_vmap_same_axes_for_a_shared_variable_is_fine_and_traces_once():
  shared = _param()
  traces = []

  @nnx.vmap(in_axes=(0, 0))
  def f(a, b):
    traces.append(1)
    return a.inner[...] + b.inner[...]

  a, b = Holder(shared), Holder(shared)
  assert f(a, b).shape == (3, 3)
  f(a, b)
  assert len(traces) == 1


def test_vmap_returning_an_input_on_another_axis_is_an_error_and_changes_nothing():
  m = Holder(_param((2, 3)))
  before = m.inner[...]
  with pytest.raises(nnx.InconsistentAliasingError, match="output node 0, state inner: 1"):
    nnx.vmap(lambda m: m, in_axes=0, out_axes=1)(m)
  assert m.inner[...] is before


def test_scan_carry_and_scanned_alias():
  v = nnx.Param(jnp.zeros(4))
  f = nnx.scan(lambda c, x: (c, x[...]), in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  with pytest.raises(nnx.InconsistentAliasingError, match="Carry"):
    f(v, v)


def test_jit_in_shardings_alias():
  v = nnx.Param(jnp.array(1.0))
  P = jax.sharding.PartitionSpec
  mesh = jax.sharding.Mesh(jax.devices()[:2], ("x",))
  f = nnx.jit(lambda a, b: a[...] + b[...], in_shardings=(P(), P("x")))
  with jax.set_mesh(mesh), pytest.raises(nnx.InconsistentAliasingError, match="in_shardings"):
    f(v, v)


def test_functional_grad_alias_between_diff_and_nondiff_arguments():
  v = nnx.Param(jnp.array(1.0))
  g = nnx.grad(lambda a, b: a[...] + b[...], argnums=0, graph_updates=False)
  with pytest.raises(nnx.InconsistentAliasingError, match="not differentiated"):
    g(v, v)


@pytest.mark.parametrize("transform", [nnx.jit, nnx.vmap, nnx.remat])
def test_tree_mode_transform_rejects_duplicates_naming_the_variable(transform):
  shared = Holder(_param())
  f = transform(lambda a, b: None, graph=False)
  with pytest.raises(nnx.SharedReferenceError, match=r"Duplicate Param.* 0/inner and 1/inner"):
    f(shared, shared)


def test_tree_mode_jit_partial_rejects_duplicates_when_built():
  v = _param()
  with pytest.raises(nnx.SharedReferenceError, match="Duplicate Param"):
    nnx.jit_partial(lambda a, b: None, v, v, graph=False)


def test_tree_mode_decorator_and_method_keep_working():
  class M(nnx.Module):
    def __init__(self):
      self.w = _param((2,))

    @nnx.jit(graph=False)
    def double(self):
      return self.w[...] * 2

  m = M()
  assert m.double().shape == (2,)
  f = nnx.jit(lambda a: a[...] + 1, graph=False)
  assert f.lower(m.w).compile() is not None


def test_returning_a_module_captured_by_closure_is_refused():
  outer = Holder(_param((4,)))
  f = nnx.vmap(lambda x: outer, in_axes=0, out_axes=0)
  with pytest.raises(nnx.CapturedNodeError, match="captured by closure"):
    f(jnp.zeros((4,)))
  made_inside = nnx.vmap(lambda x: Holder(nnx.Param(x)), in_axes=0, out_axes=0)(jnp.ones(3))
  assert made_inside.inner.shape == (3,)


def test_tree_mode_returning_an_input_is_refused_and_values_are_restored():
  v = nnx.Param(jnp.array(1.0))

  @nnx.jit(graph=False)
  def f(v):
    v[...] += 1.0
    return v

  with pytest.raises(nnx.SharedReferenceError, match="does not support Variable aliasing"):
    f(v)
  assert float(v[...]) == 1.0
  g = nnx.jit(lambda v: nnx.clone(v), graph=False)
  assert g(v) is not v

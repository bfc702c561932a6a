"""An attribute that held data stays data when a non-data value replaces it (flax.nnx's pytree
guide: "the status of an attribute is defined during its first assignment")."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Foo(nnx.Pytree):
  def __init__(self):
    self.a = jnp.array(1.0)  # data
    self.b = "Hello, world!"  # static
    self.c = nnx.data(3.14)  # data


def test_reassigned_data_attribute_stays_data():
  foo = Foo()
  foo.a = "changed"  # still data
  foo.b = nnx.data(42)  # explicit: becomes data
  foo.c = nnx.static(0.5)  # explicit: becomes static
  assert jax.tree.leaves(foo) == ["changed", 42]


def test_variable_replaced_by_python_number_is_a_leaf_under_jit():
  class Model(nnx.Module):
    def __init__(self):
      self.scale = nnx.Param(jnp.ones(()))

  model = Model()
  model.scale = 2.0
  traces = []

  @nnx.jit
  def f(m, x):
    traces.append(1)
    return m.scale * x

  assert float(f(model, 3.0)) == 6.0
  model.scale = 5.0  # same structure: no retrace
  assert float(f(model, 3.0)) == 15.0
  assert len(traces) == 1


def test_attribute_that_held_a_module_keeps_its_kind_through_none():
  class Model(nnx.Module):
    def __init__(self):
      self.lin = nnx.Linear(1, 1, rngs=nnx.Rngs(0))

  model = Model()
  model.lin = None
  assert jax.tree.leaves(model) == []
  model.lin = nnx.Linear(1, 1, rngs=nnx.Rngs(1))
  assert len(jax.tree.leaves(model)) == 2


def test_static_attribute_still_takes_data_and_delattr_forgets_the_kind():
  class Model(nnx.Module):
    def __init__(self):
      self.k = 3

  model = Model()
  model.k = jnp.ones(2)  # nnx_eqx accepts this (flax.nnx raises); the attribute is data now
  assert len(jax.tree.leaves(model)) == 1
  del model.k
  model.k = "name"
  assert jax.tree.leaves(model) == []


def test_sticky_data_after_error_in_jit_leaves_caller_unchanged():
  class Model(nnx.Module):
    def __init__(self):
      self.w = nnx.Param(jnp.ones(2))

  model = Model()

  @nnx.jit
  def bad(m):
    m.w = 7
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    bad(model)
  assert isinstance(model.w, nnx.Param)
  assert jax.tree.leaves(model)[0].shape == (2,)

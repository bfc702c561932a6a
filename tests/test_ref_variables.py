"""Ref-mode Variables and raw ``jax.Ref`` values through ``nnx.jit`` (flax.nnx 0.12):
Refs may come in and go out; the caller gets its own Refs back and new Refs for
those created inside."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


def test_raw_ref_in_and_out_of_nnx_jit():
  r = jax.new_ref(jnp.array(1.0))
  counter = TraceCounter()

  @nnx.jit
  @counter
  def f(r):
    r[...] += 1.0
    return jax.new_ref(jnp.array(10.0)), r

  new, same = f(r)
  assert same is r and isinstance(new, jax.Ref)
  assert_trees_equal((r[...], new[...]), (jnp.array(2.0), jnp.array(10.0)))
  with assert_no_retrace(counter):
    new2, same2 = f(r)
  assert same2 is r and new2 is not new and float(r[...]) == 3.0


def test_ref_mode_module_built_inside_comes_out_in_new_refs():
  m1 = nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)
  inside = []

  @nnx.jit
  def f(m):
    m.kernel[...] += 1.0
    out = nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)
    inside.append(out)
    return out

  k0 = m1.kernel[...]
  out = f(m1)
  assert out is not inside[0] and isinstance(out.kernel, nnx.Param) and out.kernel.ref
  assert isinstance(out.kernel.get_raw_value(), jax.Ref)
  assert_trees_equal(m1.kernel[...], k0 + 1.0)
  assert_trees_equal(out.kernel[...], nnx.Linear(1, 1, rngs=nnx.Rngs(0)).kernel[...])


def test_pytree_with_ref_data_returned_is_the_callers_object():
  @nnx.dataclass
  class Foo(nnx.Pytree):
    a: jax.Ref = nnx.data()

  foo = Foo(a=jax.new_ref(1))

  @nnx.jit
  def f(x):
    x.a[...] += 1
    return x

  out = f(foo)
  assert out is foo and isinstance(out.a, jax.Ref) and int(out.a[...]) == 2


def test_ref_outputs_through_lower_and_compile():
  r = jax.new_ref(jnp.array(1.0))
  f = nnx.jit(lambda r: (r, jax.new_ref(r[...] * 2)))
  f(r)  # traced once: the markers are known
  same, new = f.lower(r).compile()(r)
  assert same is r and float(new[...]) == 2.0


def test_caller_ref_unchanged_after_an_error_inside_nnx_jit():
  m = nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)
  before = m.kernel[...]

  @nnx.jit
  def bad(m):
    m.kernel[...] += 1.0
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    bad(m)
  assert_trees_equal(m.kernel[...], before)
  assert isinstance(m.kernel.get_raw_value(), jax.Ref)

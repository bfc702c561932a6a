"""nnx.scan: the one-argument carry, carry identity, and Modules created by the body."""

import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


class Counter(nnx.Module):
  def __init__(self):
    self.n = nnx.BatchStat(jnp.array(0))


def test_in_axes_carry_makes_the_one_argument_the_carry():
  traces = []

  @nnx.scan(in_axes=nnx.Carry, out_axes=nnx.Carry, length=3)
  def loop(c):
    traces.append(1)
    c.n[...] += 1
    return c

  c = Counter()
  assert loop(c) is c and int(c.n[...]) == 3
  loop(c)
  assert int(c.n[...]) == 6 and len(traces) == 1
  plain = nnx.scan(lambda x: x + 1, in_axes=nnx.Carry, out_axes=nnx.Carry, length=5)
  assert int(plain(jnp.array(0))) == 5


def test_in_axes_carry_with_two_arguments_is_refused():
  loop = nnx.scan(lambda c, x: c, in_axes=nnx.Carry, out_axes=nnx.Carry, length=2)
  with pytest.raises(ValueError, match="must take exactly one argument"):
    loop(Counter(), 0)


def test_a_new_carry_object_is_a_carry_identity_error_and_changes_nothing():
  c = Counter()

  @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  def loop(c, x):
    fresh = Counter()
    fresh.n[...] = c.n[...] + x
    return fresh, x

  with pytest.raises(nnx.CarryIdentityError, match="Carry references must be the same"):
    loop(c, jnp.arange(3))
  assert int(c.n[...]) == 0


@pytest.mark.parametrize("out_axes", [0, 1])
def test_modules_created_by_the_body_come_back_stacked(out_axes):
  @nnx.split_rngs(splits=4)
  @nnx.scan(in_axes=(0,), out_axes=out_axes, length=4)
  def make(rngs):
    return nnx.Linear(3, 2, rngs=rngs)

  stack = make(nnx.Rngs(0))
  shape = (4, 3, 2) if out_axes == 0 else (3, 4, 2)
  assert stack.kernel.shape == shape and isinstance(stack.kernel, nnx.Param)
  kernels = jnp.moveaxis(stack.kernel[...], out_axes, 0)
  assert not jnp.allclose(kernels[0], kernels[1])  # one key per step


def test_variables_created_by_the_body_and_arrays_together():
  @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  def f(total, x):
    return total + x, (nnx.Param(x * 2), x)

  total, (p, xs) = f(jnp.array(0.0), jnp.arange(3.0))
  assert isinstance(p, nnx.Param)
  assert_trees_close(p[...], jnp.arange(3.0) * 2)
  assert_trees_close(xs, jnp.arange(3.0))
  assert float(total) == 3.0


def test_returning_an_input_as_a_stacked_output_is_refused():
  v = nnx.Param(jnp.arange(5))
  with pytest.raises(nnx.AxisSpecError, match="does not support Variable aliasing"):
    nnx.scan(lambda v: v, in_axes=0, out_axes=0)(v)


def test_while_loop_with_one_module_passed_twice():
  m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))

  def body(val):
    count, a, b = val
    a.bias[...] += 1
    return count + 1, a, b

  count, a, b = nnx.while_loop(lambda v: v[0] < 2, body, (0, m, m))
  assert a is m and b is m and int(count) == 2
  assert_trees_close(m.bias[...], jnp.full((2,), 2.0))
  assert m(jnp.ones((1, 2))).shape == (1, 2)

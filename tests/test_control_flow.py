"""nnx.cond, nnx.switch, nnx.fori_loop, nnx.while_loop: state updates, constants
vs carries, errors (atomic), trace counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


class Counter(nnx.Module):
  def __init__(self):
    self.n = nnx.Variable(jnp.array(0))
    self.w = nnx.Param(jnp.ones(3))


def inc(c, k):
  c.n += k
  return c.w.value * k


def keep(c, k):
  return c.w.value


def test_cond_updates_from_the_branch_taken():
  c = Counter()
  y = nnx.cond(jnp.array(True), inc, keep, c, 5)
  assert_trees_equal(y, 5 * jnp.ones(3))
  nnx.cond(jnp.array(False), inc, keep, c, 5)
  assert int(c.n.value) == 5


def test_cond_only_changed_state_is_an_output_and_no_retrace():
  c = Counter()
  counter = TraceCounter()
  step = nnx.jit(lambda c, p: nnx.cond(p, counter(inc), counter(keep), c, 2))
  lowered = step.lower(c, jnp.array(True))
  assert len(jax.tree.leaves(lowered.out_info)) == 2  # y and n, not w
  step(c, jnp.array(True))
  n = counter.count
  with assert_no_retrace(counter):
    step(c, jnp.array(False))
  assert int(c.n.value) == 2 and n >= 2


def test_switch():
  c = Counter()
  branches = [keep, inc, lambda c, k: -c.w.value]
  assert_trees_equal(nnx.switch(jnp.array(2), branches, c, 3), -jnp.ones(3))
  nnx.switch(1, branches, c, 3)
  assert int(c.n.value) == 3


def test_fori_loop_carries_module_and_value():
  c = Counter()

  def body(i, val):
    c, total = val
    c.n += 1
    return c, total + i

  out_c, total = nnx.fori_loop(0, 4, body, (c, jnp.array(0)))
  assert out_c is c and int(c.n.value) == 4 and int(total) == 6
  nnx.fori_loop(jnp.array(0), jnp.array(3), body, (c, jnp.array(0)))  # dynamic bounds
  assert int(c.n.value) == 7


def test_while_loop_and_cond_fun_must_not_update():
  c = Counter()

  def body(c):
    c.n += 3
    return c

  assert nnx.while_loop(lambda c: c.n < 10, body, c) is c
  assert int(c.n.value) == 12

  def bad_cond(c):
    c.n += 1
    return c.n < 20

  with pytest.raises(nnx.LiftedStructureError, match="cond_fun changed Module state"):
    nnx.while_loop(bad_cond, body, c)
  assert int(c.n.value) == 12


def test_loop_carry_errors_are_named_and_atomic():
  c = Counter()
  before = nnx.state(c)

  def grow(i, val):
    c, x = val
    c.n += 1
    return c, jnp.concatenate([x, x])

  with pytest.raises(
    nnx.CarryMismatchError, match=r"init_val\[1\] enters a step with shape \(2,\).*\(4,\)"
  ):
    nnx.fori_loop(0, 3, grow, (c, jnp.ones(2)))

  def new_attr(i, c):
    c.extra = nnx.Variable(jnp.array(1))
    return c

  with pytest.raises(nnx.LiftedStructureError, match="changed the structure"):
    nnx.fori_loop(0, 3, new_attr, c)

  def other_module(i, c):
    return Counter()

  with pytest.raises(nnx.CarryMismatchError, match="not one of the Modules passed in"):
    nnx.fori_loop(0, 3, other_module, c)
  assert_trees_equal(nnx.state(c), before)
  assert not hasattr(c, "extra")


def test_rngs_in_a_loop_draw_new_keys_each_step():
  rngs = nnx.Rngs(0)

  def body(i, val):
    rngs, xs = val
    return rngs, xs.at[i].set(jax.random.uniform(rngs()))

  _, xs = nnx.fori_loop(0, 4, body, (rngs, jnp.zeros(4)))
  assert len(set(np.asarray(xs).tolist())) == 4 and int(rngs.default.count.value) == 4

"""Behaviours where flax.nnx 0.12 and the seed-era API disagree: flax's spelling
gets flax's result (GraphDef.apply order, nnx.iter_modules, broadcast Rngs in
nnx.scan, nnx.update with a new shape)."""

import pickle

import jax
import jax.numpy as jnp

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


class Counter(nnx.Module):
  def __init__(self):
    self.lin = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    self.count = nnx.BatchStat(jnp.array(0))

  def __call__(self, x):
    self.count.value += 1
    return self.lin(x)


def test_graphdef_apply_returns_graphdef_then_state_as_flax():
  m = Counter()
  graphdef, state = nnx.split(m)
  y, (gd, st) = graphdef.apply(state)(jnp.ones((1, 2)))
  assert type(gd) is nnx.GraphDef and isinstance(st, nnx.State)
  assert int(st["count"][...]) == 1 and int(m.count[...]) == 0  # inputs untouched
  assert_trees_equal(y, m.lin(jnp.ones((1, 2))))


def test_seed_moduledef_apply_keeps_the_seed_order_everywhere():
  state, moduledef = Counter().partition()
  y, (st, md) = moduledef.apply(state)(jnp.ones((1, 2)))
  assert isinstance(st, nnx.State) and isinstance(md, nnx.GraphDef)
  _, (st2, md2) = md.apply(st)(jnp.ones((1, 2)))  # the returned moduledef too
  assert int(st2["count"][...]) == 2 and md2 == moduledef
  # through jax.jit and pickle it stays a seed moduledef
  out = jax.jit(lambda s, x: moduledef.apply(s)(x))(state, jnp.ones((1, 2)))
  assert isinstance(out[1][0], nnx.State)
  again = pickle.loads(pickle.dumps(moduledef))
  assert isinstance(again.apply(state)(jnp.ones((1, 2)))[1][0], nnx.State)
  assert moduledef == moduledef.as_plain() and hash(moduledef) == hash(moduledef.as_plain())


def test_iter_modules_yields_modules_children_first_as_flax():
  class Foo(nnx.Module):
    def __init__(self, rngs):
      self.submodules = nnx.data(
        [{"a": nnx.Linear(1, 1, rngs=rngs)}, {"b": nnx.Linear(1, 1, rngs=rngs)}]
      )
      self.linear = nnx.Linear(1, 1, rngs=rngs)
      self.dropout = nnx.Dropout(0.5, rngs=rngs)
      self.rngs = rngs

  got = [(p, type(m).__name__) for p, m in nnx.iter_modules(Foo(nnx.Rngs(0)))]
  assert got == [
    (("dropout",), "Dropout"),
    (("linear",), "Linear"),
    (("submodules", 0, "a"), "Linear"),
    (("submodules", 1, "b"), "Linear"),
    ((), "Foo"),
  ]


def test_scan_broadcast_rngs_give_the_same_key_each_step():
  rngs = nnx.Rngs(params=jax.random.split(jax.random.key(0), 3), dropout=1)
  traces = 0

  @nnx.scan(in_axes=(nnx.Carry, nnx.StateAxes({"params": 0, ...: None})), length=3)
  def f(_, rngs):
    nonlocal traces
    traces += 1
    return (), (jax.random.key_data(rngs.params()), jax.random.key_data(rngs.dropout()))

  _, (params_keys, dropout_keys) = f((), rngs)
  assert_trees_equal(dropout_keys[0], dropout_keys[1])
  assert_trees_equal(dropout_keys[1], dropout_keys[2])
  assert not jnp.array_equal(params_keys[0], params_keys[1])
  assert int(rngs.dropout.count[...]) == 0  # the broadcast stream is not advanced
  assert traces == 1


def test_scan_broadcast_state_other_than_rngs_is_still_carried():
  calls = nnx.BatchStat(jnp.array(0))

  @nnx.scan(in_axes=(nnx.Carry, None), length=3)
  def f(c, calls):
    calls.value += 1
    return c + calls.value, None

  c, _ = f(jnp.array(0), calls)
  assert int(c) == 1 + 2 + 3 and int(calls[...]) == 3

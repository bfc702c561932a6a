"""Module behaviour (seed-era methods, sow, flags, containers) and Rngs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


class Foo(nnx.Module):
  def __init__(self, rngs):
    self.variable = nnx.Param(jnp.array(1))
    self.np_buffer = np.array(2)
    self.jax_buffer = jnp.array(3)
    self.submodule = nnx.Linear(2, 4, rngs=rngs)
    self.int = 1
    self.str = "hello"
    self.list = [1, 2, 3]


def test_node_vs_static_attributes():
  state, moduledef = Foo(nnx.Rngs(0)).partition()
  assert sorted("/".join(p) for p in state.to_flat_dict()) == [
    "jax_buffer",
    "np_buffer",
    "submodule/bias",
    "submodule/kernel",
    "variable",
  ]
  m = moduledef.merge(state)
  assert m.list == [1, 2, 3] and m.str == "hello"


def test_partition_apply_and_seed_methods():
  m = Foo(nnx.Rngs(0))
  (params, rest), moduledef = m.partition(nnx.Param, ...)
  y, (state, moduledef2) = moduledef.apply(params, rest).submodule(jnp.ones((1, 2)))
  assert y.shape == (1, 4) and moduledef2 == moduledef
  assert sorted(m.filter(nnx.Param)) == ["submodule", "variable"]
  m.update_state(jax.tree.map(jnp.zeros_like, m.filter(nnx.Param)))
  assert float(m.submodule.kernel.value.sum()) == 0.0
  assert m.get_state().keys() == nnx.state(m).keys()


def test_sow_and_pop_state():
  m = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  m.sow(nnx.Intermediate, "y", jnp.ones(2))
  m.sow(nnx.Intermediate, "y", jnp.zeros(2))
  inter = m.pop_state(nnx.Intermediate)
  assert len(inter.y.value) == 2 and not hasattr(m, "y")
  m.z = nnx.Param(jnp.ones(1))
  with pytest.raises(nnx.NnxError, match="'z' of Linear to be of type Intermediate, got Param"):
    m.sow(nnx.Intermediate, "z", 1)


def test_for_each_and_modules():
  seq = nnx.Sequence([nnx.Linear(2, 2, rngs=nnx.Rngs(0)), nnx.Linear(2, 2, rngs=nnx.Rngs(1))])
  seen = []
  seq.for_each(nnx.Linear, lambda m: seen.append(m))
  assert len(seen) == 2
  assert [p for p, _ in seq.modules()] == [(), (0,), (1,)]


def test_set_attributes_train_eval():
  class Flagged(nnx.Module):
    def __init__(self):
      self.deterministic = False
      self.inner = nnx.Module()
      self.inner.use_running_average = False

  m = Flagged()
  m.eval()
  assert m.deterministic and m.inner.use_running_average
  m.train()
  assert not m.deterministic and not m.inner.use_running_average
  with pytest.raises(
    nnx.UnknownAttributeError, match=r"no module has the attribute\(s\) \['detrministic'\]"
  ):
    m.set_attributes(detrministic=True)


def test_dict_and_list_containers():
  d = nnx.Dict(a=nnx.Linear(1, 1, rngs=nnx.Rngs(0)))
  with pytest.raises(nnx.NnxError, match="nnx.Dict keys must be str, got 1"):
    d[1] = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  assert list(d) == ["a"] and len(d) == 1
  lst = nnx.List([nnx.Param(jnp.ones(1))])
  assert len(lst[:1]) == 1 and isinstance(lst[0], nnx.Param)


def test_rngs_streams_counts_and_fallback():
  rngs = nnx.Rngs(0, dropout=1)
  k1, k2 = rngs.params(), rngs.params()  # falls back to the default stream
  assert not np.array_equal(jax.random.key_data(k1), jax.random.key_data(k2))
  assert int(rngs.default.count.value) == 2
  rngs["dropout"]()
  assert int(rngs.dropout.count.value) == 1
  same = nnx.Rngs(0)
  assert_trees_equal(jax.random.key_data(same()), jax.random.key_data(k1))


def test_rngs_without_default_raises():
  rngs = nnx.Rngs(params=0)
  with pytest.raises(nnx.NnxError, match="No RngStream named 'dropout' in Rngs and no 'default'"):
    rngs.dropout()


def test_rngs_counts_are_state_and_advance_through_jit():
  rngs = nnx.Rngs(0)

  @nnx.jit
  def draw(r):
    return jax.random.uniform(r())

  a, b = draw(rngs), draw(rngs)
  assert a != b and int(rngs.default.count.value) == 2
  assert [p for p in nnx.state(rngs).to_flat_dict()] == [("default", "count"), ("default", "key")]


def test_rngs_accepts_raw_and_typed_keys():
  r1 = nnx.Rngs(jax.random.PRNGKey(3))
  r2 = nnx.Rngs(jax.random.key(3))
  assert_trees_equal(jax.random.key_data(r1()), jax.random.key_data(r2()))
  with pytest.raises(nnx.NnxError, match="Cannot make a PRNG key"):
    nnx.Rngs(jnp.ones(3))


def test_fork_splits_streams():
  rngs = nnx.Rngs(params=0, dropout=1)
  forked = rngs.fork(split={"dropout": 4})
  assert forked.dropout.key.value.shape == (4,) and forked.params.key.value.shape == ()
  assert int(rngs.dropout.count.value) == 1


def test_repr_is_readable():
  text = repr(Foo(nnx.Rngs(0)))
  assert "submodule=Linear(" in text and "kernel=Param(value=float32[2, 4])" in text
  assert repr(nnx.state(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))).startswith("State({")

"""Declarative Modules and Pytrees: nnx.dataclass and the field helpers (seed dataclasses.py)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


class Count(nnx.Variable):
  pass


@nnx.dataclass
class Dense(nnx.Module):
  kernel: jax.Array = nnx.param_field()
  mean: jax.Array = nnx.var_field(nnx.BatchStat, sharding=("features",))
  sizes: list = nnx.node_field(default_factory=lambda: [1, 2])
  mask: np.ndarray = nnx.static_field(default_factory=lambda: np.ones(2, np.float32))
  name: str = nnx.static_field(default="dense")
  extra: tuple = nnx.field(default=(3,))
  count: jax.Array = nnx.var_field(Count, default=0)

  def __post_init__(self):
    self.seen_in_post_init = type(self.kernel).__name__

  def __call__(self, x):
    self.count += 1
    return (x @ self.kernel) * self.mask.value + self.mean


def test_module_fields_are_wrapped_after_init():
  m = Dense(jnp.ones((2, 2)), jnp.zeros(2))
  assert type(m.kernel) is nnx.Param and type(m.mean) is nnx.BatchStat
  assert m.mean.sharding == ("features",)
  assert type(m.sizes) is nnx.Node and m.sizes.value == [1, 2]
  assert type(m.mask) is nnx.Static and m.name == "dense" and m.extra == (3,)
  assert type(m.count) is Count and m.count.value == 0
  assert m.seen_in_post_init == "ArrayImpl"  # wrapping happens after __post_init__, as in the seeds
  graphdef, params, stats, rest = nnx.split(m, nnx.Param, nnx.BatchStat, ...)
  assert list(params) == ["kernel"] and list(stats) == ["mean"]
  assert sorted(rest) == ["count", "sizes"]  # mask and name are static


def test_dataclass_modules_work_with_split_merge_and_nnx_jit():
  m = Dense(jnp.eye(2), jnp.zeros(2))
  counter = TraceCounter()

  @nnx.jit
  @counter
  def step(m, x):
    return m(x)

  y = step(m, jnp.ones((1, 2)))
  with assert_no_retrace(counter):
    step(m, jnp.ones((1, 2)))
  assert_trees_equal(y, [[1.0, 1.0]])
  assert int(m.count.value) == 2
  m2 = nnx.merge(*nnx.split(m))  # merge does not re-run __init__
  assert type(m2.kernel) is nnx.Param and m2.mask == m.mask


def test_existing_variables_are_kept_so_sharing_survives():
  shared = nnx.Param(jnp.ones((2, 2)))
  a = Dense(shared, jnp.zeros(2))
  b = Dense(shared, nnx.BatchStat(jnp.zeros(2)))
  assert a.kernel is shared and b.kernel is shared
  pair = nnx.List([a, b])
  assert len(jax.tree.leaves(nnx.state(pair, nnx.Param))) == 1


def test_var_field_with_a_non_variable_type_names_the_attribute():
  with pytest.raises(
    nnx.DataclassError, match=r"field Bad\.stat: var_field expects a Variable subclass.*got int"
  ):

    @nnx.dataclass
    class Bad(nnx.Module):
      stat: int = nnx.var_field(int)

  with pytest.raises(TypeError, match=r"field Bad2\.x: var_field expects .*got 'params'"):

    @nnx.dataclass
    class Bad2(nnx.Module):
      x: int = nnx.var_field("params")


def test_wrong_values_name_the_field():
  with pytest.raises(
    nnx.DataclassError,
    match=r"field Dense\.kernel is declared var_field\(Param\) but was given a BatchStat",
  ):
    Dense(nnx.BatchStat(jnp.ones((2, 2))), jnp.zeros(2))
  with pytest.raises(
    nnx.DataclassError,
    match=r"field Dense\.mask is declared static_field\(\) but was given a Linear",
  ):
    Dense(jnp.ones((2, 2)), jnp.zeros(2), mask=nnx.Linear(1, 1, rngs=nnx.Rngs(0)))


def test_reserved_metadata_and_non_module_classes_are_rejected():
  with pytest.raises(nnx.DataclassError, match="reserved key 'nnx_box'"):
    nnx.param_field(metadata={"nnx_box": 1})
  with pytest.raises(
    nnx.DataclassError,
    match="nnx.Module, nnx.Pytree or nnx.legacy.Pytree, got 'Plain'",
  ):

    @nnx.dataclass
    class Plain:
      x: int = 1


def test_defaults_keep_identity_semantics():
  m = Dense(jnp.ones((2, 2)), jnp.zeros(2))
  assert m != Dense(jnp.ones((2, 2)), jnp.zeros(2)) and m == m
  assert hash(m) == hash(m)
  assert repr(m).startswith("Dense(  # Param: 4")  # the Module repr, not the dataclass one
  assert dataclasses.is_dataclass(m)


def test_subclass_calling_super_init_gets_wrapped_fields():
  class Sub(Dense):
    def __init__(self):
      super().__init__(jnp.ones((2, 2)), jnp.zeros(2))
      self.more = nnx.Param(jnp.ones(1))

  s = Sub()
  assert type(s.kernel) is nnx.Param and type(s.mean) is nnx.BatchStat
  assert sorted(nnx.state(s, nnx.Param)) == ["kernel", "more"]


@nnx.dataclass
class Params(nnx.legacy.Pytree):
  w: jax.Array = nnx.param_field()
  table: np.ndarray = nnx.static_field()
  opt: dict = nnx.node_field()
  lr: float = 0.1


def test_pytree_dataclass_is_immutable_wraps_and_unwraps():
  p = Params(jnp.ones(2), np.arange(3), {"m": jnp.zeros(2)})
  assert isinstance(p.w, jax.Array) and type(vars(p)["w"]) is nnx.Param
  assert type(vars(p)["table"]) is nnx.Static and isinstance(p.table, np.ndarray)
  assert type(vars(p)["opt"]) is nnx.Node and set(p.opt) == {"m"}
  assert len(jax.tree.leaves(p)) == 2  # w and opt["m"]; table and lr are static
  with pytest.raises(nnx.ImmutableError, match="cannot set attribute 'lr'"):
    p.lr = 0.2
  q = jax.jit(lambda p: p.replace(w=p.w * 3))(p)
  assert_trees_equal(q.w, [3.0, 3.0])
  assert type(vars(q)["w"]) is nnx.Param and q.lr == 0.1


def test_plain_dataclass_on_a_pytree_is_wrapped_too():
  @dataclasses.dataclass
  class Plain(nnx.legacy.Pytree):
    w: jax.Array = nnx.param_field()

  assert type(vars(Plain(jnp.ones(1)))["w"]) is nnx.Param

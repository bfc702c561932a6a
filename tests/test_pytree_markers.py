"""nnx.Pytree (flax 0.12's mutable base of Module): nnx.data / nnx.static markers,
Data/Static annotations, register_data_type, data-marked List elements, sow errors."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Foo(nnx.Pytree):
  def __init__(self, a, b, c):
    self.a = nnx.data(a)
    self.b = nnx.static(b)
    self.c = c


def test_markers_decide_leaves_and_stick_to_the_attribute():
  foo = Foo(1, 2, jnp.array(3))
  assert jax.tree.leaves(foo)[0] == 1 and len(jax.tree.leaves(foo)) == 2
  foo.a = 3  # stays data
  assert jax.tree.leaves(foo)[0] == 3
  foo.a = nnx.static(3)  # same object, new kind: the cached walk must be dropped
  assert len(jax.tree.leaves(foo)) == 1
  foo.b = nnx.data(4)
  assert len(jax.tree.leaves(foo)) == 2
  foo.c = nnx.static(5)
  assert len(jax.tree.leaves(foo)) == 1


def test_data_leaf_round_trips_through_tree_map_and_split_merge():
  foo = Foo("x", 2, jnp.array(3))
  foo.a = nnx.data(10)
  doubled = jax.tree.map(lambda x: x * 2, foo)
  assert doubled.a == 20 and doubled.b == 2
  graphdef, state = nnx.split(foo)
  assert state["a"] == 10
  assert nnx.merge(graphdef, state).a == 10


def test_static_attributes_reject_data():
  foo = Foo(1, 2, jnp.array(3))
  with pytest.raises(ValueError, match="Found data in value of type 'ArrayImpl'.* 'b' of Foo"):
    foo.b = nnx.static(jnp.array(4))
  foo.a = nnx.static(1)
  with pytest.raises(nnx.PytreeDataError, match="Found data on value of type 'list'.*'a' of Foo"):
    foo.a = ["hi", jnp.array(6)]


def test_plain_pytree_rejects_lists_of_data_but_module_containerizes():
  p = nnx.Pytree()
  with pytest.raises(ValueError, match="Found data on value of type 'list'"):
    p.a = [nnx.Variable(jnp.ones(1))]
  m = nnx.Module()
  m.a = [nnx.Variable(jnp.ones(1))]
  assert isinstance(m.a, nnx.List)


def test_class_level_markers_and_annotations():
  @dataclasses.dataclass
  class Ann(nnx.Pytree):
    a: nnx.Data[int]
    b: nnx.Static[int]
    c: jax.Array

  assert len(jax.tree.leaves(Ann(1, 2, jnp.array(3)))) == 2

  @nnx.dataclass
  class Spec(nnx.Module):
    a: int = nnx.static()
    b: int = nnx.data(default=3)

  assert jax.tree.leaves(Spec(a=1)) == [3]

  @nnx.dataclass
  class Bad(nnx.Pytree):
    a: jax.Array = nnx.static()

  with pytest.raises(ValueError, match="Found unexpected data on value of type"):
    Bad(a=jnp.array(3))


def test_marker_argument_errors():
  with pytest.raises(TypeError, match=r"nnx.data\(\) takes either one positional value"):
    nnx.data(1, default=2)
  with pytest.raises(ValueError, match="may not contain the key 'static'"):
    nnx.static(metadata={"static": True})


def test_register_data_type_and_is_data():
  @dataclasses.dataclass(frozen=True)
  class Tag:
    value: int

  nnx.register_data_type(Tag)
  p = nnx.Pytree()
  p.tag, p.name = Tag(1), "n"
  assert nnx.is_data(p.tag) and not nnx.is_data("n") and not nnx.is_data([jnp.ones(1)])
  assert jax.tree.leaves(p) == [Tag(1)]


def test_list_elements_with_markers():
  ls = nnx.List([nnx.data(10), nnx.static("hello"), nnx.data(20)])
  leaves, treedef = jax.tree.flatten(ls)
  assert leaves == [10, 20]
  new = jax.tree.unflatten(treedef, [x * 2 for x in leaves])
  assert list(new) == [20, "hello", 40]
  assert jax.tree.leaves(nnx.List([nnx.static(1), nnx.static(2)])) == []


def test_iter_children_skips_containers():
  class Block(nnx.Module):
    def __init__(self):
      self.subs = [nnx.Linear(1, 1, rngs=nnx.Rngs(0))]
      self.lin = nnx.Linear(1, 1, rngs=nnx.Rngs(1))
      self.drop = nnx.Dropout(0.5)

  assert [k for k, _ in Block().iter_children()] == ["drop", "lin"]


def test_sow_errors_are_value_errors():
  m = nnx.Module()
  m.y = 10
  with pytest.raises(ValueError, match="'y' of Module to be a Variable, got int"):
    m.sow(nnx.Intermediate, "y", jnp.ones(1))
  m.z = nnx.Param(jnp.ones(1))
  with pytest.raises(ValueError, match="to be of type Intermediate, got Param"):
    m.sow(nnx.Intermediate, "z", jnp.ones(1))

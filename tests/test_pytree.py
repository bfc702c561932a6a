"""nnx.legacy.Pytree (the seeds' pytreelib): immutability, replace, children vs static, jit."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal, graphs, same_graph


class Point(nnx.legacy.Pytree):
  def __init__(self, x, name):
    self.x = x
    self.name = name


class Counter(nnx.legacy.Pytree, mutable=True):
  def __init__(self):
    self.n = 0


def test_immutable_after_init_with_a_message_naming_the_attribute():
  p = Point(jnp.ones(2), "a")
  with pytest.raises(nnx.ImmutableError, match=r"cannot set attribute 'x'.*replace\(x=\.\.\.\)"):
    p.x = jnp.zeros(2)
  with pytest.raises(AttributeError, match=r"class Point\(nnx.legacy.Pytree, mutable=True\)"):
    p.y = 1
  with pytest.raises(nnx.ImmutableError, match="cannot delete attribute 'name'"):
    del p.name
  assert_trees_equal(p.x, [1.0, 1.0])


def test_mutable_opt_in_and_inheritance():
  c = Counter()
  c.n += 1
  c.extra = "ok"
  del c.extra
  assert c.n == 1

  class SubCounter(Counter):
    pass

  class Frozen(Counter, mutable=False):
    pass

  s = SubCounter()
  s.n = 5
  assert s.n == 5
  with pytest.raises(nnx.ImmutableError, match="Frozen is immutable"):
    Frozen().n = 1


def test_replace_returns_a_new_object_and_checks_names():
  p = Point(jnp.ones(2), "a")
  q = p.replace(name="b")
  assert q is not p and q.name == "b" and p.name == "a" and q.x is p.x
  with pytest.raises(
    nnx.UnknownFieldError, match=r"unknown attribute\(s\) \['nmae'\].*\['name', 'x'\]"
  ):
    p.replace(nmae="c")


def test_children_and_static_follow_the_node_rules():
  tx = optax.sgd(0.1)
  lin = nnx.Linear(1, 1, rngs=nnx.Rngs(0))

  class Many(nnx.legacy.Pytree):
    def __init__(self):
      self.array = jnp.ones(1)
      self.np_array = np.ones(1)
      self.tree_node = nnx.TreeNode({"a": jnp.ones(2)})
      self.param = nnx.Param(jnp.ones(3))
      self.state = nnx.state(lin)
      self.nested = Point(jnp.ones(4), "p")
      self.module = lin
      self.tx = tx
      self.size = 3
      self.plain_tuple = (1, "a")
      self.static_array = nnx.Static(np.arange(2))

  m = Many()
  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(m)[0]]
  roots = sorted({p.split(".")[1].split("[")[0] for p in paths})
  assert roots == ["array", "module", "nested", "np_array", "param", "state", "tree_node"]
  # reading unwraps containers; the aux data holds the static attributes
  assert isinstance(m.tree_node, dict) and isinstance(m.param, jax.Array)
  assert isinstance(m.static_array, np.ndarray) and m.size == 3
  treedef = jax.tree.structure(m)
  assert jax.tree.structure(Many()) == treedef  # equal static data, equal treedefs
  m2 = jax.tree.unflatten(treedef, jax.tree.leaves(m))
  assert m2.tx is tx and m2.plain_tuple == (1, "a") and type(vars(m2)["param"]) is nnx.Param
  # as in the seeds, a plain tuple is not a node, even when it holds arrays: wrap it in TreeNode
  assert jax.tree.leaves(Point(0, (jnp.ones(5),))) == []
  assert len(jax.tree.leaves(Point(nnx.TreeNode((jnp.ones(5),)), "p"))) == 1


def test_assignment_rewraps_in_the_same_container():
  class Box(nnx.legacy.Pytree, mutable=True):
    def __init__(self):
      self.p = nnx.Param(jnp.ones(2), tag="w")
      self.s = nnx.Static("a")
      self.t = nnx.TreeNode(1)

  b = Box()
  b.p = jnp.zeros(2)
  b.s = "b"
  c = b.replace(t=2)
  assert type(vars(b)["p"]) is nnx.Param and vars(b)["p"].tag == "w"
  assert vars(b)["s"] == nnx.Static("b")
  assert type(vars(c)["t"]) is nnx.TreeNode and c.t == 2 and b.t == 1
  b.p = nnx.BatchStat(jnp.ones(1))  # an explicit container replaces the old one
  assert type(vars(b)["p"]) is nnx.BatchStat


def test_jit_updates_children_and_keeps_static_without_retrace():
  counter = TraceCounter()

  @jax.jit
  @counter
  def step(p):
    return p.replace(x=p.x + 1)

  p = Point(jnp.zeros(2), "a")
  p = step(p)
  with assert_no_retrace(counter):
    p = step(p)
  assert_trees_equal(p.x, [2.0, 2.0])
  assert p.name == "a"
  step(Point(jnp.zeros(2), "b"))  # other static data: a new trace
  assert counter.count == 2


def test_pytree_on_a_module_is_a_state_leaf():
  m = nnx.Module()
  m.point = Point(jnp.ones(2), "a")
  graphdef, state = nnx.split(m)
  assert list(state) == ["point"] and isinstance(state.point, Point)

  @nnx.jit
  def bump(m):
    m.point = m.point.replace(x=m.point.x * 3)

  bump(m)
  assert_trees_equal(m.point.x, [3.0, 3.0])
  assert nnx.merge(graphdef, state).point.name == "a"


def test_repr_shows_unwrapped_fields():
  assert repr(Point(1, "a")) == "Point(name='a', x=1)"


@given(
  st.lists(st.integers(0, 3), min_size=1, max_size=3),
  st.text(max_size=3),
  st.integers(-3, 3),
)
def test_flatten_unflatten_round_trip_law(shape, name, k):
  p = Point(jnp.full(tuple(shape), k, jnp.int32), name)
  leaves, treedef = jax.tree.flatten(p)
  q = jax.tree.unflatten(treedef, leaves)
  assert type(q) is Point and q.name == name and q.x is p.x
  with pytest.raises(nnx.ImmutableError):
    q.name = "other"
  assert jax.tree.structure(Point(jnp.zeros(1), name)) == treedef


@given(graphs())
def test_module_child_round_trip_law(root):
  """A Module attribute is a child: flattening keeps its sharing (one leaf per Variable)."""
  holder = Point(root, "m")
  leaves, treedef = jax.tree.flatten(holder)
  assert len(leaves) == len(jax.tree.leaves(nnx.state(root)))
  assert same_graph(jax.tree.unflatten(treedef, leaves).x, root)

"""The bad-input catalogue: each misuse raises a specific error naming the path and the fix."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


class Model(nnx.Module):
  def __init__(self):
    self.lin = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    self.stat = nnx.BatchStat(jnp.zeros(3))
    self.cache = nnx.Cache(jnp.zeros(2))


def test_non_exhaustive_filters_name_uncovered_paths():
  with pytest.raises(nnx.FilterError, match=r"not matched: cache \(Cache\), stat \(BatchStat\)"):
    nnx.split(Model(), nnx.Param)
  with pytest.raises(nnx.FilterError, match=r"add .* `\.\.\.` as the last filter"):
    Model().partition(nnx.Param, nnx.Cache)
  with pytest.raises(nnx.FilterError, match=r"not matched: stat"):
    nnx.state(Model()).split(nnx.Param, nnx.Cache)


def test_unknown_filter_type():
  with pytest.raises(
    nnx.UnknownFilterError, match=r"Invalid filter 1\.5 of type float.*nnx\.Param"
  ):
    nnx.split(Model(), 1.5)


def test_merge_with_mismatched_state_names_paths():
  graphdef, params, rest = nnx.split(Model(), nnx.Param, ...)
  with pytest.raises(nnx.StateMismatchError, match=r"missing paths: cache, stat"):
    nnx.merge(graphdef, params)
  other = nnx.State({"lin": {"bias": jnp.zeros(3), "kernel": jnp.zeros((2, 3)), "x": 1}})
  with pytest.raises(nnx.StateMismatchError, match=r"unexpected paths: lin/x"):
    nnx.merge(graphdef, other, rest)
  with pytest.raises(nnx.GraphStructureError, match="merge expects a GraphDef first"):
    nnx.merge(params, graphdef)


def test_update_with_new_shape_or_dtype_or_unknown_path():
  m = Model()
  kernel = m.lin.kernel
  nnx.update(m, nnx.State({"lin": {"kernel": jnp.zeros((4, 2, 3))}}))  # as flax.nnx
  assert m.lin.kernel is kernel and kernel.shape == (4, 2, 3)
  nnx.update(m, nnx.State({"stat": jnp.zeros(3, jnp.int32)}))
  assert m.stat.dtype == jnp.int32
  with pytest.raises(nnx.StateMismatchError, match=r"path nope/x is not in the graph"):
    nnx.update(m, nnx.State({"nope": {"x": jnp.zeros(1)}}))


def test_mutation_from_another_trace():
  m = Model()
  with pytest.raises(nnx.TraceContextError, match=r"Cannot mutate BatchStat.*nnx\.jit"):
    jax.jit(lambda x: m.stat.__setattr__("value", x))(jnp.ones(3))
  msg = r"Cannot mutate 'Model' from different trace level \(attribute 'extra'\)"
  with pytest.raises(nnx.TraceContextError, match=msg):
    jax.jit(lambda x: setattr(m, "extra", x))(jnp.ones(3))
  rngs = nnx.Rngs(0)
  with pytest.raises(nnx.TraceContextError, match="RngCount"):
    jax.jit(lambda: rngs())()
  assert int(rngs.default.count.value) == 0
  assert_trees_equal(m.stat.value, jnp.zeros(3))


def test_exception_inside_grad_leaves_module_unchanged():
  m = Model()
  before = nnx.state(m)

  def loss(m):
    m.stat.value = m.stat.value + 1
    raise RuntimeError("inside grad")

  with pytest.raises(RuntimeError, match="inside grad"):
    nnx.grad(loss)(m)
  assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), nnx.state(m), before))


def test_split_of_a_non_graph_value_is_its_own_state():
  graphdef, state = nnx.split(3)
  assert state == 3 and nnx.merge(graphdef, state) == 3
  with pytest.raises(nnx.GraphStructureError, match="Expected a Module.*got int"):
    nnx.graph._graph.walk(3)  # the engine itself still wants a graph


def test_errors_share_a_base_class_and_builtin_types():
  for cls, builtin in [
    (nnx.FilterError, ValueError),
    (nnx.UnknownFilterError, TypeError),
    (nnx.StateMismatchError, KeyError),
    (nnx.ShapeDtypeError, ValueError),
    (nnx.TraceContextError, RuntimeError),
  ]:
    assert issubclass(cls, nnx.NnxError) and issubclass(cls, builtin)

"""flax.nnx 0.12's small public modules: reprlib, ids, tracers, proxy_caller and
transforms.general (split_inputs / merge_inputs)."""

import copy
import pickle

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx import ids, proxy_caller, reprlib, tracers
from nnx_eqx.testing import assert_trees_close, assert_trees_equal
from nnx_eqx.transforms.general import merge_inputs, split_inputs


# reprlib ---------------------------------------------------------------------------------
class Box(reprlib.Representable):
  def __init__(self, **fields):
    self.fields = fields

  def __nnx_repr__(self):
    yield reprlib.Object(type(self), comment="  # box")
    for k, v in self.fields.items():
      yield reprlib.Attr(k, v)


def test_repr_nests_with_indentation_and_comment():
  text = repr(Box(a=1, b=Box(c=[1, "x"], d=None)))
  assert text == "Box(  # box\n  a=1,\n  b=Box(  # box\n    c=[1, 'x'],\n    d=None\n  )\n)"


def test_empty_object_uses_empty_repr_and_no_comment():
  class Empty(reprlib.Representable):
    def __nnx_repr__(self):
      yield reprlib.Object("E", empty_repr="<>", comment="# unused")

  assert repr(Empty()) == "E(<>)"


def test_repr_has_no_colour_and_str_uses_the_context_colour():
  saved = reprlib.REPR_CONTEXT.current_color
  reprlib.REPR_CONTEXT.current_color = reprlib._THEME
  try:
    assert "\x1b[" not in repr(Box(a=1))
    assert "\x1b[" in str(Box(a=1))
    assert reprlib.REPR_CONTEXT.current_color is reprlib._THEME  # restored after repr
  finally:
    reprlib.REPR_CONTEXT.current_color = saved


def test_max_depth_elides_deep_fields(monkeypatch):
  monkeypatch.setattr(reprlib, "MAX_DEPTH", 1)
  assert repr(Box(a=Box(b=1))) == "Box(  # box\n  a=Box(...)\n)"
  assert reprlib.REPR_CONTEXT.depth == 0


def test_get_repr_errors_name_the_class():
  class Bad(reprlib.Representable):
    def __nnx_repr__(self):
      yield reprlib.Attr("a", 1)

  with pytest.raises(TypeError, match="Bad.__nnx_repr__ must yield a reprlib.Object first"):
    repr(Bad())
  with pytest.raises(TypeError, match="int is not a reprlib.Representable"):
    reprlib.get_repr(3)  # type: ignore[arg-type]
  assert reprlib.REPR_CONTEXT.depth == 0  # the depth counter is restored after errors


def test_mapping_and_sequence_mixins():
  class Table(reprlib.MappingReprMixin, dict):
    pass

  assert repr(Table(a=(1,))) == "Table({\n  'a': (1,)\n})"
  assert repr(reprlib.PrettySequence([])) == "PrettySequence([])"


# ids -------------------------------------------------------------------------------------
def test_uuids_are_unique_and_renewed_by_copies():
  a, b = ids.uuid(), ids.uuid()
  assert a != b and b.id > a.id
  assert copy.copy(a) != a and copy.deepcopy(a) != a
  assert {a: 1}[ids.UUID(a.id)] == 1


# tracers ---------------------------------------------------------------------------------
def test_trace_state_inside_and_outside_jit():
  state, seen = tracers.TraceState(), []

  @jax.jit
  def f(x):
    seen.append((state.is_valid(), tracers.TraceState().is_valid()))
    return x

  f(1.0)
  f(2.0)
  assert seen == [(False, True)]  # one trace only
  assert state.is_valid()
  assert jax.tree.leaves(state) == []


def test_trace_state_pickles_to_the_loading_trace():
  state = pickle.loads(pickle.dumps(tracers.TraceState()))
  assert state.is_valid() and state == tracers.TraceState()
  assert "TraceState(" in repr(state)


# proxy_caller ----------------------------------------------------------------------------
def test_delayed_accessor_replays_and_is_static():
  acc = proxy_caller.DelayedAccessor().layers[1].scale
  assert acc.actions == (
    proxy_caller.GetAttr("layers"),
    proxy_caller.GetItem(1),
    proxy_caller.GetAttr("scale"),
  )
  assert jax.tree.leaves(acc) == [] and copy.deepcopy(acc) == acc

  class Layer:
    scale = 3

  class Net:
    layers = [None, Layer()]

  assert acc(Net()) == 3


def test_callable_proxy_passes_the_accessor_and_arguments():
  calls = []
  proxy = proxy_caller.CallableProxy(lambda acc, *a, **k: calls.append((acc, a, k)) or 7)
  assert proxy.encoder["x"](1, y=2) == 7
  assert calls == [(proxy_caller.DelayedAccessor().encoder["x"], (1,), {"y": 2})]


# transforms.general ----------------------------------------------------------------------
def _zeroing_step(traces):
  @split_inputs
  @jax.jit
  @merge_inputs
  def step(model, x):
    traces.append(1)
    y = model(x)
    model.kernel[...] = jnp.zeros_like(model.kernel[...])
    return y

  return step


def test_split_merge_inputs_lift_jit_and_write_back():
  traces: list = []
  step = _zeroing_step(traces)
  model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  kernel = model.kernel
  x = jnp.ones((1, 2))
  expected = model(x)
  assert_trees_close(step(model, x), expected)
  assert model.kernel is kernel  # the caller's Variable is updated in place
  assert_trees_equal(model.kernel[...], jnp.zeros((2, 2)))
  assert_trees_close(step(model, x), model.bias[...][None])
  assert len(traces) == 1


def test_split_merge_inputs_vmap_with_output_axes():
  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  in_axes = (None, 0)
  forward = split_inputs(jax.vmap(merge_inputs(lambda m, x: m(x)), in_axes, (in_axes, 0)))
  x = jnp.ones((5, 2))
  assert_trees_close(forward(model, x), model(x))


def test_split_merge_inputs_keep_sharing():
  model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  pair = nnx.List([model, model])

  @split_inputs
  @jax.jit
  @merge_inputs
  def f(pair):
    assert pair[0] is pair[1]
    pair[0].bias[...] = pair[0].bias[...] + 1.0
    return None

  f(pair)
  assert_trees_equal(model.bias[...], jnp.ones((2,)))


def test_error_inside_leaves_the_caller_unchanged():
  model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  before = nnx.state(model)

  @split_inputs
  @jax.jit
  @merge_inputs
  def broken(model, x):
    model.kernel[...] = jnp.zeros_like(model.kernel[...])
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    broken(model, jnp.ones((1, 2)))
  assert_trees_equal(nnx.state(model), before)


def test_split_inputs_without_merge_inputs_names_the_fix():
  with pytest.raises(ValueError, match="not the \\(args, out\\) pair of a merge_inputs"):
    split_inputs(lambda m: 1.0)(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))


# graphlib predicates, jax_to_nnx_path, get_var_pspec, in_ipython ---------------------------
def test_graphlib_predicates():
  from nnx_eqx import graphlib

  lin = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  assert graphlib.is_node_leaf(jnp.ones(1)) and not graphlib.is_node_leaf(lin.kernel)
  assert graphlib.is_node_module(lin) and not graphlib.is_node_module([lin])
  assert graphlib.is_pytree_node((1,)) and not graphlib.is_pytree_node(lin)
  assert graphlib.is_node_type(nnx.List) and not graphlib.is_node_type(nnx.Param)
  assert nnx.graph.is_pytree_node is graphlib.is_pytree_node


def test_jax_to_nnx_path_matches_state_paths():
  from nnx_eqx import graphlib

  m = nnx.Module()
  m.layers = [{"w": jnp.ones(1)}]
  ((jax_path, _),) = jax.tree_util.tree_flatten_with_path({"layers": [{"w": 1}]})[0]
  assert graphlib.jax_to_nnx_path(jax_path) in {p for p, _ in nnx.to_flat_state(nnx.state(m))}


def test_get_var_pspec_uses_the_context_rules():
  p = nnx.Param(jnp.ones((2, 4)), sharding=("embed", "mlp"))
  with nnx.logical_axis_rules([("mlp", "model")]):
    assert nnx.spmd.get_var_pspec(p) == jax.sharding.PartitionSpec(None, "model")
  assert nnx.spmd.get_var_pspec(nnx.Variable(None)) is None


def test_in_ipython_outside_a_shell():
  from nnx_eqx import summary, visualization

  assert visualization.in_ipython() is False and summary.in_ipython is visualization.in_ipython


def test_resolve_kwargs_binds_by_signature_and_names_unplaceable_keywords():
  from nnx_eqx.transforms.general import resolve_kwargs

  def f(a, b=1, *, c=2):
    return a, b, c

  assert resolve_kwargs(lambda a, b=1: None, (), {"a": 0}) == (0, 1)
  with pytest.raises(TypeError, match=r"keyword arguments \['c'\] of 'f' have no position"):
    resolve_kwargs(f, (0,), {"c": 3})
  with pytest.raises(TypeError, match="missing a required argument: 'a'"):
    resolve_kwargs(f, (), {})


def test_resolve_kwargs_decorator_feeds_nnx_vmap_positional_axes():
  from nnx_eqx.transforms.general import resolve_kwargs

  traces = []

  @nnx.vmap(in_axes=(0, None))
  @resolve_kwargs()
  def scale(x, factor=2.0):
    traces.append(1)
    return x * factor

  x = jnp.arange(3.0)
  assert_trees_close(scale(x, 3.0), x * 3.0)
  assert len(traces) == 1


def test_create_path_filters_groups_paths_by_value():
  from nnx_eqx import statelib

  state = nnx.State({"a": nnx.Param("x"), "b": {"c": "x", "d": "y"}})
  filters = statelib.create_path_filters(state)
  assert {v: sorted(f.paths) for f, v in filters.items()} == {
    "x": [("a",), ("b", "c")],
    "y": [("b", "d")],
  }
  with pytest.raises(TypeError, match="unhashable"):
    statelib.create_path_filters(nnx.State({"a": [1]}))


def test_trace_state_is_not_hashable():
  with pytest.raises(TypeError, match="unhashable"):
    hash(tracers.TraceState())

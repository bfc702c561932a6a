"""Round-trip and output laws of the bridge: hypothesis examples per the profile
(50 by default, 500 with HYPOTHESIS_PROFILE=thorough; see conftest.py).

Drawing is cheap (models are built abstractly per architecture and their
weights drawn with NumPy). Output laws run on ``EQX_ARCHITECTURES``: one
compiled function per architecture (checked by trace counters), with fresh
weights and inputs per example.
"""

import equinox as eqx
import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import (
  EQX_ARCHITECTURES,
  TraceCounter,
  assert_trees_close,
  assert_trees_equal,
  eqx_inputs,
  eqx_models,
  graphs,
  same_graph,
  sharing_classes,
)

LAW = settings(deadline=None)  # the profile's example count


@LAW
@given(eqx_models())
def test_eqx_to_nnx_to_eqx_is_identity(case):
  """Values, dtypes, static fields and the tree structure come back bit for bit."""
  m = nnx.from_eqx(case.model, case.state)
  if case.state is None:
    back = nnx.to_eqx(m)
    assert_trees_equal(back, case.model)
  else:
    assert_trees_equal(nnx.to_eqx_with_state(m), (case.model, case.state))
  # Tied weights come back as one Variable.
  if case.kind == "tokens":
    tied = m.shared.pytree
    assert tied[0].embedding is tied[1].weight


@LAW
@given(graphs(cycles=False))
def test_nnx_to_eqx_to_nnx_is_identity(g):
  """GraphDef (types, static attributes), sharing, Variable types, metadata,
  dtypes and values all survive; converting again gives an equal pytree."""
  e, state = nnx.to_eqx_with_state(g)
  back = nnx.from_eqx(e, state)
  assert same_graph(back, g)
  assert_trees_equal(nnx.to_eqx_with_state(back), (e, state))


@LAW
@given(graphs(cycles=True))
def test_cycles_raise_naming_both_paths(g):
  has_cycle = _has_cycle(g)
  if has_cycle:
    with pytest.raises(nnx.bridge.CycleError, match=r"refers back to its ancestor root"):
      nnx.to_eqx_with_state(g)
  else:
    assert same_graph(nnx.from_eqx(*nnx.to_eqx_with_state(g)), g)


def _has_cycle(root) -> bool:
  on_stack: set[int] = set()

  def visit(node) -> bool:
    if id(node) in on_stack:
      return True
    if not nnx.is_graph_node(node):
      return False
    on_stack.add(id(node))
    impl = nnx.graph.node_impl(type(node))
    found = any(visit_value(v) for _, v in impl.children(node))
    on_stack.discard(id(node))
    return found

  def visit_value(v) -> bool:
    if isinstance(v, (tuple, list)):
      return any(visit_value(x) for x in v)
    return visit(v)

  return visit(root)


# ---------------------------------------------------------------------------
# Outputs agree: Equinox model vs its NNX conversion
# ---------------------------------------------------------------------------
EQX_TRACES = TraceCounter()
NNX_TRACES = TraceCounter()


@eqx.filter_jit
@EQX_TRACES
def eqx_forward(model, x, state):
  if state is None:
    return model(x)
  return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


@nnx.jit
@NNX_TRACES
def nnx_forward(m, x):
  return m(x)


@nnx.jit
@NNX_TRACES
def nnx_forward_batched(m, x):
  return nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name="batch")(m, x)


@LAW
@given(st.data())
def test_outputs_and_state_agree(data):
  case = data.draw(eqx_models(architectures=EQX_ARCHITECTURES))
  x = data.draw(eqx_inputs(case))
  m = nnx.from_eqx(case.model, case.state)
  out = eqx_forward(case.model, x, case.state)
  if case.state is None:
    assert_trees_close(nnx_forward(m, x), out)
  else:
    y, new_state = out
    assert_trees_close(nnx_forward_batched(m, x), y)
    _, state = nnx.to_eqx_with_state(m)  # BatchNorm statistics updated in place
    assert_trees_close(state, new_state)


def test_output_law_compiled_once_per_architecture():
  # Runs after the law above (pytest keeps file order): no retrace per example.
  assert 0 < EQX_TRACES.count <= len(EQX_ARCHITECTURES)
  assert 0 < NNX_TRACES.count <= len(EQX_ARCHITECTURES)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_outputs_agree_on_random_architectures(data):
  """Eager, on random (not fixed) architectures; fewer examples (each new shape compiles)."""
  case = data.draw(eqx_models(kinds=("vector", "image"), stateful=False, max_layers=2))
  x = data.draw(eqx_inputs(case))
  m = nnx.from_eqx(case.model)
  assert_trees_close(m(x), case.model(x))


# ---------------------------------------------------------------------------
# NNX models converted to Equinox compute the same function (and state)
# ---------------------------------------------------------------------------
class Block(nnx.Module):
  """A native NNX model: Linear layers, a counter, BatchNorm, Dropout with Rngs."""

  def __init__(self, din, *, rngs):
    self.l1 = nnx.Linear(din, 4, rngs=rngs)
    self.bn = nnx.BatchNorm(4, rngs=rngs)
    self.drop = nnx.Dropout(0.5, rngs=rngs)
    self.l2 = nnx.Linear(4, 2, rngs=rngs)
    self.l3 = nnx.Linear(2, 2, rngs=rngs)
    self.l4 = nnx.Linear(2, 2, rngs=rngs)
    if din == 4:  # a tied weight: an eqx.nn.Shared on the Equinox side
      self.l4.kernel = self.l3.kernel
    self.calls = nnx.Variable(jnp_zero())

  def __call__(self, x):
    self.calls += 1
    h = self.drop(jax.nn.relu(self.bn(self.l1(x))))
    return self.l4(self.l3(self.l2(h)))


def jnp_zero():
  return jax.numpy.zeros((), "int32")


NNX_FAMILIES = {din: Block(din, rngs=nnx.Rngs(0)) for din in (2, 4)}


@nnx.jit
def nnx_call(m, x):
  return m(x)


@eqx.filter_jit
def eqx_call(e, x, state):
  return e(x, state)


@LAW
@given(st.sampled_from(sorted(NNX_FAMILIES)), st.integers(0, 2**31 - 1))
def test_nnx_models_to_eqx_outputs_and_state_agree(din, seed):
  model = nnx.clone(NNX_FAMILIES[din])
  rng = np.random.default_rng(seed)
  params = jax.tree.map(
    lambda p: jax.numpy.asarray(rng.standard_normal(p.shape), p.dtype), nnx.state(model, nnx.Param)
  )
  nnx.update(model, params)
  model.train() if seed % 2 else model.eval()
  x = jax.numpy.asarray(rng.standard_normal((3, din)), "float32")
  e, state = nnx.to_eqx_with_state(model)
  y_eqx, state = eqx_call(e, x, state)
  y_nnx = nnx_call(model, x)
  assert_trees_close(y_eqx, y_nnx)
  # The State returned by Equinox holds exactly the updated NNX state.
  _, expected = nnx.to_eqx_with_state(model)
  assert_trees_close(state, expected)
  back = nnx.from_eqx(e, state)
  nnx.update(back, nnx.state(model, nnx.Not(nnx.Param)))  # state: equal up to 1e-6 (above)
  assert same_graph(back, model) and sharing_classes(back) == sharing_classes(model)

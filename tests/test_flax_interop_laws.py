"""Round-trip laws of the flax.nnx bridge over random graphs (hypothesis).

* ``nnx.from_flax(nnx.to_flax(m))`` is ``m``: GraphDef (classes, static attributes,
  sharing, cycles), Variable types and metadata, bitwise values.
* ``nnx.to_flax(nnx.from_flax(f))`` is ``f`` for a flax.nnx graph built by flax code.
* The flax state of ``nnx.to_flax(m)`` has ``nnx.state(m)``'s paths, types and values.
* Equinox -> flax.nnx -> Equinox is the identity, and the flax.nnx model runs the
  Equinox model's program bitwise, for random Equinox models.
* A converted random graph (shared submodules and Variables, cycles) runs its source's
  forward pass, and gives its gradients, bitwise: ``nnx.from_flax`` of a flax graph
  under ``nnx.jit`` and ``eqx.filter_jit`` against flax's under ``flax.nnx.jit``, and
  ``nnx.to_flax`` of an nnx_eqx graph under ``flax.nnx.jit`` against nnx_eqx's.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("flax", reason="the flax.nnx bridge needs flax (the `flax` extra)")
from flax import nnx as fnnx  # noqa: E402

import nnx_eqx as nnx  # noqa: E402
from nnx_eqx.graph import node_impl  # noqa: E402
from nnx_eqx.testing import (  # noqa: E402
  assert_trees_equal,
  eqx_inputs,
  eqx_models,
  graphs,
  same_graph,
)


class FNode(fnnx.Module):
  """A plain flax.nnx Module used as a random graph's node."""


def forward(node, x, depth=0):
  """A forward pass over a random graph's node, the same code for both libraries: each
  Variable and array scales the output, each submodule (to depth 2: graphs may have
  cycles) adds its own output."""
  out = x
  for k in sorted(vars(node)):
    if not k.startswith("_"):
      out = _use(getattr(node, k), out, x, depth)
  return out


def _use(v, out, x, depth):
  if isinstance(v, (nnx.Variable, fnnx.Variable, jax.Array)):
    a = v.get_value() if not isinstance(v, jax.Array) else v
    return out * jnp.cos(jnp.sum(a) + out)
  if isinstance(v, (tuple, nnx.List, fnnx.List)):
    for e in v:
      out = _use(e, out, x, depth)
    return out
  if isinstance(v, (nnx.Module, fnnx.Module)) and depth < 2:
    return out + v(x, depth + 1)
  return out


class FCall(fnnx.Module):
  """A flax.nnx node of a random graph, with a forward pass."""

  def __call__(self, x, depth=0):
    return forward(self, x, depth)


class NCall(nnx.Module):
  """The nnx_eqx node of a random graph, with the same forward pass."""

  def __call__(self, x, depth=0):
    return forward(self, x, depth)


def nnx_mirror(node, memo=None):
  """The same graph with :class:`NCall` nodes (sharing and cycles kept)."""
  memo = {} if memo is None else memo
  if id(node) in memo:
    return memo[id(node)]
  if isinstance(node, nnx.Variable):
    return node
  if isinstance(node, nnx.List):
    out = memo[id(node)] = nnx.List([])
    for v in node:
      out.append(nnx_mirror(v, memo))
    return out
  if isinstance(node, tuple):
    return tuple(nnx_mirror(v, memo) for v in node)
  if isinstance(node, nnx.Module):
    out = memo[id(node)] = NCall()
    for k, v in node_impl(type(node)).children(node):
      setattr(out, k, nnx_mirror(v, memo))
    return out
  return node


def flax_mirror(node, memo=None, cls=None):
  """The same graph written with flax.nnx's classes (sharing and cycles kept)."""
  memo = {} if memo is None else memo
  cls = FNode if cls is None else cls
  if id(node) in memo:
    return memo[id(node)]
  if isinstance(node, nnx.Variable):
    out = memo[id(node)] = nnx.to_flax(node)
    return out
  if isinstance(node, nnx.List):
    out = memo[id(node)] = fnnx.List([])
    for v in node:
      out.append(flax_mirror(v, memo, cls))
    return out
  if isinstance(node, tuple):
    return tuple(flax_mirror(v, memo, cls) for v in node)
  if isinstance(node, nnx.Module):
    out = memo[id(node)] = cls()
    for k, v in node_impl(type(node)).children(node):
      v = flax_mirror(v, memo, cls)
      data = isinstance(v, jax.Array) or (
        isinstance(v, tuple) and any(isinstance(e, (fnnx.Variable, jax.Array)) for e in v)
      )
      setattr(out, k, fnnx.data(v) if data else v)
    return out
  return node  # arrays and static values


def flax_leaves(node):
  out = []
  for p, v in fnnx.to_flat_state(fnnx.state(node)):
    if isinstance(v, fnnx.Variable):
      out.append((p, type(v), v.get_metadata(), v.get_value()))
    else:
      out.append((p, type(v), None, v))
  return out


def assert_same_flax_graph(a, b):
  assert fnnx.graphdef(a) == fnnx.graphdef(b)
  la, lb = flax_leaves(a), flax_leaves(b)
  assert [x[:3] for x in la] == [x[:3] for x in lb]
  for (p, *_, x), (_, *_, y) in zip(la, lb):
    assert np.asarray(x).dtype == np.asarray(y).dtype, p
  assert_trees_equal([x[3] for x in la], [x[3] for x in lb])


@settings(max_examples=40)
@given(graphs())
def test_from_flax_of_to_flax_is_identity(m):
  assert same_graph(nnx.from_flax(nnx.to_flax(m)), m)


@settings(max_examples=40)
@given(graphs())
def test_to_flax_state_is_the_nnx_state(m):
  ours = [
    (p, type(v).__name__, v.get_metadata())
    for p, v in nnx.state(m).flat_state()
    if isinstance(v, nnx.Variable)
  ]
  f = nnx.to_flax(m)
  theirs = [
    (p, type(v).__name__, v.get_metadata())
    for p, v in fnnx.to_flat_state(fnnx.state(f))
    if isinstance(v, fnnx.Variable)
  ]
  assert ours == theirs
  assert_trees_equal(
    [v.get_value() if isinstance(v, nnx.Variable) else v for _, v in nnx.state(m).flat_state()],
    [
      v.get_value() if isinstance(v, fnnx.Variable) else v
      for _, v in fnnx.to_flat_state(fnnx.state(f))
    ],
  )


@settings(max_examples=40)
@given(graphs())
def test_to_flax_of_from_flax_is_identity(m):
  f = flax_mirror(m)
  assert_same_flax_graph(nnx.to_flax(nnx.from_flax(f)), f)


@settings(max_examples=25)
@given(eqx_models(), st.data())
def test_equinox_through_flax_nnx_is_the_equinox_program(case, data):
  f = nnx.to_flax(nnx.from_eqx(case.model, case.state))
  back = nnx.from_flax(f)
  if case.state is None:
    assert_trees_equal(nnx.to_eqx(back), case.model)
    x = data.draw(eqx_inputs(case))
    assert_trees_equal(f(x), case.apply(case.model, x))
    jitted = fnnx.jit(lambda f, x: f(x))(f, x)
    assert_trees_equal(jitted, eqx.filter_jit(case.apply)(case.model, x))
  else:
    assert_trees_equal(nnx.to_eqx_with_state(back), (case.model, case.state))


@settings(max_examples=20)
@given(st.lists(graphs(max_modules=3), max_size=3))
def test_root_list_round_trip_is_identity(ms):
  root = nnx.List(ms)
  assert same_graph(nnx.from_flax(nnx.to_flax(root)), root)


def _joined(flat):
  return {
    "/".join(map(str, p)): v.get_value() if isinstance(v, (nnx.Variable, fnnx.Variable)) else v
    for p, v in flat
  }


def nnx_loss_and_grads(m, x):
  loss, grads = nnx.value_and_grad(lambda m: m(x).sum())(m)
  return loss, _joined(grads.flat_state())


def flax_loss_and_grads(f, x):
  loss, grads = fnnx.value_and_grad(lambda f: f(x).sum())(f)
  return loss, _joined(fnnx.to_flat_state(grads))


@settings(max_examples=6, deadline=None)
@given(graphs(max_modules=4, dtypes=("float32",)))
def test_a_converted_graph_runs_its_sources_forward_pass_and_gradients(g):
  x = jnp.linspace(-1.0, 1.0, 3)
  f = flax_mirror(g, cls=FCall)
  ref = fnnx.jit(flax_loss_and_grads)(f, x)
  converted = nnx.from_flax(f)
  assert_trees_equal(nnx.jit(nnx_loss_and_grads)(converted, x), ref)
  assert_trees_equal(eqx.filter_jit(nnx_loss_and_grads)(converted, x), ref)

  m = nnx_mirror(g)
  ref = nnx.jit(nnx_loss_and_grads)(m, x)
  assert_trees_equal(fnnx.jit(flax_loss_and_grads)(nnx.to_flax(m), x), ref)
  assert same_graph(nnx.from_flax(nnx.to_flax(m)), m)

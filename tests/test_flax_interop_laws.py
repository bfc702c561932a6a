"""Round-trip laws of the flax.nnx bridge over random graphs (hypothesis).

* ``nnx.from_flax(nnx.to_flax(m))`` is ``m``: GraphDef (classes, static attributes,
  sharing, cycles), Variable types and metadata, bitwise values.
* ``nnx.to_flax(nnx.from_flax(f))`` is ``f`` for a flax.nnx graph built by flax code.
* The flax state of ``nnx.to_flax(m)`` has ``nnx.state(m)``'s paths, types and values.
* Equinox -> flax.nnx -> Equinox is the identity, and the flax.nnx model runs the
  Equinox model's program bitwise, for random Equinox models.
"""

import equinox as eqx
import jax
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


def flax_mirror(node, memo=None):
  """The same graph written with flax.nnx's classes (sharing and cycles kept)."""
  memo = {} if memo is None else memo
  if id(node) in memo:
    return memo[id(node)]
  if isinstance(node, nnx.Variable):
    out = memo[id(node)] = nnx.to_flax(node)
    return out
  if isinstance(node, nnx.List):
    out = memo[id(node)] = fnnx.List([])
    for v in node:
      out.append(flax_mirror(v, memo))
    return out
  if isinstance(node, tuple):
    return tuple(flax_mirror(v, memo) for v in node)
  if isinstance(node, nnx.Module):
    out = memo[id(node)] = FNode()
    for k, v in node_impl(type(node)).children(node):
      v = flax_mirror(v, memo)
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

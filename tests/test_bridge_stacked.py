"""Stacked Equinox layers (built with ``eqx.filter_vmap``, one and two levels deep)
convert exactly with every built-in converter, and scanning over the NNX side
gives Equinox's numbers.

Each example compiles two scans, so hypothesis draws one example per layer and
depth (more with a larger ``max_examples``).
"""

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

enn = eqx.nn


class Layer(NamedTuple):
  """How to build one layer from a key, its inputs, and how to call it."""

  make: Callable[[Any], Any]  # key -> eqx module (or (module, state))
  inputs: Callable[[Any], tuple]  # key -> arguments
  call: Callable[..., Any] = lambda m, *a: m(*a)  # (layer, *args) -> output, both sides
  eqx_call: Callable[..., Any] | None = None  # (layer, state, *args), when it has state


def _tied(key):
  k1, k2 = jax.random.split(key)
  emb, lin = enn.Embedding(5, 3, key=k1), enn.Linear(3, 5, key=k2)
  return enn.Shared((emb, lin), lambda t: t[1].weight, lambda t: t[0].weight)


def _tied_nnx(key):
  rngs = nnx.Rngs(key)
  a, b = nnx.Linear(3, 3, rngs=rngs), nnx.Linear(3, 3, rngs=rngs)
  b.kernel = a.kernel
  return nnx.to_eqx(nnx.Sequential(a, b))  # a SharedRoot


def _call_tied(m):
  emb, lin = m()
  return lin(emb(jnp.array(2)))


def _bn_nnx(m, x):
  return jax.vmap(m, axis_name="batch")(x)


def _bn_eqx(m, state, x):
  return jax.vmap(lambda y: m(y, state)[0], axis_name="batch")(x)


def _normal(*shape):
  return lambda key: (jax.random.normal(key, shape),)


_POOL_INPUT = {1: (2, 6), 2: (2, 5, 5), 3: (2, 4, 4, 4)}

LAYERS: dict[type, Layer] = {
  enn.Linear: Layer(lambda k: enn.Linear(3, 4, key=k), _normal(3)),
  enn.Conv1d: Layer(lambda k: enn.Conv1d(2, 3, 3, key=k), _normal(2, 6)),
  enn.Conv2d: Layer(lambda k: enn.Conv2d(2, 3, 3, padding=1, key=k), _normal(2, 5, 5)),
  enn.Conv3d: Layer(lambda k: enn.Conv3d(2, 3, 2, key=k), _normal(2, 4, 4, 4)),
  enn.Embedding: Layer(lambda k: enn.Embedding(6, 4, key=k), lambda k: (jnp.array(4),)),
  enn.LayerNorm: Layer(lambda k: enn.LayerNorm(4), _normal(4)),
  enn.RMSNorm: Layer(lambda k: enn.RMSNorm(4), _normal(4)),
  enn.BatchNorm: Layer(
    lambda k: enn.make_with_state(enn.BatchNorm)(3, "batch", mode="batch", inference=True),
    _normal(5, 3),
    call=_bn_nnx,
    eqx_call=_bn_eqx,
  ),
  enn.Dropout: Layer(
    lambda k: enn.Dropout(0.5),
    lambda k: (jax.random.normal(k, (6,)), jax.random.key(1)),
    call=lambda m, x, key: m(x, key=key),
  ),
  enn.Sequential: Layer(
    lambda k: enn.Sequential(
      [enn.Linear(3, 4, key=k), enn.Lambda(jnp.tanh), enn.Linear(4, 2, key=k)]
    ),
    _normal(3),
  ),
  enn.Lambda: Layer(lambda k: enn.Lambda(jnp.tanh), _normal(3)),
  enn.Identity: Layer(lambda k: enn.Identity(), _normal(3)),
  enn.MLP: Layer(lambda k: enn.MLP(3, 2, 4, 2, key=k), _normal(3)),
  enn.MultiheadAttention: Layer(
    lambda k: enn.MultiheadAttention(2, 8, key=k),
    lambda k: tuple(jax.random.normal(k, (3, 4, 8))),
  ),
  enn.GRUCell: Layer(lambda k: enn.GRUCell(3, 4, key=k), lambda k: (jnp.ones(3), jnp.ones(4))),
  enn.LSTMCell: Layer(
    lambda k: enn.LSTMCell(3, 4, key=k), lambda k: (jnp.ones(3), (jnp.ones(4), jnp.zeros(4)))
  ),
  enn.Shared: Layer(_tied, lambda k: (), call=_call_tied),
  nnx.bridge.SharedRoot: Layer(_tied_nnx, _normal(3)),
}
for _n, _shape in _POOL_INPUT.items():
  LAYERS[getattr(enn, f"MaxPool{_n}d")] = Layer(
    lambda k, n=_n: getattr(enn, f"MaxPool{n}d")(2, 1), _normal(*_shape)
  )
  LAYERS[getattr(enn, f"AvgPool{_n}d")] = Layer(
    lambda k, n=_n: getattr(enn, f"AvgPool{n}d")(2, 2), _normal(*_shape)
  )


def _builtin_eqx_types() -> set[type]:
  return {
    c.eqx_type
    for c in nnx.bridge.registered()
    if c.to_nnx is not None
    and (c.eqx_type.__module__.startswith("equinox") or c.eqx_type is nnx.bridge.SharedRoot)
  }


def test_every_registered_layer_is_covered():
  assert _builtin_eqx_types() <= set(LAYERS), _builtin_eqx_types() - set(LAYERS)


@eqx.filter_jit  # one compiled program builds the stack
def _stacked(make: Callable, shape: tuple, key: Any) -> Any:
  keys = jax.random.split(key, math.prod(shape)).reshape(shape)
  for _ in shape:
    make = eqx.filter_vmap(make)
  return make(keys)


def _over_stack(fn: Callable, tree: Any, shape: tuple) -> Any:
  """``fn`` on each layer of the stacked ``tree``: ``lax.scan`` over the first
  stack axis, ``vmap`` over a second."""

  def one(t):
    if len(shape) == 1:
      return fn(t)
    return jax.vmap(fn, axis_size=shape[1])(t)

  return jax.lax.scan(lambda c, t: (c, one(t)), None, tree, length=shape[0])[1]


def _eqx_outputs(layer: Layer, m: Any, state: Any, args: tuple, shape: tuple) -> Any:
  dyn, static = eqx.partition(m, eqx.is_array)

  def fn(t):
    d, s = t
    e = eqx.combine(d, static)
    return layer.call(e, *args) if layer.eqx_call is None else layer.eqx_call(e, s, *args)

  return jax.jit(lambda t: _over_stack(fn, t, shape))((dyn, state))


def _nnx_outputs(layer: Layer, n: Any, args: tuple, shape: tuple) -> Any:
  graphdef, state = nnx.split(n)
  fn = lambda s: layer.call(nnx.merge(graphdef, s), *args)  # noqa: E731
  return jax.jit(lambda s: _over_stack(fn, s, shape))(state)


STACKS = {1: st.sampled_from([(2,), (3,), (1,)]), 2: st.sampled_from([(2, 3), (3, 1), (1, 2)])}


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("eqx_type", list(LAYERS), ids=lambda t: t.__name__)
@settings(max_examples=1, deadline=None)  # 25 layers x 2 depths, each compiles two scans
@given(data=st.data())
def test_stacked_layer_round_trips_and_scans(eqx_type, depth, data):
  layer = LAYERS[eqx_type]
  shape = data.draw(STACKS[depth], label="stack")
  key = jax.random.key(data.draw(st.integers(0, 2**16), label="seed"))
  made = _stacked(layer.make, shape, key)
  m, state = made if isinstance(made, tuple) else (made, None)
  assert type(m) is eqx_type

  n = nnx.from_eqx(m, state)
  # The built-in converter handles the stack itself (no generic fallback).
  assert not isinstance(n, nnx.bridge.EqxModule)
  if state is None:
    back = nnx.to_eqx(n)
    assert eqx.tree_equal(back, m)
    assert_trees_equal(back, m)
  else:
    back = nnx.to_eqx_with_state(n)
    assert eqx.tree_equal(back, (m, state))
    assert_trees_equal(back, (m, state))

  args = layer.inputs(jax.random.fold_in(key, 1))
  expected = _eqx_outputs(layer, m, state, args, shape)
  assert_trees_close(_nnx_outputs(layer, n, args, shape), expected)


def test_stacked_attention_keeps_per_layer_head_layout():
  """The issue's example: the stacked MultiheadAttention's kernels are stacks of
  the one-layer head kernels, not a reshaped mix of layers."""
  keys = jax.random.split(jax.random.key(0), 2)
  mha = eqx.filter_vmap(lambda k: enn.MultiheadAttention(2, 16, key=k))(keys)
  n = nnx.from_eqx(mha)
  assert n.query_proj.weight.value.shape == (2, 16, 16)
  first = nnx.from_eqx(enn.MultiheadAttention(2, 16, key=keys[0]))
  assert_trees_equal(n.query_proj.weight.value[0], first.query_proj.weight.value)
  assert_trees_equal(n.output_proj.weight.value[0], first.output_proj.weight.value)
  back = nnx.to_eqx(n)
  assert back.query_proj.weight.shape == (2, 16, 16)
  assert eqx.tree_equal(back, mha)


def test_inconsistent_stack_defers_to_generic_conversion():
  """Arrays that do not share their leading axes are no stack: generic conversion."""
  keys = jax.random.split(jax.random.key(0), 2)
  lin = eqx.filter_vmap(lambda k: enn.Linear(3, 4, key=k))(keys)
  odd = eqx.tree_at(lambda m: m.bias, lin, lin.bias[0])
  n = nnx.from_eqx(odd)
  assert isinstance(n, nnx.bridge.EqxModule)
  assert_trees_equal(nnx.to_eqx(n), odd)


def test_nnx_stacked_linear_becomes_stacked_eqx_linear():
  """``nnx.vmap``-made layers keep their stacked kernel ``(n, in, out)`` by default, and
  convert to Equinox's stacked layers (weight ``(n, out, in)``) when asked for."""

  @nnx.vmap(in_axes=0, out_axes=0)
  def make(key):
    return nnx.Linear(3, 4, rngs=nnx.Rngs(key))

  n = make(jax.random.split(jax.random.key(0), 2))
  kept = nnx.to_eqx(n)
  assert type(kept) is nnx.bridge.KernelLinear and kept.kernel.shape == (2, 3, 4)
  e = nnx.to_eqx(n, native=True)
  assert type(e) is enn.Linear and e.weight.shape == (2, 4, 3)
  assert_trees_equal(e.weight, jnp.swapaxes(n.kernel.value, -1, -2))
  x = jnp.ones(3)
  assert_trees_close(
    eqx.filter_vmap(lambda m: m(x))(e),
    jax.vmap(lambda k, b: x @ k + b)(n.kernel.value, n.bias.value),
  )


class Encoder(eqx.Module):
  """A model that scans over stacked layers, as Equinox protein language models do."""

  attention: enn.MultiheadAttention
  norm: enn.LayerNorm

  def __init__(self, key):
    keys = jax.random.split(key, 3)
    self.attention = eqx.filter_vmap(lambda k: enn.MultiheadAttention(2, 8, key=k))(keys)
    self.norm = eqx.filter_vmap(lambda k: enn.LayerNorm(8))(keys)

  def __call__(self, x):
    dynamic, static = eqx.partition((self.attention, self.norm), eqx.is_array)

    def body(h, d):
      attention, norm = eqx.combine(d, static)
      return jax.vmap(norm)(h + attention(h, h, h)), None

    return jax.lax.scan(body, x, dynamic)[0]


def test_model_scanning_over_stacked_layers_converts():
  e = Encoder(jax.random.key(0))
  m = nnx.from_eqx(e)
  assert type(m.attention) is nnx.bridge.MultiheadAttention
  assert m.attention.query_proj.weight.value.shape == (3, 8, 8)
  assert eqx.tree_equal(nnx.to_eqx(m), e)
  x = jax.random.normal(jax.random.key(1), (5, 8))
  assert_trees_equal(nnx.jit(lambda m, x: m(x))(m, x), eqx.filter_jit(lambda e, x: e(x))(e, x))

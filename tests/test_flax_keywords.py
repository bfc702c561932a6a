"""flax.nnx 0.12.12 keyword arguments nnx_eqx accepts as flax does (see
tests/test_flax_surface.py for the automatic check of every signature).

``grad``/``value_and_grad(reduce_axes=)``, ``Optimizer(graph=)``,
``PReLU(promote_dtype=, negative_slope_metadata=)``, ``RMSNorm``'s positional
``mask`` and the ``graph=``/``graph_updates=`` keywords the transforms show in their
signatures.
"""

import inspect

import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal


@pytest.mark.parametrize("transform", [nnx.grad, nnx.value_and_grad])
def test_reduce_axes_empty_is_accepted_and_other_values_raise_as_in_flax(transform):
  model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
  x = jnp.ones((3, 2))
  loss = lambda m: m(x).sum()  # noqa: E731
  assert_trees_equal(transform(loss, reduce_axes=())(model), transform(loss)(model))
  with pytest.raises(NotImplementedError, match=r"reduce_axes=\('batch',\).*jax.lax.psum"):
    transform(loss, reduce_axes=("batch",))


class _Shared(nnx.Module):
  def __init__(self):
    self.a = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    self.b = self.a


def test_optimizer_graph_keyword():
  model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
  grads = nnx.grad(lambda m: m(jnp.ones((1, 2))).sum())(model)
  for graph in (None, True, False):
    m = nnx.clone(model)
    opt = nnx.Optimizer(m, optax.sgd(0.5), wrt=nnx.Param, graph=graph)
    assert opt.graph is graph
    opt.update(m, grads)
    assert_trees_close(m.bias.value, model.bias.value - 0.5)
  # Tree mode rejects a model holding one Variable at two paths (flax's tree-mode state).
  with pytest.raises(nnx.SharedReferenceError, match="Duplicate Param"):
    nnx.Optimizer(_Shared(), optax.sgd(0.1), wrt=nnx.Param, graph=False)
  shared = _Shared()
  opt = nnx.Optimizer(shared, optax.sgd(0.1), wrt=nnx.Param)  # graph mode: sharing is fine
  with nnx.set_graph_mode(False), pytest.raises(nnx.SharedReferenceError):
    nnx.Optimizer(shared, optax.sgd(0.1), wrt=nnx.Param)  # the mode's default is read


def test_prelu_negative_slope_metadata_and_promote_dtype():
  layer = nnx.PReLU(0.25, negative_slope_metadata={"sharding": ("x",)})
  assert layer.negative_slope.get_metadata()["sharding"] == ("x",)
  calls = []

  def promote(args, *, dtype=None):
    calls.append(dtype)
    return tuple(jnp.asarray(a, dtype) for a in args)

  x = jnp.array([-2.0, 4.0])
  layer = nnx.PReLU(0.25, dtype=jnp.bfloat16, promote_dtype=promote)
  y = layer(x)
  assert calls == [jnp.bfloat16] and y.dtype == jnp.bfloat16
  assert_trees_close(y.astype(jnp.float32), jnp.array([-0.5, 4.0]))
  # Without dtype the slope follows the input's dtype and promote_dtype is not called.
  y16 = nnx.PReLU(0.25, promote_dtype=promote)(x.astype(jnp.float16))
  assert calls == [jnp.bfloat16] and y16.dtype == jnp.float16


def test_rms_norm_takes_mask_positionally_as_flax():
  norm = nnx.RMSNorm(4, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(0), (2, 4))
  mask = jnp.array([[True, True, False, False]] * 2)
  assert_trees_equal(norm(x, mask), norm(x, mask=mask))


@pytest.mark.parametrize("name", ["jit", "vmap", "cond", "remat", "scan", "grad", "eval_shape"])
def test_transform_signatures_show_the_graph_keywords(name):
  params = inspect.signature(getattr(nnx, name)).parameters
  for keyword in ("graph", "graph_updates"):
    assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY
    assert params[keyword].default is None


def test_multi_head_attention_dot_general_options_reach_the_projections():
  calls = []

  def counting(name):
    def dot_general(lhs, rhs, *args, **kwargs):
      calls.append(name)
      return jax.lax.dot_general(lhs, rhs, *args, **kwargs)

    return dot_general

  class OutDot:  # flax's *_dot_general_cls: instantiated at each call
    def __call__(self, lhs, rhs, *args, **kwargs):
      return counting("out_cls")(lhs, rhs, *args, **kwargs)

  x = jax.random.normal(jax.random.key(1), (2, 3, 8))
  plain = nnx.MultiHeadAttention(2, 8, rngs=nnx.Rngs(0), decode=False)
  mha = nnx.MultiHeadAttention(
    2, 8, qkv_dot_general=counting("qkv"), out_dot_general=counting("out"), rngs=nnx.Rngs(0)
  )
  assert_trees_equal(mha(x), plain(x))
  assert calls == ["qkv", "qkv", "qkv", "out"]
  calls.clear()
  mha = nnx.MultiHeadAttention(
    2,
    8,
    qkv_dot_general_cls=lambda: counting("qkv_cls"),
    out_dot_general_cls=OutDot,
    rngs=nnx.Rngs(0),
  )
  assert_trees_equal(mha(x), plain(x))
  assert calls == ["qkv_cls"] * 3 + ["out_cls"]
  assert mha.out.dot_general_cls is OutDot and mha.qkv_dot_general is None


def test_state_functions_take_flax_parameter_names():
  state = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
  flat = nnx.to_flat_state(state)
  assert_trees_equal(nnx.from_flat_state(flat_state=flat), state)
  # to_pure_dict(extract_fn=): each leaf (a Variable here) goes through it, as in flax.
  shapes = nnx.to_pure_dict(state, extract_fn=lambda v: (type(v).__name__, v.value.shape))
  assert shapes == {"bias": ("Param", (3,)), "kernel": ("Param", (2, 3))}
  assert_trees_equal(nnx.to_pure_dict(state, None), nnx.to_pure_dict(state))
  pairs = [(("b",), 1), (("a", 1), 2), (("a", 0), 3)]
  assert nnx.graphlib.FlatState(pairs, sort=True).paths == (("a", 0), ("a", 1), ("b",))
  assert nnx.graphlib.FlatState(pairs, sort=False).paths == (("b",), ("a", 1), ("a", 0))
  assert nnx.graphlib.is_node_type(x=nnx.Linear) and not nnx.graphlib.is_node_type(x=int)

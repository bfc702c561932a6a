"""graph=/graph_updates= keywords, set_graph_mode, nnx.compat, DiffState, to_flat_state."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


def _model():
  return nnx.Linear(2, 3, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("graph", [True, False, None])
def test_graph_api_accepts_graph_keywords(graph):
  m = _model()
  g, s = nnx.split(m, graph=graph)
  m2 = nnx.merge(g, s, graph=graph)
  assert sorted(nnx.state(m2, graph=graph)) == ["bias", "kernel"]
  assert nnx.graphdef(m, graph=graph) == g
  assert nnx.clone(m, graph=graph) is not m


@pytest.mark.parametrize("graph_updates", [True, False])
def test_transforms_accept_graph_keywords(graph_updates):
  m = _model()

  @nnx.jit(graph=True, graph_updates=graph_updates)
  def f(m, x):
    return nnx.grad(lambda m: m(x).sum(), graph=True)(m)

  grads = f(m, jnp.ones((1, 2)))
  assert grads["kernel"].value.shape == (2, 3)


def test_set_graph_mode_call_context_and_decorator():
  assert nnx.set_graph_mode.current_value() is True
  with nnx.set_graph_mode(False):
    assert nnx.get_graph_mode() is False
  assert nnx.get_graph_mode() is True

  @nnx.set_graph_updates(False)
  def inner():
    return nnx.set_graph_updates.current_value()

  assert inner() is False and nnx.set_graph_updates.current_value() is True
  with pytest.raises(TypeError, match="expects a bool"):
    nnx.set_graph_mode("yes")


def test_compat_split_keeps_shared_variables():
  v = nnx.Param(jnp.ones(2))
  graphdef, state = nnx.compat.split([v, v])
  assert len(nnx.to_flat_state(state)) == 1
  a, b = nnx.merge(graphdef, state)
  assert a is b


def test_diff_state_selects_the_differentiated_variables():
  lora = nnx.LoRA(2, 1, 3, base_module=_model(), rngs=nnx.Rngs(1))
  grads = nnx.grad(lambda m: m(jnp.ones((1, 2))).sum(), argnums=nnx.DiffState(0, nnx.LoRAParam))(
    lora
  )
  assert sorted(p for p, _ in nnx.to_flat_state(grads)) == [("lora_a",), ("lora_b",)]


def test_diff_states_give_each_argument_its_own_filter():
  m1, m2 = _model(), _model()
  kernel, bias = nnx.PathContains("kernel"), nnx.PathContains("bias")
  argnums = (nnx.DiffState(0, kernel), nnx.DiffState(1, bias))
  x = jnp.ones((1, 2))
  g1, g2 = nnx.grad(lambda a, b: (a(x) * b(x)).sum(), argnums=argnums)(m1, m2)
  assert [p for p, _ in nnx.to_flat_state(g1)] == [("kernel",)]
  assert [p for p, _ in nnx.to_flat_state(g2)] == [("bias",)]
  with pytest.raises(ValueError, match="names an argument twice"):
    nnx.grad(lambda a: 0.0, argnums=(nnx.DiffState(0, nnx.Param), 0))


def test_clone_copies_a_tuple_of_states():
  s1, s2 = nnx.state(_model(), nnx.Param, ...)
  c1, c2 = nnx.clone((s1, s2))
  assert c1["kernel"] is not s1["kernel"]
  assert (c1["kernel"].value == s1["kernel"].value).all()


def test_flat_state_round_trip():
  s = nnx.state(_model())
  assert nnx.from_flat_state(nnx.to_flat_state(s)) == s
  with pytest.raises(TypeError, match="expects a State"):
    nnx.to_flat_state(3)


def test_unpack_bundles_the_graphdef_and_merges_back():
  model = nnx.BatchNorm(2, rngs=nnx.Rngs(0))
  params, rest = nnx.unpack(model, nnx.Param, ...)
  assert isinstance(params, nnx.GraphState) and "scale" in params and "mean" in rest
  params["scale"] = params["scale"].replace(jnp.zeros(2))
  again = nnx.merge(params, rest)
  assert isinstance(again, nnx.BatchNorm) and float(again.scale.value.sum()) == 0.0
  doubled = jax.tree.map(lambda x: 2 * x, params)
  assert isinstance(doubled, nnx.GraphState)
  nnx.update(model, doubled)
  assert float(model.bias.value.sum()) == 0.0


def test_merge_rejects_mixed_or_mismatched_graph_states():
  gs = nnx.unpack(_model())
  with pytest.raises(nnx.GraphStructureError, match="Expected GraphState object"):
    nnx.merge(gs, nnx.state(_model()))
  with pytest.raises(nnx.GraphStructureError, match="GraphDef must be the same"):
    nnx.merge(gs, nnx.unpack(nnx.BatchNorm(2, rngs=nnx.Rngs(0))))


_DEFAULT_MD = {"hijax": False, "ref": False, "eager_sharding": True}
"""What get_metadata() reports besides the given metadata (as flax.nnx 0.12)."""


def test_variable_metadata_accessors():
  p = nnx.Param(jnp.ones(2), tag="a")
  assert p.get_metadata("tag") == "a" and p.get_metadata() == {"tag": "a", **_DEFAULT_MD}
  with pytest.raises(KeyError, match="no metadata 'x'"):
    p.get_metadata("x")
  p.set_metadata({"sharding": ("d",)})
  assert p.get_metadata() == {"sharding": ("d",), **_DEFAULT_MD}
  with pytest.raises(TypeError, match="not a mix"):
    p.set_metadata("a", b=1)
  p.set_raw_value(jnp.zeros(2))
  assert float(p.get_raw_value().sum()) == 0.0

"""Equinox's structural idioms on NNX modules: ``eqx.tree_at`` surgery, the FAQ's
freezing recipe, ``is_leaf`` layer swaps and key paths, over native modules,
``from_eqx`` models and shared-weight graphs; where an Equinox model is the
natural counterpart, the idiom runs on it too and the results are compared.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_trees_close, assert_trees_equal, graphs, same_graph


class MLP(nnx.Module):
  def __init__(self, rngs: nnx.Rngs):
    self.l1 = nnx.Linear(2, 3, rngs=rngs)
    self.l2 = nnx.Linear(3, 2, rngs=rngs)

  def __call__(self, x):
    return self.l2(jax.nn.relu(self.l1(x)))


class Tied(nnx.Module):
  """An embedding whose table is also the output projection (one Param, two paths)."""

  def __init__(self, rngs: nnx.Rngs):
    self.embed = nnx.Embed(5, 3, rngs=rngs)
    self.head = nnx.Module()
    self.head.table = self.embed.embedding
    self.alias = self.embed  # a shared submodule

  def __call__(self, ids):
    return self.embed(ids) @ self.head.table[...].T


def _eqx_mlp():
  return eqx.nn.MLP(2, 2, 3, 1, key=jax.random.key(0))


def _models():
  return {
    "native": MLP(nnx.Rngs(0)),
    "from_eqx": nnx.from_eqx(_eqx_mlp()),
  }


def _first_linear(m):
  return m.l1 if hasattr(m, "l1") else m.layers[0]


def _leaves_equal(a, b):
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  assert len(la) == len(lb)
  assert_trees_equal(la, lb)


@pytest.mark.parametrize("name", ["native", "from_eqx"])
def test_tree_at_replaces_a_variable_with_a_variable_or_an_array(name):
  m = _models()[name]
  before = jax.tree.leaves(m)
  lin = _first_linear(m)
  attr = "kernel" if hasattr(lin, "kernel") else "weight"
  old = getattr(lin, attr)
  new = nnx.Param(jnp.zeros(old.shape))
  out = eqx.tree_at(lambda t: getattr(_first_linear(t), attr), m, new)
  got = getattr(_first_linear(out), attr)
  assert type(got) is nnx.Param  # a pytree node put in is rebuilt (as in Equinox): equal, not `is`
  assert_trees_equal(got[...], new[...])
  _leaves_equal(m, before)  # the input is left unchanged
  assert getattr(_first_linear(m), attr) is old
  raw = eqx.tree_at(lambda t: getattr(_first_linear(t), attr), m, jnp.ones(old.shape))
  assert type(getattr(_first_linear(raw), attr)) is not nnx.Param  # the node is replaced
  # replacing the value keeps the Variable (and its type and metadata)
  kept = eqx.tree_at(lambda t: getattr(_first_linear(t), attr).value, m, jnp.ones(old.shape))
  assert type(getattr(_first_linear(kept), attr)) is nnx.Param
  assert_trees_equal(getattr(_first_linear(kept), attr)[...], jnp.ones(old.shape))


def test_tree_at_replaces_a_submodule_a_tuple_of_nodes_and_with_replace_fn():
  m = MLP(nnx.Rngs(0))
  new = nnx.Linear(3, 2, rngs=nnx.Rngs(5))
  out = eqx.tree_at(lambda t: t.l2, m, new)
  assert same_graph(out.l2, new) and out.l1 is not m.l1
  assert_trees_equal(out.l1.kernel[...], m.l1.kernel[...])
  out = eqx.tree_at(lambda t: (t.l1.bias, t.l2.bias), m, replace_fn=lambda b: b + 1)
  assert_trees_equal(out.l1.bias[...], m.l1.bias[...] + 1)
  assert_trees_equal(out.l2.bias[...], m.l2.bias[...] + 1)
  assert type(out.l1.bias) is not nnx.Param  # replace_fn got the Param and returned an array
  assert_trees_equal(out.l1.kernel[...], m.l1.kernel[...])
  # the same on the Equinox model: the same number of leaves changes
  e = _eqx_mlp()
  e_out = eqx.tree_at(lambda t: (t.layers[0].bias, t.layers[1].bias), e, replace_fn=lambda b: b + 1)
  arrays = lambda t: jax.tree.leaves(eqx.filter(t, eqx.is_array))  # noqa: E731
  changed = lambda a, b: sum(not jnp.array_equal(x, y) for x, y in zip(arrays(a), arrays(b)))  # noqa: E731
  assert changed(out, m) == changed(e_out, e) == 2


def test_tree_at_on_a_shared_node_replaces_it_everywhere():
  t = Tied(nnx.Rngs(0))
  new = nnx.Param(jnp.zeros((5, 3)))
  for where in (lambda m: m.head.table, lambda m: m.embed.embedding):
    out = eqx.tree_at(where, t, new)
    assert out.head.table is out.embed.embedding
    assert_trees_equal(out.embed.embedding[...], new[...])
    assert out.alias is out.embed
  out = eqx.tree_at(lambda m: m.alias, t, nnx.Embed(5, 3, rngs=nnx.Rngs(1)))
  assert out.alias is out.embed
  # a later path refers to the first one: head.table follows alias.embedding
  assert out.head.table is out.embed.embedding
  assert t.head.table is t.embed.embedding  # the input is untouched


def test_freeze_recipe_from_the_equinox_faq():
  """The FAQ's "How do I freeze a layer?", as written, on an NNX module and on Equinox."""

  def frozen_step(model, where):
    filter_spec = jax.tree_util.tree_map(lambda _: False, model)
    filter_spec = eqx.tree_at(where, filter_spec, replace=(True, True))

    @eqx.filter_grad
    def loss(diff, static, x):
      return jnp.sum(eqx.combine(diff, static)(x) ** 2)

    diff, static = eqx.partition(model, filter_spec)
    return loss(diff, static, jnp.ones(2))

  g = frozen_step(MLP(nnx.Rngs(0)), lambda m: (m.l2.kernel, m.l2.bias))
  assert g.l1.kernel.value is None and g.l1.bias.value is None
  assert g.l2.kernel.value.shape == (3, 2) and g.l2.bias.value.shape == (2,)
  e = _eqx_mlp()
  ge = frozen_step(e, lambda m: (m.layers[1].weight, m.layers[1].bias))
  assert len(jax.tree.leaves(g)) == len(jax.tree.leaves(ge)) == 2
  c = nnx.from_eqx(e)
  w = "weight" if hasattr(c.layers[1], "weight") else "kernel"
  gc = frozen_step(c, lambda m: (getattr(m.layers[1], w), m.layers[1].bias))
  assert len(jax.tree.leaves(gc)) == 2
  if w == "weight":  # the converted layer keeps Equinox's layout: the same program, same bits
    assert_trees_equal(gc.layers[1].weight[...], ge.layers[1].weight)
    assert_trees_equal(gc.layers[1].bias[...], ge.layers[1].bias)


def test_is_leaf_sees_modules_and_variables_and_swaps_layers():
  m = MLP(nnx.Rngs(0))
  is_linear = lambda x: isinstance(x, nnx.Linear)  # noqa: E731
  found = jax.tree.leaves(m, is_leaf=is_linear)
  assert found == [m.l1, m.l2] and found[0] is m.l1  # the model's own objects
  params = jax.tree.leaves(m, is_leaf=lambda x: isinstance(x, nnx.Variable))
  assert [type(p) for p in params] == [nnx.Param] * 4

  class Scaled(nnx.Module):  # a LoRA-style wrapper
    def __init__(self, inner):
      self.inner = inner
      self.scale = nnx.Param(jnp.ones(()))

    def __call__(self, x):
      return self.inner(x) * self.scale[...]

  swapped = jax.tree.map(lambda x: Scaled(x) if is_linear(x) else x, m, is_leaf=is_linear)
  assert isinstance(swapped.l1, Scaled) and swapped.l1.inner is m.l1
  assert_trees_equal(swapped(jnp.ones(2)), m(jnp.ones(2)))
  e = _eqx_mlp()
  e_found = jax.tree.leaves(e, is_leaf=lambda x: isinstance(x, eqx.nn.Linear))
  c_found = jax.tree.leaves(nnx.from_eqx(e), is_leaf=lambda x: isinstance(x, nnx.Module))
  assert len([x for x in e_found if isinstance(x, eqx.nn.Linear)]) == 2
  assert len([x for x in c_found if isinstance(x, nnx.Module)]) == 1  # the MLP itself


def test_key_paths_use_jax_key_classes_and_match_the_state_paths():
  m = Tied(nnx.Rngs(0))
  flat = jax.tree_util.tree_flatten_with_path(m)[0]
  own = (jax.tree_util.GetAttrKey, jax.tree_util.SequenceKey, jax.tree_util.DictKey)
  assert all(type(k) in own for path, _ in flat for k in path)
  # one leaf per distinct Variable, at its first path, as in the State
  names = [tuple(k.name for k in path[:-1]) for path, _ in flat]
  assert names == [p for p, _ in nnx.state(m).flat_state()]


def test_filter_jit_and_grad_keep_ties_and_accumulate_the_gradient():
  t = Tied(nnx.Rngs(0))
  ids = jnp.array([0, 3])
  counter = TraceCounter()

  @eqx.filter_jit
  @counter
  def grad(model):
    return eqx.filter_grad(lambda m: jnp.sum(m(ids)))(model)

  g = grad(t)
  grad(t)
  assert counter.count == 1
  assert g.head.table is g.embed.embedding and g.alias is g.embed
  g_nnx = nnx.grad(lambda m: jnp.sum(m(ids)))(t)
  assert_trees_equal(g.embed.embedding[...], g_nnx["alias"]["embedding"][...])


def test_optax_training_over_a_tied_model_keeps_the_tie():
  t = Tied(nnx.Rngs(0))
  opt = optax.sgd(1e-2, momentum=0.9)  # (adam's bias correction needs standard promotion)
  state = opt.init(eqx.filter(t, eqx.is_inexact_array))
  ids = jnp.array([1, 2])
  for _ in range(2):
    grads = eqx.filter_grad(lambda m: jnp.sum(m(ids) ** 2))(t)
    updates, state = opt.update(grads, state)
    t = eqx.apply_updates(t, updates)
  assert t.head.table is t.embed.embedding and t.alias is t.embed


def _getter(path):
  def get(m):
    for k in path:
      m = m[k] if isinstance(k, int) else getattr(m, k)
    return m

  return get


@given(graphs(), st.data())
@settings(max_examples=30)
def test_tree_at_law(m, data):
  """After ``tree_at(where, m, r)``: ``where`` reads ``r``, the other leaves are
  unchanged, sharing is kept, and ``m`` is untouched."""
  variables = [
    (path, v)
    for path, v in jax.tree_util.tree_flatten_with_path(
      m, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )[0]
    if isinstance(v, nnx.Variable)
  ]
  if not variables:
    return
  path, old = data.draw(st.sampled_from(variables))
  keys = tuple(k.name if hasattr(k, "name") else k.idx for k in path)
  graphdef_before = nnx.graphdef(m)
  leaves_before = jax.tree.leaves(m)
  r = old.copy()
  r.value = jnp.full_like(old.value, 7)
  out = eqx.tree_at(_getter(keys), m, r)
  got = _getter(keys)(out)
  assert type(got) is type(r) and got.get_metadata() == r.get_metadata()
  assert_trees_equal(got[...], r[...])
  assert nnx.graphdef(out) == graphdef_before  # the same sharing (r takes old's place)
  n = len(jax.tree_util.tree_flatten_with_path(m)[0])
  others = [(p, x) for p, x in jax.tree_util.tree_flatten_with_path(out)[0] if p[:-1] != path]
  originals = [(p, x) for p, x in jax.tree_util.tree_flatten_with_path(m)[0] if p[:-1] != path]
  assert len(others) == len(originals) == n - 1
  assert [p for p, _ in others] == [p for p, _ in originals]
  assert_trees_equal([x for _, x in others], [x for _, x in originals])
  assert nnx.graphdef(m) == graphdef_before and _getter(keys)(m) is old
  assert_trees_equal(jax.tree.leaves(m), leaves_before)


@given(graphs())
@settings(max_examples=30)
def test_flatten_unflatten_law(m):
  """Unflattening a flattened graph gives the same graph (sharing and cycles kept)."""
  leaves, treedef = jax.tree.flatten(m)
  assert len(leaves) == len(nnx.state(m).flat_state())
  assert same_graph(jax.tree.unflatten(treedef, leaves), m)
  assert same_graph(jax.tree.map(lambda x: x, m), m)


def _array_for(v):
  return jnp.full(jnp.shape(v[...]), 0.5, jnp.result_type(v[...]))


_LAYERS = {
  "Linear": (lambda: nnx.Linear(3, 2, rngs=nnx.Rngs(0)), jnp.ones((4, 3))),
  "Conv": (lambda: nnx.Conv(2, 3, (3,), rngs=nnx.Rngs(0)), jnp.ones((1, 5, 2))),
  "Embed": (lambda: nnx.Embed(4, 3, rngs=nnx.Rngs(0)), jnp.array([0, 3])),
  "LayerNorm": (lambda: nnx.LayerNorm(3, rngs=nnx.Rngs(0)), jnp.arange(6.0).reshape(2, 3)),
  "BatchNorm (eval)": (
    lambda: nnx.BatchNorm(3, use_running_average=True, rngs=nnx.Rngs(0)),
    jnp.arange(6.0).reshape(2, 3),
  ),
  "LoRA": (lambda: nnx.LoRA(3, 2, 4, rngs=nnx.Rngs(0)), jnp.ones((2, 3))),
}


@pytest.mark.parametrize("name", sorted(_LAYERS))
def test_layers_compute_with_arrays_put_where_their_variables_were(name):
  """``eqx.tree_at(lambda m: m.kernel, m, array)`` replaces the Variable node by
  the array; the layer computes with it, exactly as with a Variable holding the
  same array (flax.nnx 0.12's layers behave so too)."""
  make, x = _LAYERS[name]
  m = make()
  variables = jax.tree.leaves(m, is_leaf=lambda v: isinstance(v, nnx.Variable))
  variables = [v for v in variables if isinstance(v, nnx.Variable)]
  arrays = [_array_for(v) for v in variables]
  with_arrays = eqx.tree_at(lambda t: _variables(t), m, arrays)
  with_values = eqx.tree_at(lambda t: [v.value for v in _variables(t)], m, arrays)
  assert not any(isinstance(v, nnx.Variable) for v in _variables_or_arrays(with_arrays))
  assert_trees_equal(with_arrays(x), with_values(x))


def _variables(m):
  leaves = jax.tree.leaves(m, is_leaf=lambda v: isinstance(v, nnx.Variable))
  return [v for v in leaves if isinstance(v, nnx.Variable)]


def _variables_or_arrays(m):
  return jax.tree.leaves(m, is_leaf=lambda v: isinstance(v, nnx.Variable))


@pytest.mark.parametrize(
  "make, x",
  [
    (lambda k: eqx.nn.MLP(2, 2, 4, 2, key=k), jnp.ones(2)),
    (lambda k: eqx.nn.Conv1d(2, 3, 3, key=k), jnp.ones((2, 5))),
    (lambda k: eqx.nn.Embedding(4, 3, key=k), jnp.array(2)),
  ],
  ids=["MLP", "Conv1d", "Embedding"],
)
def test_equinox_surgery_on_a_converted_model_matches_the_same_surgery_in_equinox(make, x):
  """Equinox's surgery idiom (replace a layer's weight by an array) on a
  converted model gives the Equinox model's output after the same surgery, and
  the result converts back."""
  e = make(jax.random.key(0))

  def weight(m):
    return (m.layers[-1] if hasattr(m, "layers") else m).weight

  new_weight = jnp.full(weight(e).shape, 0.25)
  expected = eqx.tree_at(weight, e, new_weight)
  got = eqx.tree_at(weight, nnx.from_eqx(e), new_weight)
  assert_trees_equal(got(x), expected(x))
  assert_trees_equal(nnx.to_eqx(got)(x), expected(x))


@pytest.mark.parametrize(
  "make, nnx_name, eqx_name",
  [
    (lambda: eqx.nn.Embedding(4, 3, key=jax.random.key(0)), "embedding", "weight"),
    (lambda: eqx.nn.LayerNorm(3), "scale", "weight"),
    (lambda: eqx.nn.RMSNorm(3), "scale", "weight"),
    (lambda: eqx.nn.BatchNorm(3, "batch", mode="batch"), "scale", "weight"),
    (lambda: eqx.nn.Dropout(0.3), "rate", "p"),
  ],
  ids=["Embedding", "LayerNorm", "RMSNorm", "BatchNorm", "Dropout"],
)
def test_converted_layers_answer_to_equinox_field_names(make, nnx_name, eqx_name):
  """Where a converted layer names a field as NNX does, Equinox's name reads and
  sets the same object, and ``eqx.tree_at`` through it replaces that attribute."""
  e = make()
  m = nnx.from_eqx(e)
  assert getattr(m, eqx_name) is getattr(m, nnx_name)
  if isinstance(getattr(m, nnx_name), nnx.Variable):
    new = jnp.full(getattr(e, eqx_name).shape, 0.5)
    out = eqx.tree_at(lambda t: getattr(t, eqx_name), m, new)
    assert_trees_equal(getattr(out, nnx_name), new)
    assert getattr(m, nnx_name) is not getattr(out, nnx_name)  # the input is untouched
  replacement = getattr(m, nnx_name)
  setattr(m, eqx_name, replacement)
  assert getattr(m, nnx_name) is replacement and eqx_name not in vars(m)


@pytest.mark.parametrize(
  "make, x, shape",
  [
    (lambda k: eqx.nn.Linear(2, 2, use_bias=False, key=k), jnp.ones(2), (2,)),
    (lambda k: eqx.nn.Conv1d(2, 3, 3, use_bias=False, key=k), jnp.ones((2, 5)), (3, 1)),
    (lambda k: eqx.nn.LayerNorm(3, use_bias=False), jnp.arange(3.0), (3,)),
    (lambda k: eqx.nn.RMSNorm(3, use_bias=False), jnp.arange(3.0), (3,)),
  ],
  ids=["Linear", "Conv1d", "LayerNorm", "RMSNorm"],
)
def test_a_missing_bias_is_a_none_child_that_tree_at_fills_as_in_equinox(make, x, shape):
  """Equinox's recipe for filling a None field (``is_leaf=lambda x: x is None``)
  on a converted layer gives what it gives on the Equinox layer."""
  e = make(jax.random.key(0))
  c = nnx.from_eqx(e)
  bias = jnp.full(shape, 0.5)
  expected = eqx.tree_at(lambda m: m.bias, e, bias, is_leaf=lambda v: v is None)
  got = eqx.tree_at(lambda m: m.bias, c, bias, is_leaf=lambda v: v is None)
  assert c.bias is None  # the input is untouched
  assert_trees_equal(got(x), expected(x))
  assert_trees_equal(nnx.to_eqx(got)(x), expected(x))


@pytest.mark.parametrize(
  "make, x",
  [
    (lambda: nnx.Linear(2, 3, use_bias=False, rngs=nnx.Rngs(0)), jnp.ones(2)),
    (lambda: nnx.Conv(2, 3, (3,), use_bias=False, rngs=nnx.Rngs(0)), jnp.ones((1, 5, 2))),
    (lambda: nnx.LayerNorm(3, use_bias=False, rngs=nnx.Rngs(0)), jnp.arange(3.0)),
  ],
  ids=["Linear", "Conv", "LayerNorm"],
)
def test_native_layers_mark_a_missing_bias_as_data_as_flax_does(make, x):
  """``bias = nnx.data(None)`` (flax.nnx's layers do the same): a None child, so
  the None-filling recipe puts a Param there, and the layer adds it; the State
  and GraphDef are those of a layer without bias."""
  m = make()
  assert jax.tree.structure(m).num_leaves == len(jax.tree.leaves(nnx.state(m)))
  spec = jax.tree.structure(m, is_leaf=lambda v: v is None)
  assert spec.num_leaves == jax.tree.structure(m).num_leaves + 1  # the None is a child
  filled = eqx.tree_at(
    lambda t: t.bias, m, nnx.Param(jnp.ones(jnp.shape(m(x))[-1])), is_leaf=lambda v: v is None
  )
  assert type(filled.bias) is nnx.Param and m.bias is None
  assert_trees_close(filled(x), m(x) + 1.0)

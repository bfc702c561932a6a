"""Hijax Variables (flax.nnx 0.12's ``hijax=True``): construction, metadata, and
updates that plain JAX transforms carry out to the caller."""

import copy
import pickle

import jax
import jax.numpy as jnp
import optax
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx.graph import _hijax
from nnx_eqx.testing import (
  TraceCounter,
  all_paths,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  graphs,
  same_graph,
  sharing_classes,
)
from nnx_eqx.variablelib import HijaxVariable, to_hijax, to_lojax

# hijax Variables build on jax._src.hijax.Box, which jax 0.11.1 removed: there these
# tests are skipped and the last one checks the error a hijax Variable raises instead.
needs_box = pytest.mark.skipif(not _hijax.HAS_BOX, reason=_hijax.BOX_MISSING)


@pytest.mark.parametrize("hijax", [pytest.param(True, marks=needs_box), False])
@pytest.mark.parametrize("ref", [True, False])
def test_every_way_to_ask_gives_the_asked_modes(hijax, ref):
  base = nnx.Param(jnp.array(1), tag="t")
  made = [
    nnx.Param(jnp.array(1), tag="t", hijax=hijax, ref=ref),
    base.copy(hijax=hijax, ref=ref),
    nnx.with_vars(base, hijax=hijax, ref=ref),
    nnx.Param.from_metadata(jnp.array(1), {"tag": "t", "hijax": hijax, "ref": ref}),
  ]
  with nnx.var_defaults(hijax=hijax, ref=ref):
    made.append(nnx.Param(jnp.array(1), tag="t"))
  for v in made:
    assert (v.hijax, v.ref) == (hijax, ref)
    assert (type(v) is HijaxVariable) == hijax
    assert isinstance(v, nnx.Param) and isinstance(v, nnx.Variable)
    assert not isinstance(v, nnx.BatchStat)
    assert v.type is nnx.Param and v.tag == "t" and int(v[...]) == 1
    assert isinstance(v.get_raw_value(), jax.Ref) == ref
    assert v.get_metadata() == {"tag": "t", "hijax": hijax, "ref": ref, "eager_sharding": True}


@needs_box
def test_explicit_keyword_wins_over_the_default():
  with nnx.var_defaults(hijax=True):
    assert not nnx.Variable(1.0, hijax=False).hijax
    assert nnx.Variable(1.0).hijax
  assert not nnx.Variable(1.0).hijax


@needs_box
def test_reads_writes_and_operators_act_on_the_held_value():
  v = nnx.Param(jnp.arange(3.0), hijax=True)
  v[...] = v[...] * 2
  v[1] = 10.0
  v += 1
  assert type(v) is HijaxVariable
  assert_trees_equal(v.value, jnp.array([1.0, 11.0, 5.0]))
  assert_trees_equal(v * 2, jnp.array([2.0, 22.0, 10.0]))
  assert_trees_equal(-v, jnp.array([-1.0, -11.0, -5.0]))
  assert (v.shape, v.ndim, v.size, str(v.dtype), len(v)) == ((3,), 1, 3, "float32", 3)
  v.value = jnp.zeros(3)
  v.set_metadata(tag="w")
  v.note = "n"
  assert (v.tag, v.note, float(v.sum())) == ("w", "n", 0.0)
  assert "note='n'" in repr(v) and repr(v).endswith(", hijax=True)")


def test_metadata_reports_storage_modes_and_set_metadata_keeps_them():
  v = nnx.Variable(jnp.array(1.0))
  assert v.get_metadata() == {"hijax": False, "ref": False, "eager_sharding": True}
  v.set_metadata({"b": 3, "hijax": False, "ref": False, "eager_sharding": True})
  assert v.metadata == {"b": 3}  # the storage modes are reported, not stored
  assert v.get_metadata("hijax") is False and v.get_metadata("eager_sharding") is True
  assert nnx.Variable(1.0, eager_sharding=False).get_metadata("eager_sharding") is False


@needs_box
def test_to_hijax_and_back_keeps_type_value_and_metadata():
  low = nnx.BatchStat(jnp.ones(2), tag="s")
  hi = to_hijax(low)
  assert to_hijax(hi) is hi and to_lojax(low) is low
  back = to_lojax(hi)
  assert type(back) is nnx.BatchStat and back.tag == "s" and not back.hijax
  assert_trees_equal(back.value, low.value)
  with pytest.raises(TypeError, match="expected a Variable"):
    to_hijax(jnp.ones(2))


@needs_box
def test_jax_jit_argument_updates_reach_the_caller_without_retrace():
  v = nnx.Param(jnp.array(1), a="hi", hijax=True)
  counter = TraceCounter()

  @jax.jit
  @counter
  def add(v, a):
    assert isinstance(v, nnx.Param) and v.a == "hi" and v.hijax
    v[...] = a
    v[...] += 5
    return v + 2

  assert int(add(v, 10)) == 17 and int(v[...]) == 15
  with assert_no_retrace(counter):
    assert int(add(v, 1)) == 8
  assert int(v[...]) == 6


@needs_box
def test_captured_variable_updated_inside_grad_and_scan():
  v = nnx.Variable(jnp.array(2.0), hijax=True)

  def loss(x):
    v[...] = jax.lax.stop_gradient(x * 3)
    return x**2 + v[...]

  assert_trees_close(jax.grad(loss)(jnp.array(4.0)), jnp.array(8.0))
  assert_trees_equal(v[...], jnp.array(12.0))

  def body(c, _):
    v[...] = v[...] + 1.0
    return c, None

  jax.lax.scan(body, None, None, length=5)
  assert_trees_equal(v[...], jnp.array(17.0))


@needs_box
def test_dict_value_may_change_structure_inside_jit():
  metrics = nnx.Variable({}, hijax=True)

  @jax.jit
  def f(x, metrics):
    metrics["total"] = jnp.sum(x)

  assert len(metrics) == 0
  f(jnp.ones((4, 5)), metrics)
  assert "total" in metrics and float(metrics["total"]) == 20.0
  del metrics["total"]
  assert len(metrics) == 0


@needs_box
def test_caller_state_unchanged_after_an_error_inside_jit():
  v = nnx.Param(jnp.array(1.0), hijax=True)

  @jax.jit
  def bad(v):
    v[...] = 5.0
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    bad(v)
  assert float(v[...]) == 1.0


@needs_box
def test_module_of_hijax_variables_under_jax_and_nnx_jit():
  with nnx.var_defaults(hijax=True):
    rngs = nnx.Rngs(0)
    model = nnx.Linear(2, 3, rngs=rngs)
  model.count = nnx.Variable(jnp.array(0), hijax=True)
  assert type(rngs.default.count) is HijaxVariable

  @jax.jit
  def draw(rngs):
    return rngs()

  before = int(rngs.default.count[...])
  k1, k2 = draw(rngs), draw(rngs)
  assert not bool(jnp.all(jax.random.key_data(k1) == jax.random.key_data(k2)))
  assert int(rngs.default.count[...]) == before + 2
  counter = TraceCounter()

  @nnx.jit
  @counter
  def forward(m, x):
    m.count[...] += 1
    return m(x)

  x = jnp.ones((1, 2))
  y = forward(model, x)
  with assert_no_retrace(counter):
    forward(model, x)
  assert int(model.count[...]) == 2
  assert_trees_close(y, x @ model.kernel[...] + model.bias[...])


@needs_box
def test_split_shares_the_box_and_merge_keeps_the_state_leaf_kind():
  class Foo(nnx.Module):
    def __init__(self):
      self.a = nnx.Param(jnp.ones(2), hijax=True)

  m = Foo()
  graphdef, state = nnx.split(m)
  m2 = nnx.merge(graphdef, state)
  m2.a[...] = jnp.zeros(2)
  assert_trees_equal(m.a[...], jnp.zeros(2))  # one Box: as flax, merge reuses it
  low = nnx.merge(graphdef, nnx.with_vars(state, hijax=False))
  assert type(low.a) is nnx.Param and not low.a.hijax


@needs_box
def test_with_vars_only_filter_converts_the_selected_and_shares_the_rest():
  class Foo(nnx.Module):
    def __init__(self):
      self.a = nnx.Param(1)
      self.b = nnx.BatchStat(2)

  m = nnx.with_vars(Foo(), hijax=True, ref=True)
  m2 = nnx.with_vars(m, hijax=False, only=nnx.BatchStat)
  assert (m2.a.hijax, m2.a.ref, m2.b.hijax, m2.b.ref) == (True, True, False, True)
  m3 = nnx.with_vars(m2, hijax=True, only=nnx.BatchStat)
  assert m3.b.hijax and m3.a is m.a


@needs_box
@settings(max_examples=15, deadline=None)
@given(graphs())
def test_hijax_round_trip_keeps_graph_values_and_sharing(g):
  hi = nnx.with_vars(g, hijax=True, allow_duplicates=True)
  hi_vars = [v for _, v in all_paths(hi) if isinstance(v, nnx.Variable)]
  assert all(type(v) is HijaxVariable for v in hi_vars)
  assert sharing_classes(hi) == sharing_classes(g)
  back = nnx.with_vars(hi, hijax=False, allow_duplicates=True)
  assert same_graph(back, g)
  assert sharing_classes(back) == sharing_classes(g)


@needs_box
def test_plain_jax_train_step_over_hijax_module_updates_params_and_stats():
  with nnx.var_defaults(hijax=True):
    model = nnx.Sequential(
      nnx.Linear(2, 4, rngs=nnx.Rngs(0)),
      nnx.BatchNorm(4, use_running_average=False, rngs=nnx.Rngs(1)),
    )
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
  counter = TraceCounter()

  @jax.jit
  @counter
  def train_step(x, y):  # model and optimizer are captured, as in flax's example
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss_fn(params):
      return ((nnx.merge(graphdef, params, rest)(x) - y) ** 2).mean()

    loss, grads = jax.value_and_grad(loss_fn)(nnx.with_vars(params, hijax=False))
    optimizer.update(model, grads)
    return loss

  x, y = jax.random.normal(jax.random.key(0), (8, 2)), jnp.ones((8, 4))
  k0, mean0 = model.layers[0].kernel[...], model.layers[1].mean[...]
  first = train_step(x, y)
  with assert_no_retrace(counter):
    second = train_step(x, y)
  assert float(second) < float(first) and int(optimizer.step[...]) == 2
  assert not bool(jnp.all(model.layers[0].kernel[...] == k0))
  assert not bool(jnp.all(model.layers[1].mean[...] == mean0))


@needs_box
def test_reprs_show_the_held_variable():
  with nnx.var_defaults(hijax=True):
    m = nnx.Linear(1, 1, use_bias=False, rngs=nnx.Rngs(0))
  text = repr(m)
  assert "kernel=Param(value=Array(" in text and "hijax=True)" in text
  assert "Box" not in text and "Box" not in repr(nnx.state(m))


@needs_box
def test_eval_shape_gives_an_abstract_model_of_ordinary_variables():
  with nnx.var_defaults(hijax=True):
    abstract = nnx.eval_shape(lambda: nnx.Linear(1, 2, rngs=nnx.Rngs(0)))
  assert type(abstract.kernel) is nnx.Param and not abstract.kernel.hijax
  assert abstract.kernel.get_value() == jax.ShapeDtypeStruct((1, 2), jnp.float32)


@needs_box
def test_nnx_grad_over_hijax_variables_names_the_path_and_the_fix():
  with nnx.var_defaults(hijax=True):
    m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  kernel_before = m.kernel[...]
  with pytest.raises(nnx.HijaxGradientError, match=r"0/bias is a hijax Variable.*hijax=False"):
    nnx.grad(lambda m: m(jnp.ones((1, 1))).sum())(m)
  assert_trees_equal(m.kernel[...], kernel_before)
  low = nnx.with_vars(m, hijax=False)
  grads = nnx.grad(lambda m: m(jnp.ones((1, 1))).sum())(low)
  assert_trees_equal(grads["kernel"].value, jnp.ones((1, 1)))


@needs_box
def test_pickle_and_copy_keep_each_variables_kind():
  low = nnx.Param(jnp.ones(2), tag="a")
  hi = nnx.Param(jnp.ones(2), tag="a", hijax=True)
  with nnx.var_defaults(hijax=True):  # the default does not apply to rebuilt objects
    low2, hi2 = pickle.loads(pickle.dumps((low, hi)))
    low3, hi3 = copy.copy(low), copy.deepcopy(hi)
  assert type(low2) is type(low3) is nnx.Param and low2.tag == "a"
  assert type(hi2) is type(hi3) is HijaxVariable and hi2.tag == "a"
  hi3[...] = jnp.zeros(2)  # its own Box
  assert_trees_equal(hi[...], jnp.ones(2))


def test_without_box_a_hijax_variable_names_the_jax_version_it_needs(monkeypatch):
  """Where jax lacks Box (jax >= 0.11.1) asking for a hijax Variable raises one error
  naming the versions that have it; ordinary and ref-mode Variables keep working."""
  if _hijax.HAS_BOX:  # simulate such a jax
    monkeypatch.setattr(_hijax, "_Box", _hijax._MissingBox)
  with pytest.raises(
    nnx.JaxVersionError, match=r"jax<=0\.11\.0 .*or create the Variable with hijax=False"
  ):
    nnx.Param(jnp.ones(2), hijax=True)
  with nnx.var_defaults(hijax=True), pytest.raises(NotImplementedError, match="removed in 0.11.1"):
    nnx.Variable(1.0)
  assert nnx.Param(jnp.ones(2), ref=True).ref and not nnx.Param(jnp.ones(2)).hijax

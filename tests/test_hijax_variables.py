"""Hijax Variables (flax.nnx's ``hijax=True``): construction, metadata, reads
through plain JAX transforms and ref-mode hijax Variables updated from inside them
(on every jax with the hi-type API); immutability inside transforms and hijax
gradients where hijax Variables are cells (jax >= 0.11.1, flax.nnx 0.12.12);
writes inside transforms reaching the caller and the gradient refusal where JAX's
Box holds their state (jax <= 0.11.0, flax.nnx 0.12.8)."""

import copy
import pickle

import jax
import jax.numpy as jnp
import optax
import pytest
from hypothesis import given, settings

import nnx_eqx as nnx
from nnx_eqx.graph.variables import _hijax, _hijax_api
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

# hijax Variables are JAX hi-types: on a jax without the hi-type API (jax < 0.10) these
# tests are skipped and the last one checks the error a hijax Variable raises instead.
needs_hijax = pytest.mark.skipif(not _hijax.AVAILABLE, reason=_hijax_api.UNAVAILABLE)
# Which semantics this jax gives hijax Variables (chosen at import, see ``_hijax_api.BOX``).
cells = pytest.mark.skipif(
  not _hijax.AVAILABLE or _hijax_api.BOX is not None,
  reason="hijax Variables are mutable Boxes on this jax (<= 0.11.0), or unavailable",
)
boxes = pytest.mark.skipif(
  _hijax_api.BOX is None, reason="this jax has no Box (>= 0.11.1): hijax Variables are cells"
)


@pytest.mark.parametrize("hijax", [pytest.param(True, marks=needs_hijax), False])
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


@needs_hijax
def test_explicit_keyword_wins_over_the_default():
  with nnx.var_defaults(hijax=True):
    assert not nnx.Variable(1.0, hijax=False).hijax
    assert nnx.Variable(1.0).hijax
  assert not nnx.Variable(1.0).hijax


@needs_hijax
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


@needs_hijax
def test_to_hijax_and_back_keeps_type_value_and_metadata():
  low = nnx.BatchStat(jnp.ones(2), tag="s")
  hi = to_hijax(low)
  assert to_hijax(hi) is hi and to_lojax(low) is low
  back = to_lojax(hi)
  assert type(back) is nnx.BatchStat and back.tag == "s" and not back.hijax
  assert_trees_equal(back.value, low.value)
  with pytest.raises(TypeError, match="expected a Variable"):
    to_hijax(jnp.ones(2))


@needs_hijax
def test_jax_jit_reads_an_argument_without_retrace_and_writes_follow_the_storage():
  v = nnx.Param(jnp.array(1), a="hi", hijax=True)
  counter = TraceCounter()

  @jax.jit
  @counter
  def add(v, a):
    assert isinstance(v, nnx.Param) and v.a == "hi" and v.hijax
    return v + a

  assert int(add(v, 10)) == 11
  with assert_no_retrace(counter):
    assert int(add(v, 1)) == 2

  @jax.jit
  def write(v):
    v[...] += 5

  @jax.jit
  def bump():
    v[...] += 10  # a captured hijax Variable

  if _hijax_api.BOX is None:  # cells (jax >= 0.11.1): immutable inside transforms
    with pytest.raises(nnx.ImmutableVariableError, match=r"Cannot update Param.*ref=True"):
      write(v)
    with pytest.raises(nnx.ImmutableVariableError):
      bump()
    assert int(v[...]) == 1  # the caller's state is unchanged
  else:  # a Box (jax <= 0.11.0): writes reach the caller, as argument or capture
    write(v)
    write(v)
    bump()
    assert int(v[...]) == 21


@cells
def test_captured_variable_read_in_grad_and_scan_write_refused():
  v = nnx.Variable((jnp.array(2.0), jnp.array(3.0)), hijax=True)
  assert_trees_close(jax.grad(lambda x: x**2 + v[1])(jnp.array(4.0)), jnp.array(8.0))
  total, _ = jax.lax.scan(lambda c, _: (c + v[0], None), jnp.array(0.0), None, length=3)
  assert_trees_equal(total, jnp.array(6.0))

  def body(c, _):
    v[...] = (c, c)
    return c, None

  with pytest.raises(nnx.ImmutableVariableError):
    jax.lax.scan(body, jnp.array(0.0), None, length=2)


@needs_hijax
@pytest.mark.parametrize("ref", [True, pytest.param(False, marks=boxes)])
def test_captured_ref_mode_or_boxed_hijax_variable_is_updated_inside_grad_and_scan(ref):
  v = nnx.Variable(jnp.array(2.0), hijax=True, ref=ref)

  def loss(x):
    # a Box stores the write under stop_gradient itself: the read adds no gradient
    v[...] = jax.lax.stop_gradient(x * 3) if ref else x * 3
    return x**2 + v[...]

  assert_trees_close(jax.grad(loss)(jnp.array(4.0)), jnp.array(8.0))
  assert_trees_equal(v[...], jnp.array(12.0))

  def body(c, _):
    v[...] = v[...] + 1.0
    return c, None

  jax.lax.scan(body, None, None, length=5)
  assert_trees_equal(v[...], jnp.array(17.0))


@needs_hijax
@pytest.mark.parametrize("jit", [jax.jit, nnx.jit], ids=["jax.jit", "nnx.jit"])
def test_ref_mode_hijax_variables_as_arguments_are_updated_in_place(jit):
  class Counter(nnx.Module):
    def __init__(self):
      self.count = nnx.Variable(jnp.array(0), tag="c", hijax=True, ref=True)

  m = Counter()
  ref = m.count.get_raw_value()
  counter = TraceCounter()

  @jit
  @counter
  def step(m):
    assert type(m.count) is HijaxVariable and m.count.ref and m.count.tag == "c"
    m.count[...] += 1

  step(m)
  with assert_no_retrace(counter):
    step(m)
  assert int(m.count[...]) == 2 and m.count.get_raw_value() is ref

  @jax.jit
  def retag(m):
    m.count.tag = "d"

  with pytest.raises(nnx.ImmutableVariableError, match="Cannot update Variable"):
    retag(m)
  m.count.tag = "d"  # outside transforms metadata changes as usual
  assert m.count.tag == "d" and m.count.get_metadata("hijax") is True


@cells
def test_grad_with_respect_to_hijax_variables_gives_hijax_gradients():
  v = nnx.Param(jnp.array(3.0), tag="w", hijax=True)
  g = jax.grad(lambda v: v[...] ** 2)(v)
  assert type(g) is HijaxVariable and isinstance(g, nnx.Param) and g.tag == "w"
  assert_trees_close(g[...], jnp.array(6.0))
  pair = nnx.Variable((jnp.array(2.0), jnp.array(3.0)), hijax=True)
  gx, gpair = jax.grad(lambda x, p: x * p[0] ** 2, argnums=(0, 1))(jnp.array(5.0), pair)
  assert_trees_close((gx, gpair[0], gpair[1]), (jnp.array(4.0), jnp.array(20.0), jnp.array(0.0)))
  # read twice: the two gradients are summed (also under jax.jit)
  twice = jax.grad(lambda v: v[...] ** 2 + 3 * v[...])
  assert_trees_close((twice(v)[...], jax.jit(twice)(v)[...]), (jnp.array(9.0), jnp.array(9.0)))
  # a hijax Variable made inside the differentiated function
  assert_trees_close(
    jax.grad(lambda x: nnx.Param(x, hijax=True)[...] ** 2)(jnp.array(3.0)), jnp.array(6.0)
  )


@boxes
def test_hijax_rngs_passed_to_jax_jit_advance_between_calls():
  with nnx.var_defaults(hijax=True):
    rngs = nnx.Rngs(0)
  draw = jax.jit(lambda rngs: rngs.params())
  k1, k2 = draw(rngs), draw(rngs)
  assert not bool(jnp.all(jax.random.key_data(k1) == jax.random.key_data(k2)))


@boxes
def test_dict_value_may_change_structure_inside_jit():
  metrics = nnx.Variable({}, hijax=True)

  @jax.jit
  def f(x, metrics):
    metrics["total"] = jnp.sum(x)

  f(jnp.ones((4, 5)), metrics)
  assert "total" in metrics and float(metrics["total"]) == 20.0


@boxes
def test_grad_with_respect_to_a_boxed_hijax_variable_names_the_fix():
  v = nnx.Param(jnp.array(3.0), hijax=True)
  fix = r"Param.*nnx\.with_vars\(state, hijax=False\)"
  with pytest.raises(nnx.HijaxGradientError, match=fix):
    jax.grad(lambda v: v[...] ** 2)(v)
  with nnx.var_defaults(hijax=True):
    m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  with pytest.raises(nnx.HijaxGradientError, match=fix):
    nnx.grad(lambda m: m(jnp.ones((1, 1))).sum())(m)
  low = nnx.with_vars(v, hijax=False)
  assert_trees_close(jax.grad(lambda v: v[...] ** 2)(low)[...], jnp.array(6.0))
  grads = nnx.grad(lambda m: m(jnp.ones((1, 1))).sum())(nnx.with_vars(m, hijax=False))
  assert_trees_close(grads["bias"][...], jnp.ones(1))


@needs_hijax
def test_dict_value_may_change_structure_outside_transforms():
  metrics = nnx.Variable({}, hijax=True)
  assert len(metrics) == 0
  metrics["total"] = jnp.sum(jnp.ones((4, 5)))
  assert "total" in metrics and float(metrics["total"]) == 20.0

  @jax.jit
  def read(metrics):
    return metrics["total"] * 2

  assert float(read(metrics)) == 40.0
  del metrics["total"]
  assert len(metrics) == 0


@needs_hijax
def test_module_of_hijax_variables_under_jax_and_nnx_jit():
  with nnx.var_defaults(hijax=True):
    model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  with nnx.var_defaults(hijax=True, ref=True):
    rngs = nnx.Rngs(0)
  assert type(rngs.default.count) is HijaxVariable and rngs.default.count.ref

  @jax.jit
  def draw():
    return rngs()

  before = int(rngs.default.count[...])
  k1, k2 = draw(), draw()
  assert not bool(jnp.all(jax.random.key_data(k1) == jax.random.key_data(k2)))
  assert int(rngs.default.count[...]) == before + 2
  counter = TraceCounter()

  @nnx.jit
  @counter
  def forward(m, x):
    return m(x)

  x = jnp.ones((1, 2))
  y = forward(model, x)
  with assert_no_retrace(counter):
    forward(model, x)
  assert_trees_close(y, x @ model.kernel[...] + model.bias[...])
  assert_trees_close(jax.jit(lambda m, x: m(x))(model, x), y)


@needs_hijax
def test_split_shares_the_state_and_merge_keeps_the_state_leaf_kind():
  class Foo(nnx.Module):
    def __init__(self):
      self.a = nnx.Param(jnp.ones(2), hijax=True)

  m = Foo()
  graphdef, state = nnx.split(m)
  m2 = nnx.merge(graphdef, state)
  m2.a[...] = jnp.zeros(2)
  assert_trees_equal(m.a[...], jnp.zeros(2))  # one cell: as flax, merge reuses the state
  low = nnx.merge(graphdef, nnx.with_vars(state, hijax=False))
  assert type(low.a) is nnx.Param and not low.a.hijax


@needs_hijax
@pytest.mark.parametrize("ref", [False, True])
def test_update_writes_values_through_hijax_variables_both_ways(ref):
  with nnx.var_defaults(hijax=True, ref=ref):
    hi = nnx.Linear(1, 2, rngs=nnx.Rngs(0))
  raw = hi.kernel.get_raw_value()
  low = nnx.Linear(1, 2, rngs=nnx.Rngs(1))
  nnx.update(hi, nnx.state(low))  # an ordinary State into a hijax model
  assert type(hi.kernel) is HijaxVariable and hi.kernel.ref == ref
  assert (hi.kernel.get_raw_value() is raw) == ref  # a ref-mode one keeps its Ref
  assert_trees_equal(hi.kernel[...], low.kernel[...])
  other = nnx.Linear(1, 2, rngs=nnx.Rngs(2))
  nnx.update(other, nnx.state(hi))  # a hijax State into an ordinary model
  assert type(other.kernel) is nnx.Param
  assert_trees_equal(other.kernel[...], low.kernel[...])


@needs_hijax
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


@needs_hijax
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


@needs_hijax
def test_plain_jax_train_step_over_ref_mode_hijax_module_updates_params_and_stats():
  with nnx.var_defaults(hijax=True, ref=True):
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

    plain = nnx.with_vars(params, hijax=False, ref=False)
    loss, grads = jax.value_and_grad(loss_fn)(plain)
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


@needs_hijax
def test_reprs_show_the_held_variable():
  with nnx.var_defaults(hijax=True):
    m = nnx.Linear(1, 1, use_bias=False, rngs=nnx.Rngs(0))
  text = repr(m)
  assert "kernel=Param(value=Array(" in text and "hijax=True)" in text
  assert "Cell" not in text and "Cell" not in repr(nnx.state(m))


@needs_hijax
def test_eval_shape_gives_an_abstract_model_of_ordinary_variables():
  with nnx.var_defaults(hijax=True):
    abstract = nnx.eval_shape(lambda: nnx.Linear(1, 2, rngs=nnx.Rngs(0)))
  assert type(abstract.kernel) is nnx.Param and not abstract.kernel.hijax
  assert abstract.kernel.get_value() == jax.ShapeDtypeStruct((1, 2), jnp.float32)


@cells
def test_nnx_grad_over_hijax_variables_gives_hijax_gradients():
  with nnx.var_defaults(hijax=True):
    m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  grads = nnx.grad(lambda m: m(jnp.ones((1, 1))).sum())(m)
  assert type(grads["kernel"]) is HijaxVariable and isinstance(grads["kernel"], nnx.Param)
  low = nnx.grad(lambda m: m(jnp.ones((1, 1))).sum())(nnx.with_vars(m, hijax=False))
  assert_trees_close(grads["kernel"][...], low["kernel"][...])
  assert_trees_close(grads["bias"][...], jnp.ones(1))


@needs_hijax
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


def test_without_the_hitype_api_a_hijax_variable_names_the_jax_version_it_needs(monkeypatch):
  """Where jax lacks the hi-type API (jax < 0.10) asking for a hijax Variable raises
  one error naming the jax needed; ordinary and ref-mode Variables keep working."""
  monkeypatch.setattr(_hijax, "AVAILABLE", False)  # simulate such a jax
  needed = _hijax_api.OLDEST_JAX.replace(".", r"\.")
  with pytest.raises(
    nnx.JaxVersionError, match=rf"jax>={needed} .*or create the Variable with hijax=False"
  ):
    nnx.Param(jnp.ones(2), hijax=True)
  with nnx.var_defaults(hijax=True), pytest.raises(NotImplementedError, match=rf"jax >= {needed}"):
    nnx.Variable(1.0)
  assert nnx.Param(jnp.ones(2), ref=True).ref and not nnx.Param(jnp.ones(2)).hijax

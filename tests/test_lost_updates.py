"""Dropped-update detection (``nnx.LostUpdateError``): raised exactly where a
dropped update's object is used, on that object, and never otherwise -- across
threads, for objects sharing arrays with it, after calls that raised, for layers
reached through several arguments, for nodes sharing one definition, for
Variables holding Python scalars, under nested and lifted transforms and
Equinox's filtered ones; the cases that cannot be told are pinned."""

import copy
import pickle
import threading

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.graph.tracing import _copy_links, _lost_updates
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal

X = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(4, 3)


@pytest.fixture(autouse=True)
def _fresh():
  _lost_updates.reset()
  yield
  _lost_updates.reset()


def _bn():
  return nnx.BatchNorm(3, rngs=nnx.Rngs(0))


def _stale(obj) -> bool:
  """Whether using ``obj`` (flattening it) raises LostUpdateError."""
  try:
    jax.tree.leaves(obj)
  except nnx.LostUpdateError:
    return True
  return False


class Pair(nnx.Module):
  def __init__(self, a):
    self.a = a


class Counter(nnx.Module):
  def __init__(self):
    self.count = nnx.BatchStat(0)  # a Python int

  def __call__(self):
    self.count.value += 1
    return self.count.value


_drop = jax.jit(lambda m, x: m(x))
_carry = jax.jit(lambda m, x: (m(x), m))


# -- no false alarm -----------------------------------------------------------
def test_another_threads_reads_during_a_trace_leave_a_carried_update_alone():
  a, b = _bn(), nnx.Linear(3, 3, rngs=nnx.Rngs(1))
  tracing, read = threading.Event(), threading.Event()
  errors: list = []

  def reader():
    tracing.wait()
    try:
      for _ in range(20):
        b.kernel[...]
        jax.tree.leaves(b)
    except Exception as e:  # (reported below)
      errors.append(e)
    read.set()

  def f(m, x):
    tracing.set()
    read.wait()  # the other thread reads while this trace runs
    return m(x), m

  t = threading.Thread(target=reader)
  t.start()
  _, out = jax.jit(f)(a, X)
  t.join()
  assert errors == []
  a.mean[...]  # carried out: nothing dropped
  jax.tree.leaves((a, b, out))
  assert float(jnp.abs(out.mean[...]).sum()) > 0


def test_a_drop_in_one_thread_is_reported_there_and_only_on_its_object():
  a, b = _bn(), _bn()
  done = threading.Event()

  def other():
    _drop(a, X)
    done.set()

  t = threading.Thread(target=other)
  t.start()
  t.join()
  assert done.is_set()
  jax.tree.leaves(b)
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    a.mean[...]


@pytest.mark.parametrize(
  "bystander",
  ["clone", "update target", "restored from the arrays", "value snapshot"],
)
def test_objects_sharing_arrays_with_a_stale_one_are_not_concerned(bystander):
  s = _bn()
  if bystander == "clone":
    t = nnx.clone(s)
  elif bystander == "update target":
    t = _bn()
    nnx.update(t, nnx.state(s))
  elif bystander == "restored from the arrays":
    graphdef, state = nnx.split(s)
    arrays = jax.tree.map(lambda v: v.value, state, is_leaf=lambda v: isinstance(v, nnx.Variable))
    t = nnx.merge(
      graphdef,
      jax.tree.map(
        lambda v, a: v.replace(a), state, arrays, is_leaf=lambda v: isinstance(v, nnx.Variable)
      ),
    )
    assert t.mean is not s.mean and t.mean.get_raw_value() is s.mean.get_raw_value()
  else:
    t = {k: v.value for k, v in nnx.state(s, nnx.BatchStat).flat_state()}
  _drop(s, X)
  jax.tree.leaves(t)  # shares s's arrays: not concerned
  if isinstance(t, nnx.Module):
    t.mean[...]
    t(X)
  with pytest.raises(nnx.LostUpdateError):
    s.mean[...]


def test_a_new_value_ends_the_mark_of_that_variable_only():
  s = _bn()
  _drop(s, X)
  s.mean.value = jnp.zeros(3, jnp.float32)
  s.mean[...]
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.var"):
    s.var[...]
  s.var.value = jnp.ones(3, jnp.float32)
  jax.tree.leaves(s)


@pytest.mark.parametrize(
  "transform",
  ["jax.jit", "eqx.filter_jit", "jax.grad", "jax.vmap", "jax.checkpoint", "nested"],
)
def test_a_transformation_that_raised_leaves_nothing_stale(transform):
  m = _bn()
  before = jnp.array(m.mean[...])

  def fails(m, x):
    m(x)
    raise ZeroDivisionError("after the write")

  run = {
    "jax.jit": lambda: jax.jit(fails)(m, X),
    "eqx.filter_jit": lambda: eqx.filter_jit(fails)(m, X),
    "jax.grad": lambda: jax.grad(lambda m: jnp.sum(fails(m, X)), allow_int=True)(m),
    "jax.vmap": lambda: jax.vmap(fails, in_axes=(None, 0))(m, X[None]),
    "jax.checkpoint": lambda: jax.checkpoint(fails)(m, X),
    "nested": lambda: jax.jit(lambda m: jax.checkpoint(fails)(m, X))(m),
  }[transform]
  with pytest.raises(ZeroDivisionError):
    run()
  jax.tree.leaves(m)
  assert_trees_equal(m.mean[...], before)
  nnx.jit(lambda m, x: m(x))(m, X)  # and it goes on
  assert _lost_updates.unreported() == []


@pytest.mark.parametrize("lifted", ["nnx.jit", "nnx.vmap", "nnx.scan", "nnx.grad", "nnx.remat"])
def test_lifted_transforms_never_raise_it(lifted):
  m = nnx.BatchNorm(3, axis_name="batch" if lifted == "nnx.vmap" else None, rngs=nnx.Rngs(0))
  other = _bn()
  _drop(other, X)  # a stale module elsewhere
  run = {
    "nnx.jit": lambda: nnx.jit(lambda m, x: m(x))(m, X),
    "nnx.vmap": lambda: nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name="batch")(
      m, jnp.stack([X, X + 1])
    ),
    "nnx.scan": lambda: nnx.scan(
      lambda m, x: (m, m(x)), in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0)
    )(m, X[None]),
    "nnx.grad": lambda: nnx.grad(lambda m, x: jnp.sum(m(x)))(m, X),
    "nnx.remat": lambda: nnx.remat(lambda m, x: m(x))(m, X),
  }[lifted]
  run()
  run()
  jax.tree.leaves(m)
  assert float(jnp.abs(m.mean[...]).sum()) > 0
  with pytest.raises(nnx.LostUpdateError):
    other.mean[...]


def test_temporaries_and_unrelated_modules_stay_silent():
  rngs = nnx.Rngs(0)
  layers = jax.vmap(lambda r: nnx.Linear(2, 2, rngs=r))(rngs.fork(split=3))
  jax.jit(lambda r: r.params())(nnx.Rngs(1))
  _drop(_bn(), X)  # a module nobody holds
  unrelated = _bn()
  jax.tree.leaves((rngs, layers, unrelated))
  assert _lost_updates.unreported() == []


def test_a_loop_passing_fresh_temporaries_traces_once():
  """A drop on a temporary (a fresh ``Rngs`` per call, thrown away) is no drop
  to report, and compiled programs keep running: one trace."""
  counter = TraceCounter()
  f = jax.jit(counter(lambda r: r.params()))
  for i in range(4):
    f(nnx.Rngs(i))
  assert counter.count == 1
  assert _lost_updates.unreported() == []


def test_a_method_rebinding_a_temporary_in_its_loop_traces_once():
  """The message names the Variable's owner from the ``self`` of frames; reading
  them must not keep the temporaries of the caller's loop alive (before PEP 667,
  reading a running frame's ``f_locals`` leaves a copy of them on it)."""
  counter = TraceCounter()
  f = jax.jit(counter(lambda r: r.params()))

  class Trainer:
    def run(self):
      for i in range(4):
        r = nnx.Rngs(i)
        f(r)
      return r

  Trainer().run()
  assert counter.count == 1
  assert _lost_updates.unreported() == []


# -- no blind spot -------------------------------------------------------------
@pytest.mark.parametrize("through", [0, 1])
def test_a_layer_shared_by_two_arguments_is_linked_through_either(through):
  bn = _bn()
  p1, p2 = Pair(bn), Pair(bn)
  jax.jit(lambda p1, p2, x: (p1, p2)[through].a(x))(p1, p2, X)
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    bn.mean[...]


@pytest.mark.parametrize("written", ["first", "second"])
def test_nodes_sharing_one_definition_are_each_linked_to_their_own(written):
  s = _bn()
  t = jax.tree.map(lambda a: a + 0, s)  # a pytree map: one definition, arrays of its own
  if written == "first":
    jax.jit(lambda s, t, x: s(x) + t.mean[...])(s, t, X)
    stale, fine = s, t
  else:
    jax.jit(lambda s, t, x: t(x) + s.mean[...])(s, t, X)
    stale, fine = t, s
  jax.tree.leaves(fine)
  fine.mean[...]
  with pytest.raises(nnx.LostUpdateError):
    stale.mean[...]


def test_clones_are_each_linked_to_their_own():
  layers = [_bn() for _ in range(3)] + [nnx.clone(_bn())]
  jax.jit(lambda ls, x: ls[2](x))(layers, X)
  assert [_stale(m) for m in layers] == [False, False, True, False]


def test_a_variable_holding_a_python_scalar_is_linked():
  c = Counter()
  jax.jit(lambda m: m())(c)
  with pytest.raises(nnx.LostUpdateError, match="BatchStat"):
    c.count.value
  nnx.clear_lost_updates(c)
  assert c.count.value == 0
  out = jax.jit(lambda m: (m(), m))(c)[1]  # carried: nothing stale
  assert int(out.count.value) == 1 and c.count.value == 0
  jax.tree.leaves(c)


def _write(v):
  v.value = v.value + 1
  return 0


PLAIN = {
  "alone": lambda v: v,
  "list": lambda v: [v],
  "tuple": lambda v: (1.0, v),
  "dict": lambda v: {"v": v},
}
UNWRAP = {
  "alone": lambda t: t,
  "list": lambda t: t[0],
  "tuple": lambda t: t[1],
  "dict": lambda t: t["v"],
}


@pytest.mark.parametrize("how", PLAIN)
def test_a_variable_passed_on_its_own_or_in_a_plain_container_is_linked(how):
  v, twin = nnx.BatchStat(jnp.zeros(3)), nnx.BatchStat(jnp.zeros(3))  # equal metadata
  jax.tree.leaves(twin)
  jax.jit(lambda t: _write(UNWRAP[how](t)))(PLAIN[how](v))
  with pytest.raises(nnx.LostUpdateError, match="BatchStat of shape"):
    v.value
  assert not _stale(twin)
  twin.value = twin.value + 1  # the twin runs the same compiled program when carried
  nnx.clear_lost_updates(v)
  assert_trees_equal(v.value, jnp.zeros(3))


@pytest.mark.parametrize("metadata", [{}, {"sharding": ("a",)}, {"tags": ["unhashable"]}])
def test_a_flattened_state_variable_copies_and_pickles_as_before(metadata):
  """Its own aux data (a weak reference) reduces to its metadata: pickles, deep
  copies and shallow copies work, and a copy is linked to itself, not to ``v``."""
  v = nnx.BatchStat(jnp.arange(2.0), **metadata)
  _, tree = jax.tree.flatten(v)
  for w in (pickle.loads(pickle.dumps(v)), copy.deepcopy(v), copy.copy(v)):
    assert jax.tree.flatten(w)[1] == tree
    assert w.get_metadata() == v.get_metadata()
    assert_trees_equal(w.value, v.value)
  assert pickle.loads(pickle.dumps(tree)) == tree
  w = copy.copy(v)
  jax.jit(_write)(w)
  assert _stale(w) and not _stale(v)


def test_a_compiled_program_is_traced_again_for_another_variable_after_a_drop():
  f = jax.jit(_write)
  v, w = nnx.BatchStat(jnp.zeros(3)), nnx.BatchStat(jnp.zeros(3))
  f(v)
  f(w)  # the same metadata: after the first drop the program traces again
  assert _stale(v) and _stale(w)


def test_a_param_written_inside_a_plain_transformation_is_not_watched():
  """Pinned: Params are read by a layer's forward pass and updated by an
  optimizer, so they are not linked (an Equinox-style step rebuilds every Param
  several times per call, at the cost it had before the watch existed): a
  Param write dropped by a plain transformation goes unreported."""
  p = nnx.Param(jnp.zeros(3))
  m = nnx.Linear(3, 3, rngs=nnx.Rngs(0))
  jax.jit(_write)(p)
  jax.jit(lambda m: _write(m.kernel))(m)
  assert not _stale(p) and not _stale(m)
  assert_trees_equal(p.value, jnp.zeros(3))  # dropped, silently
  # a Param flattens with its metadata as aux data, as before: nothing per Param
  aux = jax.tree_util.tree_structure(p).node_data()[1]
  assert type(aux) is tuple


def test_an_optimizer_update_dropped_by_a_plain_transformation_is_reported():
  """The optimizer's own state (its step count and moments) is watched, so a
  dropped ``Optimizer.update`` is reported although the Params are not."""
  optax = pytest.importorskip("optax")
  m = nnx.Linear(3, 3, rngs=nnx.Rngs(0))
  opt = nnx.Optimizer(m, optax.sgd(0.1), wrt=nnx.Param)
  grads = jax.tree.map(jnp.ones_like, nnx.state(m, nnx.Param))

  def step(m, opt, grads):
    opt.update(m, grads)
    return 0

  jax.jit(step)(m, opt, grads)
  with pytest.raises(nnx.LostUpdateError, match="OptState|OptVariable|step"):
    jax.tree.leaves(opt)


def test_a_repeated_drop_through_a_compiled_program_is_seen_for_another_module():
  f = jax.jit(lambda m, x: m(x))
  m1, m2 = _bn(), _bn()
  f(m1, X)
  f(m2, X)  # same structure: after the first drop the program traces again
  assert _stale(m1) and _stale(m2)


def test_after_a_drop_on_a_temporary_a_compiled_program_runs_unwatched():
  """Pinned: a drop on a temporary starts no new generation of structures (a loop
  passing fresh temporaries would trace at every call), so the compiled program
  later runs for a held module of the same structure without a trace to watch:
  its drop is not seen (the module docstring of ``_lost_updates`` says why)."""
  f = jax.jit(lambda m, x: m(x))
  f(_bn(), X)  # a temporary: nothing to report
  m = _bn()
  f(m, X)
  assert not _stale(m)
  assert _lost_updates.unreported() == []


def test_a_map_keeping_the_arrays_is_reported_with_its_source():
  """Pinned: a node rebuilt by a pytree map that keeps the very arrays cannot be
  told from the copy Equinox's ``partition`` makes for ``filter_jit``: its drop
  marks the source too, while the source holds those arrays (the module
  docstring of ``_lost_updates`` says why); a map making new arrays does not."""
  s, u = _bn(), _bn()
  same = jax.tree.map(lambda a: a, s)
  own = jax.tree.map(lambda a: a + 0, u)
  _drop(same, X)
  _drop(own, X)
  assert _stale(same) and _stale(s)
  assert _stale(own) and not _stale(u)


@pytest.mark.parametrize("static_held", [True, False])
def test_a_combine_keeping_the_arrays_is_reported_with_its_source(static_held):
  """The same through Equinox's ``combine`` with the placeholder half first,
  whether that half is still held or gone: placeholders hold no value, so the
  link passes over them to the source. The other half, whose arrays ``same``
  holds, is not in its chain (an object sharing arrays: not concerned)."""
  s = _bn()
  params, static = eqx.partition(s, eqx.is_array)
  same = eqx.combine(static, params)
  if not static_held:
    del static
  _drop(same, X)
  assert _stale(same) and _stale(s)
  assert not _stale(params)


@pytest.mark.parametrize("first", ["placeholders", "arrays"])
@pytest.mark.parametrize("new_arrays", [False, True])
def test_a_combine_inside_a_trace_is_linked_by_its_values(first, new_arrays):
  """Inside the trace, a module rebuilt by ``partition`` and ``combine`` (either
  half first) is the argument's copy while it holds the copy's very values, and
  a node of its own over new arrays: its drop marks the argument exactly then."""
  m = _bn()

  def f(m):
    params, static = eqx.partition(m, eqx.is_array)
    if new_arrays:
      params = jax.tree.map(lambda a: a + 0, params)
    halves = (static, params) if first == "placeholders" else (params, static)
    eqx.combine(*halves)(X)  # its statistics are written, and dropped with it
    return 0

  jax.jit(f)(m)
  assert _stale(m) is not new_arrays


@pytest.mark.parametrize("style", ["results", "partition at each step"])
def test_equinox_style_steps_make_no_reference_per_placeholder(monkeypatch, style):
  """Equinox's ``partition`` and ``combine`` rebuild both halves at every step
  (``filter_jit`` does for its arguments and results); the placeholders among
  them share one weak reference per Variable they were rebuilt from
  (``_copy_links.placeholder_ref``), made at the first step."""
  m = _bn()
  if style == "results":
    step = eqx.filter_jit(lambda m, x: (m(x), m))

    def run():
      nonlocal m
      m = step(m, X)[1]
  else:  # (an evaluation loop: nothing written)
    m.eval()
    apply = eqx.filter_jit(lambda params, static, x: eqx.combine(params, static)(x))

    def run():
      apply(*eqx.partition(m, eqx.is_array), X)

  made = []
  real = _copy_links.variable_ref

  def counting(var, meta, origin):
    made.append(var is _copy_links.PLACEHOLDER)
    return real(var, meta, origin)

  monkeypatch.setattr(_copy_links, "variable_ref", counting)
  run()
  assert any(made)  # (the first step makes them)
  made.clear()
  for _ in range(5):
    run()
  assert not any(made)


def test_modules_of_one_structure_share_compiled_programs():
  """Each node flattens with aux data of its own, equal to its structure's:
  programs compiled for one module run for another without tracing again."""
  counter = TraceCounter()
  f = jax.jit(counter(lambda m, x: (m(x), m)))
  a, b = _bn(), _bn()
  f(a, X)
  with assert_no_retrace(counter):
    _, b2 = f(b, X)
    f(jax.tree.map(lambda v: v, b2), X)
    eqx.filter_jit(lambda m: m)(a)
  assert counter.count == 1


def test_nested_transforms_report_on_the_outer_original():
  m = _bn()
  jax.jit(lambda m: jnp.sum(jax.vmap(lambda m, x: m(x[None]), in_axes=(None, 0))(m, X)) * 0)(m)
  with pytest.raises(nnx.LostUpdateError):
    m.mean[...]
  nnx.clear_lost_updates(m)
  out = jax.jit(lambda m: jax.checkpoint(lambda m: (m(X), m))(m)[1])(m)  # carried twice
  jax.tree.leaves((m, out))


@pytest.mark.parametrize(
  "wrapper",
  ["filter_jit", "filter_grad", "filter_value_and_grad", "filter_vmap", "filter_checkpoint"],
)
def test_equinox_wrappers_report_a_layer_shared_by_two_arguments(wrapper):
  bn = _bn()
  p1, p2 = Pair(bn), Pair(bn)

  def f(p1, p2):
    # (Equinox's grads trace the first argument only: the second is the caller's own)
    return jnp.sum((p1 if "grad" in wrapper else p2).a(X))

  w = getattr(eqx, wrapper)
  if wrapper == "filter_vmap":
    w(lambda p1, p2, k: f(p1, p2) * k, in_axes=(None, None, 0))(p1, p2, jnp.ones(2))
  else:
    w(f)(p1, p2)
  with pytest.raises(nnx.LostUpdateError, match="BatchNorm.mean"):
    bn.mean[...]


def test_a_converted_module_reports_its_dropped_update():
  model = nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=nnx.Rngs(dropout=1))
  other = nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=nnx.Rngs(dropout=1))
  eqx.filter_jit(lambda m: m(X))(model)
  jax.tree.leaves(other)
  with pytest.raises(nnx.LostUpdateError, match="RngCount"):
    jax.tree.leaves(model)


# -- a law over random programs ------------------------------------------------
_nested_drop = jax.jit(lambda m, x: jnp.sum(jax.checkpoint(lambda m: m(x))(m)) * 0)
_nnx_step = nnx.jit(lambda m, x: m(x))


def _fails(m, x):
  m(x)
  raise ZeroDivisionError


_fail = jax.jit(_fails)
OPS = [
  "drop",
  "carry",
  "nested drop",
  "nnx.jit",
  "fail",
  "read",
  "write",
  "clone",
  "clear",
  "thread drop",
]


@settings(max_examples=20, deadline=None)
@given(program=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 2)), min_size=1, max_size=7))
def test_raised_exactly_when_a_dropped_updates_object_is_used(program):
  """Law: over random programs of drops, carries, nested and lifted transforms,
  failed calls, reads, writes, clones, clears and drops in other threads, using
  an object raises exactly when it holds a Variable a drop left stale, and
  the error names that object's Variable."""
  _lost_updates.reset()
  jax.clear_caches()  # (a compiled program runs without a trace: each example traces anew)
  pool = [_bn(), _bn()]
  stale = [set(), set()]  # per object: the names of its stale Variables
  for op, k in program:
    i = k % len(pool)
    m = pool[i]
    uses = op not in ("clear", "write", "read")
    expect = bool(stale[i]) if uses else op == "read" and "mean" in stale[i]
    try:
      if op == "drop":
        _drop(m, X)
      elif op == "carry":
        pool[i] = _carry(m, X)[1]
      elif op == "nested drop":
        _nested_drop(m, X)
      elif op == "nnx.jit":
        _nnx_step(m, X)
      elif op == "fail":
        with pytest.raises(ZeroDivisionError):
          _fail(m, X)
      elif op == "read":
        m.mean[...]
      elif op == "write":
        m.mean.value = jnp.zeros(3, jnp.float32)
      elif op == "clone":
        pool.append(nnx.clone(m))
        stale.append(set())
      elif op == "clear":
        nnx.clear_lost_updates(m)
      elif op == "thread drop":
        errors: list = []
        t = threading.Thread(target=lambda: _catch(errors, lambda: _drop(m, X)))
        t.start()
        t.join()
        if errors:
          raise errors[0]
    except nnx.LostUpdateError as e:
      assert expect, (op, i, str(e))
      continue
    assert not expect, (op, i)
    if op in ("drop", "nested drop", "thread drop"):
      stale[i] = {"mean", "var"}
    elif op == "carry":
      stale[i] = set()
    elif op == "write":
      stale[i].discard("mean")
    elif op == "clear":
      stale[i] = set()
  for obj, names in zip(pool, stale):
    assert _stale(obj) == bool(names)


def _catch(errors: list, fn) -> None:
  try:
    fn()
  except Exception as e:  # (raised again in the calling thread)
    errors.append(e)

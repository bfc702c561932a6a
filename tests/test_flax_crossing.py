"""What crosses between flax.nnx and nnx_eqx besides Modules: States, Variables and Variable
classes where the graph API takes them, optimizers mid-training, metrics, Rngs; and the
mode flags (``eval``/``train``/``set_attributes``/``view``) reaching flax's layers."""

import jax
import jax.numpy as jnp
import optax
import pytest

flax = pytest.importorskip("flax", reason="the flax.nnx bridge needs flax (the `flax` extra)")
from flax import nnx as fnnx  # noqa: E402

import nnx_eqx as nnx  # noqa: E402
from nnx_eqx.testing import assert_trees_equal  # noqa: E402

X = jax.random.normal(jax.random.key(1), (8, 3))
Y = jnp.ones((8, 1))
TREE_MODE = pytest.mark.skipif(
  not hasattr(fnnx, "set_graph_mode"), reason="flax without tree mode (set_graph_mode)"
)


@pytest.fixture(autouse=True)
def _standard_promotion():
  # flax's Optimizer and metrics mix int32 counts and floats (optax's Adam, Average's
  # total / count), which the strict promotion of conftest.py refuses; nnx_eqx's
  # Optimizer switches to standard promotion itself.
  with jax.numpy_dtype_promotion("standard"):
    yield


class Counter(fnnx.Variable):
  """A user Variable subclass on the flax side."""


class Net(fnnx.Module):
  def __init__(self, rngs: fnnx.Rngs):
    self.l1 = fnnx.Linear(3, 4, rngs=rngs)
    self.bn = fnnx.BatchNorm(4, rngs=rngs)
    self.drop = fnnx.Dropout(0.3, rngs=rngs)
    self.blocks = fnnx.List([fnnx.Dropout(0.2, rngs=rngs), fnnx.BatchNorm(4, rngs=rngs)])
    self.out = fnnx.Linear(4, 1, rngs=rngs)
    self.calls = Counter(jnp.array(0), note="calls")

  def __call__(self, x):
    self.calls[...] += 1
    x = self.drop(jax.nn.relu(self.bn(self.l1(x))))
    for b in self.blocks:
      x = b(x)
    return self.out(x)


def _net():
  return Net(fnnx.Rngs(0, dropout=1))


def _flat(st):
  return [(p, type(v), v.get_metadata(), v.get_value()) for p, v in st.flat_state()]


# -- State, Variables and Variable classes --------------------------------------------------
def test_update_takes_a_flax_state_at_flax_paths_with_paired_types():
  f, g = _net(), Net(fnnx.Rngs(5, dropout=6))
  f(X)  # batch statistics and counts move away from g's
  m = nnx.from_flax(g)
  nnx.update(m, fnnx.state(f))
  assert_trees_equal(m(X), f(X))
  want = nnx.from_flax(fnnx.state(f))  # the explicit conversion, path for path
  got = nnx.state(m)
  assert [(p, type(v).__name__) for p, v in got.flat_state()] == [
    (p, type(v).__name__) for p, v in want.flat_state()
  ]
  assert type(got["bn"]["mean"]) is nnx.BatchStat and type(got["l1"]["kernel"]) is nnx.Param
  assert type(got["calls"]).__name__ == "Counter" and got["calls"].get_metadata()["note"] == "calls"


def test_update_of_a_native_model_and_of_a_variable_with_flax_objects():
  f = fnnx.Linear(2, 3, rngs=fnnx.Rngs(0))
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(1))
  nnx.update(m, fnnx.state(f, fnnx.Param))
  assert_trees_equal(m(jnp.ones(2)), f(jnp.ones(2)))
  assert type(m.kernel) is nnx.Param
  v = nnx.Param(jnp.zeros(3))
  nnx.update(v, fnnx.Param(jnp.arange(3.0)))
  assert_trees_equal(v.value, jnp.arange(3.0))


def test_merge_takes_flax_states():
  f = fnnx.Linear(2, 3, rngs=fnnx.Rngs(0))
  graphdef, _ = nnx.split(nnx.Linear(2, 3, rngs=nnx.Rngs(1)))
  params, rest = fnnx.split(f, fnnx.Param, ...)[1:]
  m = nnx.merge(graphdef, params, rest)
  assert type(m) is nnx.Linear and type(m.kernel) is nnx.Param
  assert_trees_equal(m(jnp.ones(2)), f(jnp.ones(2)))


def test_filters_take_flax_variable_classes():
  m = nnx.from_flax(_net())
  for theirs, ours in [
    (fnnx.Param, nnx.Param),
    (fnnx.BatchStat, nnx.BatchStat),
    ((fnnx.Param, fnnx.BatchStat), (nnx.Param, nnx.BatchStat)),
    (Counter, nnx.from_flax(Counter(jnp.zeros(()))).__class__),
  ]:
    assert_trees_equal(nnx.state(m, theirs), nnx.state(m, ours))
  params, rest = nnx.split(m, fnnx.Param, ...)[1:]
  assert {type(v) for _, v in params.flat_state()} == {nnx.Param}
  assert nnx.Param not in {type(v) for _, v in rest.flat_state()}
  # a flax class that is not a Variable class is still refused, naming both types
  with pytest.raises(nnx.UnknownFilterError, match=r"flax.*nnx_eqx Variable type"):
    nnx.state(m, fnnx.Linear)


@TREE_MODE
def test_states_cross_under_flax_tree_mode():
  with fnnx.set_graph_mode(False):
    f, g = _net(), Net(fnnx.Rngs(5, dropout=6))
    f(X)
    m = nnx.from_flax(g)
    nnx.update(m, fnnx.state(f))
    assert_trees_equal(m(X), f(X))
    assert_trees_equal(nnx.state(m, fnnx.BatchStat), nnx.state(m, nnx.BatchStat))
    fnnx.update(g, nnx.to_flax(nnx.state(m)))  # and back into flax, converted
    assert all(isinstance(v.get_value(), jax.Array) for _, v in fnnx.to_flat_state(fnnx.state(g)))
    assert_trees_equal(g(X), m(X))


def test_update_refuses_a_flax_state_holding_other_leaves():
  st = fnnx.State({"a": fnnx.Param(jnp.ones(1)), "b": "text"})
  with pytest.raises(nnx.bridge.FlaxConversionError, match=r"\bb\b.*neither a Variable"):
    nnx.update(nnx.Dict(a=nnx.Param(jnp.zeros(1))), st)


# -- optimizers mid-training ----------------------------------------------------------------
def _loss(model):
  return ((model(X) - Y) ** 2).mean()


@fnnx.jit
def _flax_step(model, opt):
  loss, grads = fnnx.value_and_grad(_loss)(model)
  opt.update(model, grads)
  return loss


@nnx.jit
def _nnx_step(model, opt):
  loss, grads = nnx.value_and_grad(_loss)(model)
  opt.update(model, grads)
  return loss


def _flax_run(n, tx):
  f = _net()
  opt = fnnx.Optimizer(f, tx, wrt=fnnx.Param)
  return f, opt, [_flax_step(f, opt) for _ in range(n)]


@pytest.mark.parametrize(
  "tx",
  [optax.adam(1e-2), optax.chain(optax.add_decayed_weights(1e-3), optax.sgd(0.1, momentum=0.9))],
  ids=["adam", "sgd-momentum"],
)
def test_flax_optimizer_resumes_in_nnx_eqx_bitwise(tx):
  *_, ref = _flax_run(6, tx)
  f, fopt, first = _flax_run(3, tx)
  m, opt = nnx.from_flax(f), nnx.from_flax(fopt)
  assert type(opt) is nnx.Optimizer and opt.tx is fopt.tx and opt.wrt is nnx.Param
  assert int(opt.step.value) == 3
  # the same arrays (not copies), in nnx_eqx's OptState Variables
  ours, theirs = jax.tree.leaves(opt.opt_state), jax.tree.leaves(fopt.opt_state)
  assert len(ours) == len(theirs) and all(x is y for x, y in zip(ours, theirs))
  kinds = {
    type(v) for v in jax.tree.leaves(opt.opt_state, is_leaf=lambda x: isinstance(x, nnx.Variable))
  }
  assert nnx.OptVariable in kinds <= {nnx.OptArray, nnx.OptVariable}
  rest = [_nnx_step(m, opt) for _ in range(3)]
  assert_trees_equal(first + rest, ref)  # the same compiled updates: bitwise
  assert int(opt.step.value) == 6
  assert int(fopt.step.get_value()) == 3  # the flax optimizer is left as it was


@pytest.mark.parametrize("tx", [optax.adam(1e-2)], ids=["adam"])
def test_nnx_eqx_optimizer_resumes_in_flax_bitwise(tx):
  *_, ref = _flax_run(6, tx)
  m = nnx.from_flax(_net())
  opt = nnx.Optimizer(m, tx, wrt=nnx.Param)
  first = [_nnx_step(m, opt) for _ in range(3)]
  f, fopt = nnx.to_flax(m), nnx.to_flax(opt)
  assert type(fopt) is fnnx.Optimizer and fopt.wrt is fnnx.Param and fopt.tx is opt.tx
  assert type(fopt.step) is fnnx.OptState and int(fopt.step.get_value()) == 3
  rest = [_flax_step(f, fopt) for _ in range(3)]
  assert_trees_equal(first + rest, ref)
  # and the optax state is flax's own after six steps
  _, fopt6, _ = _flax_run(6, tx)
  assert_trees_equal(jax.tree.leaves(fopt.opt_state), jax.tree.leaves(fopt6.opt_state))


def test_optimizer_of_a_native_model_crosses_with_a_native_model():
  # the optax state is keyed by the model's paths, whichever library built the model
  m = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
  opt = nnx.Optimizer(m, optax.adam(1e-2), wrt=nnx.Param)
  first = [_nnx_step(m, opt) for _ in range(2)]
  f, fopt = nnx.to_flax(m), nnx.to_flax(opt)
  rest = [_flax_step(f, fopt) for _ in range(2)]
  m2 = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
  opt2 = nnx.Optimizer(m2, optax.adam(1e-2), wrt=nnx.Param)
  assert_trees_equal(first + rest, [_nnx_step(m2, opt2) for _ in range(4)])


def test_model_and_optimizer_crosses_with_its_model():
  tx = optax.sgd(0.1, momentum=0.9)

  @fnnx.jit
  def flax_step(opt):
    loss, grads = fnnx.value_and_grad(_loss)(opt.model)
    opt.update(grads)
    return loss

  @nnx.jit
  def nnx_step(opt):
    loss, grads = nnx.value_and_grad(_loss)(opt.model)
    opt.update(grads)
    return loss

  def fresh():
    return fnnx.ModelAndOptimizer(_net(), tx, wrt=fnnx.Param)

  ref = fresh()
  ref = [flax_step(ref) for _ in range(6)]
  fopt = fresh()
  first = [flax_step(fopt) for _ in range(2)]
  opt = nnx.from_flax(fopt)
  assert type(opt) is nnx.ModelAndOptimizer and type(opt.model) is nnx.bridge.FlaxModule
  middle = [nnx_step(opt) for _ in range(2)]
  back = nnx.to_flax(opt)
  assert type(back) is fnnx.ModelAndOptimizer and type(back.model) is Net
  rest = [flax_step(back) for _ in range(2)]
  assert_trees_equal(first + middle + rest, ref)


def test_optimizer_wrt_without_a_counterpart_is_refused_by_name():
  f = _net()
  fopt = fnnx.Optimizer(f, optax.sgd(0.1), wrt=fnnx.PathContains("l1"))
  with pytest.raises(nnx.bridge.FlaxConversionError, match=r"wrt filter.*PathContains.*Fix"):
    nnx.from_flax(fopt)


class TreeNet(fnnx.Module):
  """No integer state (flax's tree-mode grad differentiates every leaf of its argument)."""

  def __init__(self, rngs: fnnx.Rngs):
    self.l1 = fnnx.Linear(3, 4, rngs=rngs)
    self.bn = fnnx.BatchNorm(4, rngs=rngs)
    self.out = fnnx.Linear(4, 1, rngs=rngs)

  def __call__(self, x):
    return self.out(jax.nn.relu(self.bn(self.l1(x))))


@TREE_MODE
def test_optimizer_crosses_under_flax_tree_mode():
  tx = optax.adam(1e-2)
  with fnnx.set_graph_mode(False):
    f = TreeNet(fnnx.Rngs(0))
    fopt = fnnx.Optimizer(f, tx, wrt=fnnx.Param)
    first = [_flax_step(f, fopt) for _ in range(2)]
    m, opt = nnx.from_flax(f), nnx.from_flax(fopt)
    assert opt.graph is fopt.graph is None
    rest = [_nnx_step(m, opt) for _ in range(2)]
    g = TreeNet(fnnx.Rngs(0))
    gopt = fnnx.Optimizer(g, tx, wrt=fnnx.Param)
    ref = [_flax_step(g, gopt) for _ in range(4)]
    h, hopt = nnx.to_flax(m), nnx.to_flax(opt)  # and back, still in tree mode
    assert_trees_equal(_flax_step(h, hopt), _flax_step(g, gopt))
  assert_trees_equal(first + rest, ref)


# -- metrics and Rngs -----------------------------------------------------------------------
def _feed(metric, rng):
  k1, k2 = jax.random.split(rng)
  logits = jax.random.normal(k1, (6, 3))
  labels = jax.random.randint(k2, (6,), 0, 3)
  metric.update(values=logits[:, 0], loss=logits[:, 1], logits=logits, labels=labels)


@pytest.mark.parametrize(
  "make",
  [
    lambda m: m.Average(),
    lambda m: m.Welford(),
    lambda m: m.Accuracy(),
    lambda m: m.MultiMetric(loss=m.Average("loss"), acc=m.Accuracy(), stats=m.Welford()),
  ],
  ids=["Average", "Welford", "Accuracy", "MultiMetric"],
)
def test_metrics_cross_both_ways_with_their_state(make):
  theirs, ours = make(fnnx.metrics), make(nnx.metrics)
  _feed(theirs, jax.random.key(0))
  _feed(ours, jax.random.key(0))
  got = nnx.from_flax(theirs)
  assert type(got) is type(ours)
  assert_trees_equal(got.compute(), ours.compute())
  back = nnx.to_flax(got)
  assert type(back) is type(theirs)
  for m in (got, ours, theirs, back):  # one more batch on each side: still the same
    _feed(m, jax.random.key(1))
  assert_trees_equal(got.compute(), ours.compute())
  assert_trees_equal(back.compute(), theirs.compute())
  assert_trees_equal(got.compute(), back.compute())


def test_rngs_cross_with_keys_and_counts():
  rngs = fnnx.Rngs(0, dropout=3)
  rngs.dropout()
  ours = nnx.from_flax(rngs)
  assert type(ours) is nnx.Rngs and int(ours.dropout.count.value) == 1
  back = nnx.to_flax(ours)
  for a, b in [(ours.dropout(), rngs.dropout()), (back.params(), rngs.params())]:
    assert_trees_equal(jax.random.key_data(a), jax.random.key_data(b))


# -- modes reach every layer ----------------------------------------------------------------
def _mode_net(lib):
  """Dropout, BatchNorm and attention (its own ``deterministic`` flag), in a list too:
  the same model written with flax.nnx or with nnx_eqx (``lib``), whose APIs agree."""

  class ModeNet(lib.Module):
    def __init__(self, rngs):
      self.l1 = lib.Linear(3, 4, rngs=rngs)
      self.bn = lib.BatchNorm(4, rngs=rngs)
      self.att = lib.MultiHeadAttention(
        2, 4, dropout_rate=0.5, decode=False, deterministic=False, rngs=rngs
      )
      self.blocks = lib.List([lib.Dropout(0.4, rngs=rngs), lib.BatchNorm(4, rngs=rngs)])

    def __call__(self, x):
      x = self.att(self.bn(self.l1(x)))
      for b in self.blocks:
        x = b(x)
      return x

  return ModeNet


ModeNet, NnxModeNet = _mode_net(fnnx), _mode_net(nnx)


class Outer(nnx.Module):
  def __init__(self, inner):
    self.inner = inner

  def __call__(self, x):
    return self.inner(x)


class FlaxOuter(fnnx.Module):
  def __init__(self, inner):
    self.inner = inner

  def __call__(self, x):
    return self.inner(x)


XS = jax.random.normal(jax.random.key(3), (2, 5, 3))
EVAL = {"deterministic": True, "use_running_average": True}


def _in_place(method, **kw):
  def go(lib, m):
    if method == "train":
      m.eval()  # (train from eval mode)
    getattr(m, method)(**kw)
    return m

  return go


MODES = {
  "eval": _in_place("eval"),
  "train": _in_place("train"),
  "set_attributes-both": _in_place("set_attributes", **EVAL),
  "set_attributes-deterministic": _in_place("set_attributes", deterministic=True),
  "set_attributes-running-average": _in_place("set_attributes", use_running_average=True),
  "view": lambda lib, m: lib.view(m, **EVAL),
  "with_attributes": lambda lib, m: lib.with_attributes(m, **EVAL),
}


def _calls(m):
  return [m(XS), m(XS)]  # twice: the RNG streams move on alike


@pytest.mark.parametrize("nested", [False, True], ids=["root", "inside-an-nnx-module"])
@pytest.mark.parametrize("mode", MODES)
def test_modes_on_the_nnx_eqx_side_reach_flax_layers_bitwise(mode, nested):
  f = ModeNet(fnnx.Rngs(0, dropout=1))
  f(XS)  # batch statistics away from their initial values
  ref = MODES[mode](fnnx, fnnx.clone(f))  # flax's own, on a copy
  m = nnx.from_flax(f)
  got = MODES[mode](nnx, Outer(m) if nested else m)
  assert_trees_equal(_calls(got), _calls(ref))
  if mode in ("view", "with_attributes"):  # a new graph: the original keeps its mode
    assert_trees_equal(m(XS), f(XS))


@pytest.mark.parametrize("nested", [False, True], ids=["root", "inside-a-flax-module"])
@pytest.mark.parametrize("mode", MODES)
def test_modes_on_the_flax_side_reach_nnx_eqx_layers_bitwise(mode, nested):
  n = NnxModeNet(nnx.Rngs(0, dropout=1))
  n(XS)
  ref = MODES[mode](nnx, nnx.clone(n))  # nnx_eqx's own, on a copy
  f = nnx.to_flax(n)
  got = MODES[mode](fnnx, FlaxOuter(f) if nested else f)
  assert_trees_equal(_calls(got), _calls(ref))


@TREE_MODE
@pytest.mark.parametrize(
  "mode", ["eval", "set_attributes-deterministic", "view", "with_attributes"]
)
def test_modes_cross_under_flax_tree_mode(mode):
  with fnnx.set_graph_mode(False):
    f = ModeNet(fnnx.Rngs(0, dropout=1))
    f(XS)
    ref = MODES[mode](fnnx, fnnx.clone(f))
    got = MODES[mode](nnx, Outer(nnx.from_flax(f)))
    assert_trees_equal(_calls(got), _calls(ref))
    n = NnxModeNet(nnx.Rngs(0, dropout=1))
    n(XS)
    ref = MODES[mode](nnx, nnx.clone(n))
    got = MODES[mode](fnnx, FlaxOuter(nnx.to_flax(n)))
    assert_trees_equal(_calls(got), _calls(ref))


def _scaled(lib):
  """A layer whose own ``set_view`` takes a keyword that is no mode flag, written with
  flax.nnx or with nnx_eqx (``lib``)."""

  class Scaled(lib.Module):
    def __init__(self):
      self.scale = 1.0

    def set_view(self, scale=None):
      if scale is not None:
        self.scale = scale

    def __call__(self, x):
      return x * self.scale

  return Scaled


Scaled, NnxScaled = _scaled(fnnx), _scaled(nnx)


def test_nnx_view_runs_a_flax_layers_own_set_view():
  f = FlaxOuter(Scaled())
  m = nnx.from_flax(f)
  got = nnx.view(m, scale=3.0)
  assert (got.inner.scale, m.inner.scale) == (3.0, 1.0)  # the original keeps its setting
  assert_trees_equal(got(jnp.ones(2)), fnnx.view(f, scale=3.0)(jnp.ones(2)))
  assert_trees_equal(got(jnp.ones(2)), jnp.full(2, 3.0))


def test_nnx_view_leaves_a_flax_layer_without_set_view_as_flax_view_does():
  class Flagged(fnnx.Module):  # a mode flag, but no set_view: flax's view passes it by
    def __init__(self):
      self.deterministic = False

    def __call__(self, x):
      return x if self.deterministic else -x

  f = FlaxOuter(Flagged())
  got = nnx.view(nnx.from_flax(f), deterministic=True)
  ref = fnnx.view(f, deterministic=True, raise_if_not_found=False)
  assert got.inner.deterministic is ref.inner.deterministic is False
  assert_trees_equal(got(jnp.ones(2)), ref(jnp.ones(2)))


def test_flax_view_runs_an_nnx_eqx_layers_own_set_view():
  n = Outer(NnxScaled())
  f = nnx.to_flax(n)
  got = fnnx.view(f, scale=3.0)
  assert (got.inner.scale, f.inner.scale) == (3.0, 1.0)
  assert_trees_equal(got(jnp.ones(2)), nnx.view(n, scale=3.0)(jnp.ones(2)))
  assert_trees_equal(got(jnp.ones(2)), jnp.full(2, 3.0))


# -- one public name per class --------------------------------------------------------------
def test_the_equinox_form_of_a_flax_model_has_its_own_public_class():
  import pickle

  import equinox as eqx

  f = _net()
  m = nnx.from_flax(f)
  e, st = nnx.to_eqx_with_state(m)
  assert isinstance(e, nnx.bridge.EqxFlaxModule) and isinstance(e, eqx.Module)
  assert type(e).__name__ == "EqxFlaxModule" and type(m).__name__ == "FlaxModule"
  assert not isinstance(e, nnx.bridge.FlaxModule)
  assert type(nnx.to_eqx(fnnx.Linear(2, 2, rngs=fnnx.Rngs(0)))).__name__ == "EqxFlaxModule"
  y, st = e(X, st)
  assert_trees_equal(y, f(X))
  back = nnx.from_eqx(e, st)
  assert type(back) is nnx.bridge.FlaxModule
  # made per layout, the class pickles by the call that made it
  plain = nnx.to_eqx(fnnx.Linear(2, 2, rngs=fnnx.Rngs(0)))
  loaded = pickle.loads(pickle.dumps(plain))
  assert type(loaded) is type(plain) and isinstance(loaded, nnx.bridge.EqxFlaxModule)
  assert_trees_equal(loaded(jnp.ones(2)), plain(jnp.ones(2)))

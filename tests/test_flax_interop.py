"""nnx.from_flax / nnx.to_flax: live flax.nnx objects in and out, the same programs bitwise."""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest

flax = pytest.importorskip("flax", reason="the flax.nnx bridge needs flax (the `flax` extra)")
from flax import nnx as fnnx  # noqa: E402

import nnx_eqx as nnx  # noqa: E402
from nnx_eqx.testing import (  # noqa: E402
  TraceCounter,
  assert_no_retrace,
  assert_trees_equal,
  hlo_equal,
  same_graph,
)


# -- flax programs, written as flax's guides write them ----------------------------------
class Counter(fnnx.Variable):
  """A user Variable subclass on the flax side."""


class FlaxNet(fnnx.Module):
  def __init__(self, rngs: fnnx.Rngs):
    self.l1 = fnnx.Linear(4, 8, rngs=rngs)
    self.bn = fnnx.BatchNorm(8, rngs=rngs)
    self.drop = fnnx.Dropout(0.3, rngs=rngs)
    self.blocks = fnnx.List([fnnx.Linear(8, 8, rngs=rngs) for _ in range(2)])
    self.heads = fnnx.Dict(out=fnnx.Linear(8, 2, rngs=rngs))
    self.tied = self.blocks[0]  # a shared Module
    self.calls = Counter(jnp.array(0), note="calls")

  def __call__(self, x):
    self.calls[...] += 1
    x = self.drop(jax.nn.relu(self.bn(self.l1(x))))
    for b in self.blocks:
      x = jax.nn.relu(b(x))
    return self.heads["out"](self.tied(x))

  def features(self, x):
    return self.l1(x)


class Block(fnnx.Module):
  def __init__(self, rngs: fnnx.Rngs):
    self.lin = fnnx.Linear(4, 4, rngs=rngs)
    self.drop = fnnx.Dropout(0.2, rngs=rngs)

  def __call__(self, x):
    return self.drop(jax.nn.relu(self.lin(x)))


class ScanStack(fnnx.Module):
  """Layers stacked with flax.nnx.vmap and run with flax.nnx.scan inside __call__."""

  def __init__(self, rngs: fnnx.Rngs):
    @fnnx.split_rngs(splits=3)
    @fnnx.vmap(in_axes=(0,), out_axes=0)
    def make(rngs):
      return Block(rngs)

    self.blocks = make(rngs)

  def __call__(self, x):
    @fnnx.scan(in_axes=(fnnx.Carry, 0), out_axes=fnnx.Carry)
    def body(x, block):
      return block(x)

    return body(x, self.blocks)


class NnxNet(nnx.Module):
  """The same kind of model written natively in nnx_eqx."""

  def __init__(self, rngs: nnx.Rngs):
    self.l1 = nnx.Linear(4, 8, rngs=rngs)
    self.bn = nnx.BatchNorm(8, rngs=rngs)
    self.drop = nnx.Dropout(0.3, rngs=rngs)
    self.l2 = nnx.Linear(8, 2, rngs=rngs)
    self.tied = self.l1
    self.count = nnx.Variable(jnp.array(0), note="calls")

  def __call__(self, x):
    self.count[...] += 1
    return self.l2(self.drop(jax.nn.relu(self.bn(self.tied(x)))))


# flax's Optimizer feeds optax's adam an int32 step count that strict dtype promotion
# (conftest.py) refuses; SGD with momentum keeps optimizer state all the same.
TX = optax.sgd(1e-2, momentum=0.9)
X = jax.random.normal(jax.random.key(1), (16, 4))
Y = jax.random.normal(jax.random.key(2), (16, 2))


def mse(model, x, y):
  return ((model(x) - y) ** 2).mean()


def nnx_step(model, opt, x, y):
  loss, grads = nnx.value_and_grad(mse)(model, x, y)
  opt.update(model, grads)
  return loss


def flax_step(model, opt, x, y):
  loss, grads = fnnx.value_and_grad(mse)(model, x, y)
  opt.update(model, grads)
  return loss


def flax_values(node):
  return [
    (p, type(v), v.get_metadata(), v.get_value())
    if isinstance(v, fnnx.Variable)
    else (p, type(v), None, v)
    for p, v in fnnx.to_flat_state(fnnx.state(node))
  ]


def assert_same_flax_state(a, b):
  """Same paths, Variable types, metadata and bitwise values."""
  va, vb = flax_values(a), flax_values(b)
  assert [x[:3] for x in va] == [x[:3] for x in vb]
  assert_trees_equal([x[3] for x in va], [x[3] for x in vb])


# -- from_flax ------------------------------------------------------------------------------
def test_from_flax_state_paths_types_and_metadata():
  f = FlaxNet(fnnx.Rngs(0, dropout=1))
  m = nnx.from_flax(f)
  assert isinstance(m, nnx.bridge.FlaxModule)
  ours = [(p, type(v).__name__, v.get_metadata()) for p, v in nnx.state(m).flat_state()]
  theirs = [(p, type(v).__name__, v.get_metadata()) for p, v in fnnx.to_flat_state(fnnx.state(f))]
  assert ours == theirs  # flax's paths (the shared block once), paired types, same metadata
  assert isinstance(m.calls, nnx.Variable) and type(m.calls).__name__ == "Counter"
  assert {p for p, _ in nnx.state(m, nnx.BatchStat).flat_state()} == {("bn", "mean"), ("bn", "var")}
  assert_same_flax_state(nnx.to_flax(m), f)  # f's structure and values back


def test_from_flax_forward_and_methods_bitwise_with_state_updates():
  f, ref = FlaxNet(fnnx.Rngs(0, dropout=1)), FlaxNet(fnnx.Rngs(0, dropout=1))
  m = nnx.from_flax(f)
  assert_trees_equal(m(X), ref(X))
  assert_trees_equal(m(X), ref(X))  # a new dropout mask, batch statistics moved twice
  assert_trees_equal(m.features(X), ref.features(X))  # any method of the flax class
  assert_same_flax_state(nnx.to_flax(m), ref)  # BatchStats, RNG counts, the counter
  assert int(m.calls.get_value()) == 2
  assert_same_flax_state(f, FlaxNet(fnnx.Rngs(0, dropout=1)))  # the source is untouched


def test_converted_modules_lower_to_the_same_stablehlo_as_their_sources():
  """Forward pass and state updates (batch statistics, RNG counts, the counter), as pure
  functions of the state under jax.jit: one program, both ways."""
  f = FlaxNet(fnnx.Rngs(0, dropout=1))
  m = nnx.from_flax(f)
  fg, fs = fnnx.split(f)
  ng, ns = nnx.split(m)

  def via_flax(graphdef, state, x):
    module = fnnx.merge(graphdef, state)
    return module(x), fnnx.state(module)

  def via_nnx(graphdef, state, x):
    module = nnx.merge(graphdef, state)
    return module(x), nnx.state(module)

  lower = lambda fn, g, s: jax.jit(fn, static_argnums=0).lower(g, s, X)
  assert hlo_equal(lower(via_flax, fg, fs), lower(via_nnx, ng, ns))
  n = NnxNet(nnx.Rngs(0, dropout=1))
  t = nnx.to_flax(n)
  assert hlo_equal(lower(via_nnx, *nnx.split(n)), lower(via_flax, *fnnx.split(t)))


def test_from_flax_training_steps_bitwise_under_nnx_jit():
  m = nnx.from_flax(FlaxNet(fnnx.Rngs(0, dropout=1)))
  ref = FlaxNet(fnnx.Rngs(0, dropout=1))
  opt = nnx.Optimizer(m, TX, wrt=nnx.Param)
  fopt = fnnx.Optimizer(ref, TX, wrt=fnnx.Param)
  counter = TraceCounter()
  step = nnx.jit(counter(nnx_step))
  fstep = fnnx.jit(flax_step)
  losses, flosses = [], []
  for i in range(4):
    if i == 2:
      with assert_no_retrace(counter):
        losses.append(step(m, opt, X, Y))
    else:
      losses.append(step(m, opt, X, Y))
    flosses.append(fstep(ref, fopt, X, Y))
  assert_trees_equal(losses, flosses)
  assert counter.count == 1
  assert_same_flax_state(nnx.to_flax(m), ref)


def test_from_flax_shared_reference_is_one_variable_with_summed_gradient():
  class Tied(fnnx.Module):
    def __init__(self, rngs):
      self.emb = fnnx.Param(jax.random.normal(rngs.params(), (5, 3)))
      self.enc = fnnx.Linear(3, 3, rngs=rngs)
      self.dec_w = self.emb

    def __call__(self, x):
      return self.enc(x @ self.emb) @ self.dec_w.T

  f = Tied(fnnx.Rngs(0))
  m = nnx.from_flax(f)
  paths = [p for p, _ in nnx.state(m).flat_state()]
  assert paths == [("dec_w",), ("enc", "bias"), ("enc", "kernel")]  # once, at flax's first path
  x = jnp.ones((2, 5))
  g = nnx.grad(lambda m: m(x).sum())(m)
  fg = fnnx.grad(lambda f: f(x).sum())(f)
  assert_trees_equal(g["dec_w"].get_value(), fg["dec_w"].get_value())
  back = nnx.to_flax(m)
  assert back.emb is back.dec_w  # one object again on the flax side


def test_from_flax_method_using_flax_scan_keeps_working():
  f, ref = ScanStack(fnnx.Rngs(0, dropout=1)), ScanStack(fnnx.Rngs(0, dropout=1))
  m = nnx.from_flax(f)
  x = jnp.ones((2, 4))
  assert_trees_equal(nnx.jit(lambda m, x: m(x))(m, x), fnnx.jit(lambda f, x: f(x))(ref, x))
  g = nnx.jit(nnx.grad(lambda m: m(x).sum()))(m)
  fg = fnnx.jit(fnnx.grad(lambda f: f(x).sum()))(ref)
  assert_trees_equal(
    [v.get_value() for _, v in g.flat_state()], [v.get_value() for _, v in fnnx.to_flat_state(fg)]
  )
  assert_same_flax_state(nnx.to_flax(m), ref)  # the stacked RNG counts moved as flax's


def test_from_flax_under_nnx_vmap_scan_and_remat():
  f = fnnx.Linear(4, 4, rngs=fnnx.Rngs(0))
  m = nnx.from_flax(f)
  xs = jax.random.normal(jax.random.key(3), (5, 3, 4))
  ref = fnnx.vmap(lambda f, x: f(x), in_axes=(None, 0))(f, xs)
  assert_trees_equal(nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(m, xs), ref)
  scan = nnx.scan(lambda m, x: (m, m(x)), in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  fscan = fnnx.scan(lambda f, x: (f, f(x)), in_axes=(fnnx.Carry, 0), out_axes=(fnnx.Carry, 0))
  assert_trees_equal(scan(m, xs)[1], fscan(f, xs)[1])  # (a loop: not vmap's program)
  g = nnx.grad(nnx.remat(lambda m, x: m(x).sum()))(m, xs[0])
  fg = fnnx.grad(fnnx.remat(lambda f, x: f(x).sum()))(f, xs[0])
  assert_trees_equal(g["kernel"].get_value(), fg["kernel"].get_value())


def test_from_flax_eval_and_sow_change_structure_as_in_flax():
  class Sows(fnnx.Module):
    def __init__(self, rngs):
      self.lin = fnnx.Linear(4, 4, rngs=rngs)
      self.bn = fnnx.BatchNorm(4, rngs=rngs)

    def __call__(self, x):
      y = self.bn(self.lin(x))
      with pytest.warns(DeprecationWarning):  # flax 0.12 prefers nnx.capture
        self.sow(fnnx.Intermediate, "h", y)
      return y

  f, ref = Sows(fnnx.Rngs(0)), Sows(fnnx.Rngs(0))
  m = nnx.from_flax(f)
  m.eval()
  ref.eval()
  assert_trees_equal(nnx.jit(lambda m: m(X))(m), ref(X))
  assert [p for p, _ in nnx.state(m, nnx.Intermediate).flat_state()] == [("h",)]
  assert_trees_equal(m.h.get_value(), ref.h.get_value())
  mean = m.bn.mean.get_value()
  m(X)
  assert m.bn.mean.get_value() is mean  # eval: running averages used, not updated
  m.train()
  m(X)
  assert not bool((m.bn.mean.get_value() == mean).all())


def test_nnx_train_and_eval_of_a_model_holding_a_flax_module_reach_its_layers():
  class Outer(nnx.Module):
    def __init__(self, backbone, rngs):
      self.backbone = nnx.from_flax(backbone)
      self.head = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x):
      return self.head(self.backbone.features(x))

  class Backbone(fnnx.Module):
    def __init__(self, rngs):
      self.lin = fnnx.Linear(4, 8, rngs=rngs)
      self.drop = fnnx.Dropout(0.5, rngs=rngs)

    def features(self, x):
      return self.drop(self.lin(x))

  outer = Outer(Backbone(fnnx.Rngs(0, dropout=1)), nnx.Rngs(1))
  outer.eval()  # nnx_eqx's eval, on a model holding a flax Module
  assert outer.backbone.drop.deterministic is True  # the flag of flax's layer itself
  assert_trees_equal(outer(X), outer(X))
  ref = Backbone(fnnx.Rngs(0, dropout=1))
  ref.eval()
  assert_same_flax_state(nnx.to_flax(outer.backbone), ref)
  outer.train()
  assert not bool((outer(X) == outer(X)).all())  # dropout draws a new mask each call
  back = nnx.to_flax(outer)
  assert isinstance(back, fnnx.Module)
  assert [p for p, _ in fnnx.to_flat_state(fnnx.state(back))] == [
    p for p, _ in nnx.state(outer).flat_state()
  ]


def test_from_flax_rngs_state_and_variable():
  rngs = fnnx.Rngs(0, dropout=3)
  rngs.dropout()
  ours = nnx.from_flax(rngs)
  assert type(ours) is nnx.Rngs
  theirs = fnnx.Rngs(0, dropout=3)
  theirs.dropout()
  assert_trees_equal(jax.random.key_data(ours.dropout()), jax.random.key_data(theirs.dropout()))
  assert_trees_equal(jax.random.key_data(ours.params()), jax.random.key_data(theirs.params()))

  st = fnnx.state(FlaxNet(fnnx.Rngs(0, dropout=1)))
  ns = nnx.from_flax(st)
  assert isinstance(ns, nnx.State)
  assert [p for p, _ in ns.flat_state()] == [p for p, _ in fnnx.to_flat_state(st)]
  assert_trees_equal(
    [v.get_value() for _, v in ns.flat_state()], [v.get_value() for _, v in fnnx.to_flat_state(st)]
  )
  back = nnx.to_flax(ns)
  assert [(p, type(v)) for p, v in fnnx.to_flat_state(back)] == [
    (p, type(v)) for p, v in fnnx.to_flat_state(st)
  ]

  v = Counter(jnp.arange(3), note="n")
  nv = nnx.from_flax(v)
  assert isinstance(nv, nnx.Variable) and nv.get_metadata()["note"] == "n"
  fv = nnx.to_flax(nv)
  assert type(fv) is Counter and fv.get_metadata() == v.get_metadata()
  assert_trees_equal(fv.get_value(), v.get_value())


# -- to_flax --------------------------------------------------------------------------------
def test_to_flax_trains_bitwise_with_flax_tools():
  m, ref = NnxNet(nnx.Rngs(0, dropout=1)), NnxNet(nnx.Rngs(0, dropout=1))
  f = nnx.to_flax(m)
  assert isinstance(f, fnnx.Module)
  fopt = fnnx.Optimizer(f, TX, wrt=fnnx.Param)
  opt = nnx.Optimizer(ref, TX, wrt=nnx.Param)
  counter = TraceCounter()
  fstep = fnnx.jit(counter(flax_step))
  step = nnx.jit(nnx_step)
  flosses, losses = [], []
  for i in range(4):
    if i == 2:
      with assert_no_retrace(counter):
        flosses.append(fstep(f, fopt, X, Y))
    else:
      flosses.append(fstep(f, fopt, X, Y))
    losses.append(step(ref, opt, X, Y))
  assert_trees_equal(flosses, losses)
  assert counter.count == 1
  back = nnx.from_flax(f)
  assert type(back) is NnxNet and back.tied is back.l1
  assert_trees_equal(nnx.state(back), nnx.state(ref))  # params, batch stats, RNG counts
  assert int(back.count.get_value()) == 4


def test_to_flax_works_with_flax_graph_api_grad_scan_and_display():
  m = NnxNet(nnx.Rngs(0, dropout=1))
  f = nnx.to_flax(m)
  graphdef, params, rest = fnnx.split(f, fnnx.Param, ...)
  assert {p for p, _ in fnnx.to_flat_state(params)} == {
    ("l1", "kernel"),
    ("l1", "bias"),
    ("bn", "scale"),
    ("bn", "bias"),
    ("l2", "kernel"),
    ("l2", "bias"),
  }
  assert isinstance(fnnx.state(f, fnnx.BatchStat)["bn"]["mean"], fnnx.BatchStat)
  f2 = fnnx.merge(graphdef, params, rest)
  f2.eval()
  m.eval()
  assert_trees_equal(f2(X), m(X))
  grads = fnnx.grad(lambda f: f(X).sum())(f2)
  ngrads = nnx.grad(lambda m: m(X).sum())(m)
  assert_trees_equal(grads["l1"]["kernel"].get_value(), ngrads["l1"]["kernel"].get_value())

  lin = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
  flin = nnx.to_flax(lin)

  @fnnx.scan(in_axes=(fnnx.Carry, None), out_axes=fnnx.Carry, length=3)
  def thrice(x, layer):
    return layer(x)

  assert_trees_equal(thrice(X, flin), lin(lin(lin(X))))
  text = repr(f)
  assert "NnxEqxModule" in text and "kernel" in text and "BatchStat" in text


def test_flax_train_and_eval_of_a_flax_model_holding_a_converted_module_reach_it():
  class FlaxOuter(fnnx.Module):
    def __init__(self, inner, rngs):
      self.inner = inner
      self.head = fnnx.Linear(2, 2, rngs=rngs)

    def __call__(self, x):
      return self.head(self.inner(x))

  outer = FlaxOuter(nnx.to_flax(NnxNet(nnx.Rngs(0, dropout=1))), fnnx.Rngs(1))
  outer.eval()  # flax's eval, on a flax model holding an nnx_eqx one
  assert outer.inner.drop.deterministic is True  # the flag of the nnx_eqx layer itself
  assert_trees_equal(outer(X), outer(X))
  held = nnx.from_flax(outer.inner)
  assert held.drop.deterministic is True and held.bn.use_running_average is True
  outer.train()
  assert not bool((outer(X) == outer(X)).all())


def test_to_flax_checkpoint_with_flax_recipe(tmp_path):
  ocp = pytest.importorskip("orbax.checkpoint", reason="flax's checkpoint recipe uses orbax")
  f = nnx.to_flax(NnxNet(nnx.Rngs(0, dropout=1)))
  f(X)  # move batch statistics and RNG counts away from their initial values
  _, state = fnnx.split(f)
  with ocp.StandardCheckpointer() as ckpt:
    ckpt.save(tmp_path / "ckpt", state)
  abstract = fnnx.eval_shape(lambda: nnx.to_flax(NnxNet(nnx.Rngs(5, dropout=5))))
  graphdef, abstract_state = fnnx.split(abstract)
  with ocp.StandardCheckpointer() as ckpt:
    restored = ckpt.restore(tmp_path / "ckpt", abstract_state)
  g = fnnx.merge(graphdef, restored)
  assert_same_flax_state(g, f)
  assert_trees_equal(nnx.state(nnx.from_flax(g)), nnx.state(nnx.from_flax(f)))


def test_to_flax_keeps_sharding_annotations_without_moving_data():
  init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("in", "out"))

  class Annotated(nnx.Module):
    def __init__(self, rngs):
      self.lin = nnx.Linear(3, 2, kernel_init=init, rngs=rngs)

    def __call__(self, x):
      return self.lin(x)

  m = Annotated(nnx.Rngs(0))
  f = nnx.to_flax(m)  # flax alone refuses such a Variable outside a mesh; no data moves here
  assert f.lin.kernel.get_metadata() == m.lin.kernel.get_metadata()
  assert f.lin.kernel.get_value() is m.lin.kernel.get_value()
  assert_trees_equal(f(jnp.ones(3)), m(jnp.ones(3)))
  assert same_graph(nnx.from_flax(f), m)


def test_root_lists_convert_with_their_sharing_both_ways():
  ours = nnx.List([NnxNet(nnx.Rngs(i, dropout=i)) for i in range(2)])
  theirs = nnx.to_flax(ours)
  assert type(theirs) is fnnx.List and all(isinstance(e, fnnx.Module) for e in theirs)
  assert_trees_equal(theirs[1](X), ours[1](X))
  assert same_graph(nnx.from_flax(theirs), ours)

  flax_list = fnnx.List([FlaxNet(fnnx.Rngs(i, dropout=i)) for i in range(2)])
  converted = nnx.from_flax(flax_list)
  assert type(converted) is nnx.List
  assert_same_flax_state(nnx.to_flax(converted), flax_list)
  assert fnnx.graphdef(nnx.to_flax(converted)) == fnnx.graphdef(flax_list)

  shared = nnx.Linear(2, 2, rngs=nnx.Rngs(0))  # one element under two indices stays one
  theirs = nnx.to_flax(nnx.List([shared, shared]))
  assert theirs[0] is theirs[1] and isinstance(theirs[0], fnnx.Module)
  tied = fnnx.Linear(2, 2, rngs=fnnx.Rngs(0))
  ours = nnx.from_flax(fnnx.List([tied, tied]))
  assert ours[0] is ours[1] and ours[0].kernel is ours[1].kernel


# -- Equinox <-> flax.nnx in one line ---------------------------------------------------------
def test_equinox_to_flax_and_flax_to_equinox_in_one_line():
  e = eqx.nn.MLP(4, 2, 8, 2, key=jax.random.key(0))
  f = nnx.to_flax(nnx.from_eqx(e))
  assert isinstance(f, fnnx.Module)
  x = jnp.arange(4.0)
  assert_trees_equal(f(x), e(x))
  assert_trees_equal(fnnx.jit(lambda f, x: f(x))(f, x), eqx.filter_jit(lambda e, x: e(x))(e, x))

  fl = fnnx.Sequential(
    fnnx.Linear(4, 8, rngs=fnnx.Rngs(0)), jax.nn.relu, fnnx.Linear(8, 2, rngs=fnnx.Rngs(1))
  )
  back = nnx.to_eqx(fl)
  assert isinstance(back, eqx.Module)
  assert_trees_equal(back(X), fl(X))
  assert_trees_equal(eqx.filter_jit(lambda e, x: e(x))(back, X), fnnx.jit(lambda f, x: f(x))(fl, X))
  g = eqx.filter_grad(lambda e: e(X).sum())(back)
  fg = fnnx.grad(lambda f: f(X).sum())(fl)
  ours = [(p, v.get_value()) for p, v in nnx.state(nnx.from_eqx(g)).flat_state()]
  theirs = [(p, v.get_value()) for p, v in fnnx.to_flat_state(fg)]
  assert [p for p, _ in ours] == [p for p, _ in theirs]  # the gradients, at flax's paths
  assert_trees_equal([v for _, v in ours], [v for _, v in theirs])

  bn = fnnx.BatchNorm(4, rngs=fnnx.Rngs(0))
  em, st = nnx.to_eqx_with_state(bn)
  out, st = em(X, st)
  assert_trees_equal(out, bn(X))


# -- containers of flax where nnx_eqx's are expected -------------------------------------------
def test_flax_graphdef_in_nnx_merge_names_both_types_and_the_fix():
  # (flax States, Variables and Variable classes are converted: tests/test_flax_crossing.py)
  fm = fnnx.Linear(2, 3, rngs=fnnx.Rngs(0))
  fgraphdef, fstate = fnnx.split(fm)
  with pytest.raises(
    nnx.GraphStructureError, match=r"flax\.nnx\.graphlib\.GraphDef.*nnx_eqx\.GraphDef"
  ):
    nnx.merge(fgraphdef, fstate)


# -- bad input ------------------------------------------------------------------------------
def test_linen_module_points_to_flax_own_bridge():
  linen = pytest.importorskip("flax.linen", reason="flax.linen")
  with pytest.raises(nnx.bridge.FlaxConversionError, match=r"Linen.*flax\.nnx\.bridge\.ToNNX"):
    nnx.from_flax(linen.Dense(3))


@pytest.mark.parametrize(
  "obj, match",
  [
    (jnp.ones(3), r"expects a flax\.nnx Module.*ArrayImpl|expects a flax\.nnx Module"),
    (eqx.nn.Linear(2, 2, key=jax.random.key(0)), r"Linear \(from equinox.*nnx\.from_eqx"),
    (nnx.Linear(2, 2, rngs=nnx.Rngs(0)), r"nnx_eqx .*needs no conversion"),
  ],
)
def test_from_flax_other_objects(obj, match):
  with pytest.raises(nnx.bridge.FlaxConversionError, match=match):
    nnx.from_flax(obj)


@pytest.mark.parametrize(
  "obj, match",
  [
    (fnnx.Linear(2, 2, rngs=fnnx.Rngs(0)), r"flax object Linear .*needs no conversion"),
    (eqx.nn.Linear(2, 2, key=jax.random.key(0)), r"Linear \(from equinox.*nnx\.from_eqx"),
    ("text", r"expects an nnx_eqx Module"),
  ],
)
def test_to_flax_other_objects(obj, match):
  with pytest.raises(nnx.bridge.FlaxConversionError, match=match):
    nnx.to_flax(obj)


def test_unconvertible_flax_state_names_the_path_and_changes_nothing():
  class Odd(fnnx.Module):
    def __init__(self):
      self.w = fnnx.Param(jnp.ones(2))
      self.inner = fnnx.Dict(scale=fnnx.data(1.5))  # a Python float as data

  f = Odd()
  before = flax_values(f)
  with pytest.raises(nnx.bridge.FlaxConversionError, match=r"float.*root\.inner\.scale"):
    nnx.from_flax(f)
  after = flax_values(f)
  assert [x[:3] for x in after] == [x[:3] for x in before]
  assert_trees_equal([x[3] for x in after], [x[3] for x in before])


def test_colliding_attribute_name_is_refused_with_path():
  class Clash(fnnx.Module):
    def __init__(self):
      self.flax_call = fnnx.Param(jnp.ones(2))  # the name of a FlaxModule method

  with pytest.raises(nnx.bridge.FlaxConversionError, match=r"root\.flax_call.*rename"):
    nnx.from_flax(Clash())

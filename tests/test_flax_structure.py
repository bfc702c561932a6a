"""The structure of converted flax.nnx objects: every submodule a module of its own,
sharing as identity (both directions, cycles included), in flax's graph and tree modes."""

import jax
import jax.numpy as jnp
import optax
import pytest

pytest.importorskip("flax", reason="the flax.nnx bridge needs flax (the `flax` extra)")
from flax import nnx as fnnx  # noqa: E402

import nnx_eqx as nnx  # noqa: E402
from nnx_eqx.testing import assert_trees_equal  # noqa: E402

X = jax.random.normal(jax.random.key(0), (3, 4))


class Enc(fnnx.Module):
  def __init__(self, rngs):
    self.lin = fnnx.Linear(4, 4, rngs=rngs)
    self.scale = 2.0  # a static attribute

  def __call__(self, x):
    return self.lin(x) * self.scale

  def half(self, x):
    return self.lin(x) / 2

  @property
  def width(self):
    return self.lin.out_features


class Net(fnnx.Module):
  def __init__(self, rngs):
    self.enc = Enc(rngs)
    self.tied = self.enc  # one submodule under two names
    self.drop = fnnx.Dropout(0.25, rngs=rngs)
    self.bn = fnnx.BatchNorm(4, rngs=rngs)
    self.blocks = fnnx.List([fnnx.Linear(4, 4, rngs=rngs) for _ in range(2)])
    self.heads = fnnx.Dict(out=fnnx.Linear(4, 2, rngs=rngs))
    self.seq = fnnx.Sequential(fnnx.Linear(4, 4, rngs=rngs), jax.nn.relu)

  def __call__(self, x):
    x = self.bn(self.drop(self.tied(self.enc(x))))
    for b in self.blocks:
      x = jax.nn.relu(b(x))
    return self.heads["out"](self.seq(x))


def net():
  return Net(fnnx.Rngs(0, dropout=1))


def values(f):
  return [v.get_value() for _, v in fnnx.to_flat_state(fnnx.state(f))]


# -- 1. every submodule is a module ------------------------------------------------------
def test_each_flax_submodule_is_a_callable_module_of_its_own():
  f = net()
  m = nnx.from_flax(f)
  assert isinstance(m.enc, nnx.bridge.FlaxModule) and m.enc.flax_type is Enc
  assert_trees_equal(m.enc(X), f.enc(X))  # bitwise flax's
  assert_trees_equal(m.enc.half(X), f.enc.half(X))  # a flax method of the submodule
  assert m.enc.scale == 2.0 and m.drop.rate == 0.25 and m.bn.num_features == 4
  assert m.enc.width == 4  # a property of the flax class
  assert type(m.enc.lin.kernel) is nnx.Param
  assert_trees_equal(m(X), f(X))  # the parent still runs flax's code, state moved as flax's
  assert_trees_equal([v.get_value() for _, v in nnx.state(m).flat_state()], values(f))


def test_flax_containers_become_nnx_containers_of_modules():
  f = net()
  m = nnx.from_flax(f)
  assert type(m.blocks) is nnx.List and type(m.heads) is nnx.Dict
  assert type(m.seq) is nnx.Sequential
  for ours, theirs in zip(m.blocks, f.blocks, strict=True):
    assert_trees_equal(ours(X), theirs(X))
  assert_trees_equal(m.heads["out"](X), f.heads["out"](X))
  assert_trees_equal(m.seq(X), f.seq(X))
  assert m.seq.layers[1] is jax.nn.relu


def test_graph_walks_see_every_submodule():
  m = nnx.from_flax(net())
  paths = {p for p, _ in nnx.iter_modules(m)}
  assert {("enc",), ("enc", "lin"), ("drop",), ("bn",), ("blocks", 0), ("heads", "out")} <= paths
  assert ("tied",) not in paths  # one module, reached once, as flax's iter_modules
  children = dict(nnx.iter_children(m))
  assert children["enc"] is m.enc and children["bn"] is m.bn
  assert type(nnx.graphdef(m.enc)) is type(nnx.graphdef(m))  # a module for the graph API


def test_training_the_child_or_the_parent_updates_one_set_of_variables():
  f = net()
  m = nnx.from_flax(f)
  opt = nnx.Optimizer(m, optax.sgd(0.1), wrt=nnx.Param)

  @nnx.jit
  def step_child(m, opt):
    grads = nnx.grad(lambda e: (e(X) ** 2).mean())(m.enc)
    opt.update(m, _under(grads, "enc", m))

  before = m.enc.lin.kernel[...]
  step_child(m, opt)
  assert not bool((m.enc.lin.kernel[...] == before).all())
  assert m.tied.lin.kernel is m.enc.lin.kernel  # one Variable, trained once

  ref = net()
  ref_opt = fnnx.Optimizer(ref, optax.sgd(0.1), wrt=fnnx.Param)

  @fnnx.jit
  def flax_step_child(f, opt):
    grads = fnnx.grad(lambda e: (e(X) ** 2).mean())(f.enc)
    opt.update(f, _flax_under(grads, "enc", f))

  flax_step_child(ref, ref_opt)
  assert_trees_equal(m.enc.lin.kernel[...], ref.enc.lin.kernel.get_value())

  @nnx.jit
  def step(m, opt):
    loss, grads = nnx.value_and_grad(lambda m: (m(X) ** 2).mean())(m)
    opt.update(m, grads)
    return loss

  @fnnx.jit
  def flax_step(f, opt):
    loss, grads = fnnx.value_and_grad(lambda f: (f(X) ** 2).mean())(f)
    opt.update(f, grads)
    return loss

  assert_trees_equal([step(m, opt) for _ in range(2)], [flax_step(ref, ref_opt) for _ in range(2)])
  assert_trees_equal(m.enc(X), ref.enc(X))
  assert_trees_equal(nnx.to_flax(m).bn.mean.get_value(), ref.bn.mean.get_value())


def _under(grads, name, m):
  """The gradient of submodule ``name`` as a gradient of the whole model (zeros elsewhere)."""
  full = jax.tree.map(jnp.zeros_like, nnx.state(m, nnx.Param))
  for p, v in grads.flat_state():
    full[name][p[0]][p[1]] = v
  return full


def _flax_under(grads, name, f):
  full = jax.tree.map(jnp.zeros_like, fnnx.state(f, fnnx.Param))
  for p, v in fnnx.to_flat_state(grads):
    full[name][p[0]][p[1]] = v
  return full


def test_a_child_call_writes_back_its_state_updates():
  f = net()
  m = nnx.from_flax(f)
  m.bn(X)
  f.bn(X)
  assert_trees_equal(m.bn.mean[...], f.bn.mean.get_value())
  m.drop(X)  # the RNG count of the Dropout's stream moves as flax's
  f.drop(X)
  assert_trees_equal(m.drop.rngs.count[...], f.drop.rngs.count.get_value())


def test_nnx_eval_reaches_the_flags_of_each_converted_layer():
  m = nnx.from_flax(net())
  m.eval()
  assert m.drop.deterministic is True and m.bn.use_running_average is True
  assert_trees_equal(m(X), m(X))
  ref = net()
  ref.eval()
  assert_trees_equal(m(X), ref(X))
  m.drop.train()  # flax's train() on one layer
  assert m.drop.deterministic is False and m.bn.use_running_average is True


def test_each_nnx_submodule_is_a_flax_module_after_to_flax():
  class Inner(nnx.Module):
    def __init__(self, rngs):
      self.lin = nnx.Linear(4, 4, rngs=rngs)
      self.gain = 3.0

    def __call__(self, x):
      return self.lin(x) * self.gain

    @property
    def width(self):
      return self.lin.out_features

  class Outer(nnx.Module):
    def __init__(self, rngs):
      self.l1 = Inner(rngs)
      self.again = self.l1
      self.blocks = nnx.List([nnx.Linear(4, 4, rngs=rngs)])

    def __call__(self, x):
      return self.blocks[0](self.again(self.l1(x)))

  m = Outer(nnx.Rngs(0))
  f = nnx.to_flax(m)
  assert isinstance(f.l1, fnnx.Module) and f.l1.gain == 3.0 and f.l1.width == 4
  assert_trees_equal(f.l1(X), m.l1(X))
  assert_trees_equal(f.l1.lin(X), m.l1.lin(X))
  assert type(f.blocks) is fnnx.List and isinstance(f.blocks[0], fnnx.Module)
  assert_trees_equal(f.blocks[0](X), m.blocks[0](X))
  assert_trees_equal(f(X), m(X))
  assert f.again is f.l1
  paths = {p for p, _ in fnnx.iter_modules(f)}
  assert {("again",), ("again", "lin"), ("blocks", 0)} <= paths  # (flax's first path)


# -- 2. sharing is identity ---------------------------------------------------------------
def test_a_shared_submodule_or_variable_is_one_object_both_ways():
  f = net()
  f.extra = fnnx.data(f.bn.scale)  # one Variable under a second name
  m = nnx.from_flax(f)
  assert m.tied is m.enc and m.extra is m.bn.scale
  back = nnx.to_flax(m)
  assert type(back) is Net and back.tied is back.enc and back.extra is back.bn.scale
  assert fnnx.graphdef(back) == fnnx.graphdef(f)
  native = nnx.Module()  # the mirror: an nnx_eqx graph's sharing in flax
  native.enc = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
  native.tied, native.w = native.enc, native.enc.kernel
  g = nnx.to_flax(native)
  assert g.tied is g.enc and g.w is g.enc.kernel and isinstance(g.enc, fnnx.Module)
  again = nnx.from_flax(g)
  assert type(again.enc) is nnx.Linear and again.tied is again.enc
  assert again.w is again.enc.kernel


def _cycle(module_cls, param_cls):
  """Two Modules that refer to each other."""
  a, b = module_cls(), module_cls()
  a.w, b.w = param_cls(jnp.ones(2)), param_cls(jnp.zeros(2))
  a.child, b.parent = b, a
  return a


class FNode(fnnx.Module):
  pass


def test_cycles_are_kept_as_cycles_both_ways():
  a = _cycle(FNode, fnnx.Param)
  m = nnx.from_flax(a)
  assert m.child.parent is m and m.child.w is not m.w
  back = nnx.to_flax(m)
  assert back.child.parent is back and fnnx.graphdef(back) == fnnx.graphdef(a)

  f = nnx.to_flax(_cycle(nnx.Module, nnx.Param))
  assert f.child.parent is f and isinstance(f.child, fnnx.Module)
  again = nnx.from_flax(f)
  assert type(again) is nnx.Module and again.child.parent is again


# -- 6. flax's tree mode ---------------------------------------------------------------------
def test_structure_and_calls_hold_in_flax_tree_mode():
  with fnnx.set_graph_mode(False):
    f = net()
    m = nnx.from_flax(f)
    assert m.tied is m.enc and m.drop.rate == 0.25
    assert_trees_equal(m.enc(X), f.enc(X))
    assert_trees_equal(m(X), f(X))
    back = nnx.to_flax(m)
    assert back.tied is back.enc and isinstance(back.enc, Enc)


class Plain(fnnx.Module):  # (no shared references: flax's tree mode refuses them)
  def __init__(self, rngs):
    self.enc = Enc(rngs)
    self.bn = fnnx.BatchNorm(4, rngs=rngs)
    self.blocks = fnnx.List([fnnx.Linear(4, 2, rngs=rngs)])

  def __call__(self, x):
    return self.blocks[0](self.bn(self.enc(x)))


def test_flax_tree_mode_training_of_a_converted_model_is_flax_s():
  def loss(model):
    return (model(X) ** 2).mean()

  with fnnx.set_graph_mode(False):  # (flax's transforms take the mode where they are made)

    @fnnx.jit
    def step(model, opt):
      value, grads = fnnx.value_and_grad(loss)(model)
      opt.update(model, grads)
      return value

    native = Plain(fnnx.Rngs(0))
    there_and_back = nnx.to_flax(nnx.from_flax(Plain(fnnx.Rngs(0))))
    assert isinstance(there_and_back.enc, Enc)
    wrapped = nnx.to_flax(nnx.Sequential(nnx.Linear(4, 2, rngs=nnx.Rngs(0))))
    native_seq = fnnx.Sequential(fnnx.Linear(4, 2, rngs=fnnx.Rngs(0)))
    for a, b in ((native, there_and_back), (native_seq, wrapped)):
      oa = fnnx.Optimizer(a, optax.sgd(0.1), wrt=...)
      ob = fnnx.Optimizer(b, optax.sgd(0.1), wrt=...)
      losses = [step(a, oa) for _ in range(3)]
      assert losses[0] != losses[2]  # (it trains)
      assert_trees_equal(losses, [step(b, ob) for _ in range(3)])
      assert_trees_equal(values(a), values(b))


def test_flax_tree_mode_refuses_a_converted_tied_model_as_it_refuses_flax_s():
  with fnnx.set_graph_mode(False):  # (flax's transforms take the mode where they are made)

    @fnnx.jit
    def call(model):
      return model(X)

    with pytest.raises(ValueError, match="Duplicate") as native:
      call(net())
    with pytest.raises(ValueError, match="Duplicate") as converted:
      call(nnx.to_flax(nnx.from_flax(net())))
  assert type(native.value) is type(converted.value)

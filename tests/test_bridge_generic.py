"""Generic conversion: any eqx.Module -> NNX module, any NNX module -> eqx.Module."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal, same_graph

KEY = jax.random.key(3)


class Pair(NamedTuple):
  a: jax.Array
  b: int


class Custom(eqx.Module):
  lin: eqx.nn.Linear
  layers: list
  table: dict
  pair: Pair
  ids: jax.Array
  offset: float
  act: object
  n: int = eqx.field(static=True)
  frozen: jax.Array = eqx.field(static=True)

  def __init__(self, key):
    self.lin = eqx.nn.Linear(3, 3, key=key)
    self.layers = [jnp.ones(3), eqx.nn.Identity()]
    self.table = {"w": jnp.full(3, 0.5)}
    self.pair = Pair(jnp.arange(3.0), 2)
    self.ids = jnp.arange(3)
    self.offset = 0.25
    self.act = jax.nn.tanh
    self.n = 2
    self.frozen = np.ones(3, np.float32)  # an array in a static field (Equinox warns)

  def __call__(self, x):
    h = self.lin(x) * self.layers[0] * self.table["w"] + self.pair.a * self.pair.b
    return self.act(h + self.offset + jnp.sum(self.ids).astype(h.dtype) + self.frozen * self.n)

  def double(self, x):
    return 2 * self(x)

  @property
  def width(self):
    return self.lin.out_features

  @staticmethod
  def helper(x):
    return x + 1


def _custom():
  import warnings

  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return Custom(KEY)


def test_eqx_module_fields_methods_and_roundtrip():
  e = _custom()
  m = nnx.from_eqx(e)
  assert isinstance(m, nnx.bridge.EqxModule) and type(m).__name__ == "Custom"
  assert type(m.lin) is nnx.bridge.Linear  # as everywhere: Equinox's layout
  assert type(m.layers) is nnx.List and type(m.table) is nnx.Dict
  assert type(m.pair) is Pair and type(m.pair.a) is nnx.Param
  assert type(m.ids) is nnx.Variable  # a non-inexact array
  assert m.offset == 0.25 and m.n == 2 and m.act is jax.nn.tanh
  x = jnp.linspace(-1, 1, 3)
  assert_trees_equal(m(x), e(x))  # Equinox's own code: bitwise
  assert_trees_equal(m.double(x), e.double(x))
  assert m.width == 3 and m.helper(1) == 2
  assert_trees_equal(nnx.to_eqx(m), e)
  # NNX tools apply: split by Param, gradients reach the Variables
  grads = nnx.grad(lambda m: m(x).sum())(m)
  g = eqx.filter_grad(lambda e: e(x).sum())(e)
  assert_trees_equal(grads["lin"]["weight"].value, g.lin.weight)  # the same program


def test_nnx_edits_show_up_on_the_equinox_side():
  m = nnx.from_eqx(_custom())
  m.lin.weight.value = jnp.zeros((3, 3))
  assert float(jnp.abs(nnx.to_eqx(m).lin.weight).sum()) == 0.0
  m.extra = nnx.Param(jnp.ones(1))
  with pytest.raises(nnx.bridge.UnconvertibleFieldError, match=r"attribute\(s\) \['extra'\]"):
    nnx.to_eqx(m)


def test_unconvertible_fields_name_the_path():
  @jax.tree_util.register_pytree_node_class
  class Box:
    def __init__(self, v):
      self.v = v

    def tree_flatten(self):
      return (self.v,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
      return cls(*children)

  class Holder(eqx.Module):
    inner: tuple

  with pytest.raises(nnx.bridge.UnconvertibleFieldError, match=r"root.inner\[1\] holds a Box"):
    nnx.from_eqx(Holder((jnp.ones(1), Box(jnp.ones(2)))))
  with pytest.raises(nnx.bridge.UnconvertibleFieldError, match=r"non-string keys"):
    nnx.from_eqx(Holder(({1: jnp.ones(1)},)))
  with pytest.raises(nnx.bridge.UnconvertibleFieldError, match="expects an eqx.Module, got int"):
    nnx.from_eqx(3)
  with pytest.raises(
    nnx.bridge.UnconvertibleFieldError, match="expects an nnx.Module, got ArrayImpl"
  ):
    nnx.to_eqx(jnp.ones(2))
  # a Box without arrays is a static value
  assert nnx.from_eqx(Holder((Box(1),))).inner[0].v == 1


class Net(nnx.Module):
  def __init__(self, rngs):
    self.l1 = nnx.Linear(3, 4, rngs=rngs)
    self.blocks = [nnx.Linear(4, 4, rngs=rngs), nnx.Linear(4, 4, rngs=rngs)]
    self.heads = {"a": nnx.Linear(4, 2, rngs=rngs)}
    self.pair = (nnx.Param(jnp.ones(4)), 3)
    self.raw = jnp.full(4, 0.5)
    self.scale = MyParam(jnp.array(2.0), sharding=("x",))
    self.sizes = [3, 4]  # unhashable static

  def __call__(self, x):
    h = self.l1(x)
    for b in self.blocks:
      h = jax.nn.relu(b(h))
    return self.heads["a"](h * self.pair[0] * self.raw) * self.scale + self.pair[1]

  def embed(self, x, *, scale=1.0):
    return self.l1(x) * scale

  @property
  def n_blocks(self):
    return len(self.blocks)


class MyParam(nnx.Param):
  pass


def test_nnx_module_becomes_eqx_module_with_same_methods():
  net = Net(nnx.Rngs(0))
  e = nnx.to_eqx(net)
  assert isinstance(e, nnx.bridge.NnxModule) and type(e).__name__ == "Net"
  assert type(e.l1) is nnx.bridge.KernelLinear and e.l1.kernel.shape == (3, 4)
  assert type(e.blocks) is list and type(e.heads) is dict
  assert e.sizes is net.sizes and not e.is_stateful()  # the list itself, not a box
  x = jnp.ones((2, 3))
  assert_trees_equal(e(x), net(x))
  assert_trees_equal(e.embed(x, scale=2.0), net.embed(x, scale=2.0))
  assert e.n_blocks == 2
  back = nnx.from_eqx(e)
  assert same_graph(back, net)
  assert type(back.scale) is MyParam and back.scale.sharding == ("x",)
  # Equinox treats it as any pytree: filter_grad differentiates the arrays
  g = eqx.filter_grad(lambda e: e(x).sum())(e)
  gn = nnx.grad(lambda m: m(x).sum())(net)
  assert_trees_equal(g.l1.kernel, gn["l1"]["kernel"].value)  # the same program


def test_generic_eqx_modules_drop_unused_keys_in_sequential():
  net = nnx.Sequential([nnx.Linear(2, 3, rngs=nnx.Rngs(0)), jax.nn.relu])
  e = nnx.to_eqx(net)
  seq = eqx.nn.Sequential([e, eqx.nn.Lambda(jnp.sin)])
  x = jnp.ones(2)
  assert_trees_close(seq(x, key=jax.random.key(0)), jnp.sin(net(x)))


def test_nnx_modules_inside_equinox_modules_are_kept():
  class Holder(eqx.Module):
    inner: object

  lin = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  m = nnx.from_eqx(Holder(lin))
  assert m.inner is lin

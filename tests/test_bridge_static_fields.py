"""Static fields cross the bridge as themselves, hashable or not."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


@dataclasses.dataclass(frozen=True)
class Config:
  """Like a third-party model's config: frozen, but unhashable (it holds a list)."""

  layer_types: list
  width: int = 4


class Net(nnx.Module):
  def __init__(self, config: Config, *, rngs: nnx.Rngs):
    self.config = config
    self.names = {"in": "x"}  # an unhashable plain dict too
    self.lin = nnx.Linear(3, config.width, rngs=rngs)

  def __call__(self, x):
    return self.lin(x) * len(self.config.layer_types)


def make(layer_types=("attention", "mlp"), seed=0):
  return Net(Config(list(layer_types)), rngs=nnx.Rngs(seed))


def test_unhashable_static_attribute_reads_back_as_itself():
  m = make()
  e = nnx.to_eqx(m)
  assert e.config is m.config and type(e.config) is Config
  assert e.config.layer_types == ["attention", "mlp"]
  assert e.names == {"in": "x"}
  assert "Hashed" not in repr(e)
  assert hash(jax.tree_util.tree_structure(e)) is not None  # the treedef holds a hashable box
  assert_trees_equal(e(jnp.ones(3)), m(jnp.ones(3)))


def test_equal_configs_give_equal_treedefs():
  """Unhashable static values compare with ``==``, as Equinox compares static fields."""
  a, b = nnx.to_eqx(make()), nnx.to_eqx(make(seed=1))
  assert a.config is not b.config
  assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
  c = nnx.to_eqx(make(("mlp",)))
  assert jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(c)


def test_round_trips_are_exact():
  m = make()
  e = nnx.to_eqx(m)
  back = nnx.from_eqx(e)
  assert back.config is m.config and back.names == m.names
  assert eqx.tree_equal(nnx.to_eqx(back), e)
  assert_trees_equal(nnx.to_eqx(back), e)


def test_unflatten_and_assignment_keep_the_object():
  e = nnx.to_eqx(make())
  leaves, treedef = jax.tree_util.tree_flatten(e)
  again = jax.tree_util.tree_unflatten(treedef, leaves)
  assert again.config is e.config
  new = Config(["mlp"])
  replaced = dataclasses.replace(e, config=new)
  assert replaced.config is new
  assert jax.tree_util.tree_structure(replaced) != jax.tree_util.tree_structure(e)


def test_trains_under_filter_jit_without_retrace():
  e = nnx.to_eqx(make())
  opt = optax.sgd(0.01)
  opt_state = opt.init(eqx.filter(e, eqx.is_array))
  x, y = jnp.ones(3), jnp.zeros(4)
  counter = TraceCounter()

  @eqx.filter_jit
  @counter
  def step(model, opt_state):
    loss, grads = eqx.filter_value_and_grad(lambda m: jnp.sum((m(x) - y) ** 2))(model)
    updates, opt_state = opt.update(grads, opt_state)
    return eqx.apply_updates(model, updates), opt_state, loss

  e, opt_state, first = step(e, opt_state)
  with assert_no_retrace(counter):
    for _ in range(3):
      e, opt_state, loss = step(e, opt_state)
  assert counter.count == 1
  assert float(loss) < float(first)
  assert e.config.layer_types == ["attention", "mlp"]


class EqxNet(eqx.Module):
  weight: jax.Array
  layer_types: list = eqx.field(static=True)
  options: dict = eqx.field(static=True)

  def __call__(self, x):
    return self.weight * x * len(self.layer_types)


@pytest.mark.parametrize("layer_types,options", [([1, 2], {"a": [3]}), (["x"], {})])
def test_equinox_unhashable_static_field_reads_back_on_the_nnx_side(layer_types, options):
  e = EqxNet(jnp.ones(2), layer_types, options)
  m = nnx.from_eqx(e)
  assert m.layer_types is layer_types and m.options is options
  assert m.eqx_type is EqxNet
  assert_trees_equal(m(jnp.ones(2)), e(jnp.ones(2)))
  assert eqx.tree_equal(nnx.to_eqx(m), e)
  assert nnx.to_eqx(m).layer_types is layer_types

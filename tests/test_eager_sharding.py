"""Eager sharding (flax.nnx 0.12): Variables with sharding names are placed when
created under a mesh; nnx.use_eager_sharding, get_abstract_model, abstract_with_sharding."""

import jax
import jax.numpy as jnp
import optax
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import nnx_eqx as nnx

pytestmark = pytest.mark.devices(8)  # a (2, 4) mesh


def _mesh(*types):
  types = types or (AxisType.Auto, AxisType.Auto)
  return jax.make_mesh((2, 4), ("data", "model"), axis_types=types)


def _spec(v):
  return v.value.sharding.spec


@pytest.mark.parametrize("key", ["sharding", "out_sharding"])
def test_a_variable_created_under_a_mesh_is_placed(key):
  with jax.set_mesh(_mesh()):
    w = nnx.Param(jnp.ones((4, 8)), **{key: (None, "model")})
  assert _spec(w) == P(None, "model")
  assert w.value.sharding.shard_shape(w.shape) == (4, 2)


def test_explicit_meshes_reshard():
  with jax.set_mesh(_mesh(AxisType.Explicit, AxisType.Explicit)):
    w = nnx.Param(jnp.ones((4, 8)), out_sharding=("data", "model"))
  assert _spec(w) == P("data", "model")


def test_the_variables_own_mesh_and_named_shardings_are_used():
  mesh = _mesh()
  w = nnx.Param(jnp.ones((4, 8)), out_sharding=("data", None), mesh=mesh)
  assert _spec(w) == P("data", None) and w.value.sharding.mesh == mesh
  v = nnx.Variable(jnp.ones((4, 8)), out_sharding=NamedSharding(mesh, P(None, "model")))
  assert _spec(v) == P(None, "model")


def test_logical_names_go_through_the_rules():
  with jax.set_mesh(_mesh()), nnx.logical_axis_rules([("mlp", "model")]):
    w = nnx.Param(jnp.ones((4, 8)), sharding=("embed", "mlp"), sharding_rules=(("embed", "data"),))
  assert _spec(w) == P("data", "model")


def test_use_eager_sharding_switches_it_off_for_a_block_and_restores():
  assert nnx.using_eager_sharding()
  with jax.set_mesh(_mesh()):
    with nnx.use_eager_sharding(False):
      assert not nnx.using_eager_sharding()
      w = nnx.Param(jnp.ones((4, 8)), out_sharding=(None, "model"))
    on = nnx.Param(jnp.ones((4, 8)), out_sharding=(None, "model"))
    off = nnx.Param(jnp.ones((4, 8)), out_sharding=(None, "model"), eager_sharding=False)
  assert nnx.using_eager_sharding()
  assert _spec(w) == P() and _spec(off) == P() and _spec(on) == P(None, "model")
  assert "eager_sharding" not in on.metadata  # the default is reported, not stored
  assert off.get_metadata("eager_sharding") is False and on.get_metadata("eager_sharding") is True


def test_use_eager_sharding_as_a_decorator_and_its_errors():
  @nnx.use_eager_sharding(False)
  def make():
    assert not nnx.using_eager_sharding()
    return nnx.Param(jnp.ones((4, 8)), out_sharding=(None, "model"))

  assert nnx.using_eager_sharding()
  with jax.set_mesh(_mesh()):
    assert _spec(make()) == P()
  with pytest.raises(TypeError, match="must be a bool"):
    nnx.use_eager_sharding("yes")  # type: ignore[arg-type]


def test_mixed_axis_types_raise():
  with pytest.raises(nnx.ShardingError, match="mix Auto and Explicit"):
    nnx.Variable(
      jnp.ones((4, 4)), out_sharding=("data", "model"), mesh=_mesh(AxisType.Auto, AxisType.Explicit)
    )


def test_without_a_mesh_the_value_is_kept():
  # nnx_eqx keeps the seeds' sharding names without a mesh (flax 0.12 raises here)
  w = nnx.Param(jnp.ones((4, 8)), sharding=(None, "model"))
  assert w.sharding == (None, "model") and w.value.shape == (4, 8)


def test_modules_built_in_jit_come_out_sharded():
  @nnx.jit
  def create():
    return nnx.Linear(4, 8, rngs=nnx.Rngs(0), kernel_metadata={"out_sharding": (None, "model")})

  with jax.set_mesh(_mesh()):
    m = create()
  assert _spec(m.kernel) == P(None, "model")


def test_get_abstract_model_gives_sharded_abstract_leaves():
  class Foo(nnx.Module):
    def __init__(self, rngs):
      init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
      self.linear = nnx.Linear(8, 8, use_bias=False, kernel_init=init, rngs=rngs)
      self.shared = self.linear.kernel

  mesh = _mesh()
  graphdef, abstract = nnx.get_abstract_model(lambda: Foo(nnx.Rngs(0)), mesh)
  leaves = jax.tree.leaves(abstract)
  assert len(leaves) == 1 and isinstance(leaves[0], jax.ShapeDtypeStruct)
  assert leaves[0].sharding.is_equivalent_to(NamedSharding(mesh, P(None, "model")), ndim=2)
  model = nnx.merge(graphdef, abstract)
  assert model.shared is model.linear.kernel
  assert nnx.compat.get_abstract_model is nnx.get_abstract_model


def test_abstract_with_sharding_is_the_deprecated_as_abstract():
  abstract = nnx.eval_shape(
    lambda: nnx.Param(jnp.ones((4, 8)), out_sharding=(None, "model"), eager_sharding=False)
  )
  with jax.set_mesh(_mesh()), pytest.warns(DeprecationWarning, match="as_abstract"):
    out = nnx.abstract_with_sharding(abstract)
  assert out.value.sharding.spec == P(None, "model")


def test_optimizer_state_is_placed_like_the_params_or_by_optimizer_sharding():
  mesh = _mesh()
  with jax.set_mesh(mesh):
    model = nnx.Linear(
      4,
      8,
      rngs=nnx.Rngs(0),
      kernel_metadata={"out_sharding": (None, "model")},
      bias_metadata={"optimizer_sharding": ("model",)},
    )
    opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
  mu = opt.opt_state[0].mu
  assert _spec(mu["kernel"]) == P(None, "model")
  assert _spec(model.bias) == P() and _spec(mu["bias"]) == P("model")

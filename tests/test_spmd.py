"""Sharding on an 8-device CPU mesh: metadata → PartitionSpec → NamedSharding, logical
rules, sharded init and a sharded train step with Params laid out as their specs say."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 (fake) devices")


@pytest.fixture(scope="module")
def mesh():
  return jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


INIT = nnx.initializers.lecun_normal()
ZEROS = nnx.initializers.zeros


class MLP(nnx.Module):
  def __init__(self, rngs, names=(("embed", "mlp"), ("mlp",), ("mlp", "embed"), ("embed",))):
    k1, b1, k2, b2 = names
    self.l1 = nnx.Linear(
      8,
      16,
      kernel_init=nnx.with_partitioning(INIT, k1),
      bias_init=nnx.with_partitioning(ZEROS, b1),
      rngs=rngs,
    )
    self.l2 = nnx.Linear(
      16,
      8,
      kernel_init=nnx.with_partitioning(INIT, k2),
      bias_init=nnx.with_partitioning(ZEROS, b2),
      rngs=rngs,
    )

  def __call__(self, x):
    return self.l2(jax.nn.relu(self.l1(x)))


RULES = (("batch", "data"), ("mlp", "model"), ("embed", None))


def _strip(spec: P) -> P:
  parts = list(spec)
  while parts and parts[-1] is None:
    parts.pop()
  return P(*parts)


def assert_laid_out(model, mesh, rules=RULES):
  for path, v in nnx.state(model, nnx.Param).to_flat_dict().items():
    expected = NamedSharding(mesh, nnx.spmd.variable_spec(v, rules))
    actual = v.value.sharding
    assert actual.is_equivalent_to(expected, v.value.ndim), (path, actual, expected)
    assert _strip(actual.spec) == _strip(expected.spec), (path, actual.spec, expected.spec)


def test_partition_specs_with_and_without_rules():
  state = nnx.state(MLP(nnx.Rngs(0)))
  specs = nnx.get_partition_spec(state)
  assert specs.l1.kernel.value == P("embed", "mlp")
  with nnx.logical_axis_rules(RULES):
    assert nnx.get_partition_spec(state).l1.kernel.value == P(None, "model")
  assert nnx.get_partition_spec(state, rules=RULES).l2.kernel.value == P("model", None)
  assert nnx.logical_to_mesh(specs, RULES).l1.bias.value == P("model")


def test_logical_rules_follow_precedence_and_replicate_unmapped_names():
  rules = (("batch", "data"), ("heads", "data"), ("heads", "model"), ("length", None))
  assert nnx.logical_to_mesh_axes(("batch", "heads", "kv"), rules) == P("data", "model", None)
  with pytest.raises(nnx.ShardingError, match="twice"):
    nnx.logical_to_mesh_axes(("batch", "batch"), rules)
  assert nnx.logical_to_mesh_axes(None, rules) is None


def test_variable_rules_win_over_context_rules():
  # as flax.nnx: the Variable's own rules first, the context's for names they do not map
  init = nnx.with_logical_partitioning(INIT, ("a", "b"), rules=(("a", "data"),))
  p = nnx.Param(init(jax.random.key(0), (4, 4)))
  with nnx.logical_axis_rules((("b", "model"), ("a", "model"))):
    assert nnx.get_partition_spec(p).value == P("data", "model")


def test_sharded_init_inside_jit(mesh):
  @nnx.jit
  def create():
    model = MLP(nnx.Rngs(0))
    with nnx.logical_axis_rules(RULES):
      nnx.with_sharding_constraint(model, mesh=mesh)
    return model

  model = create()
  assert_laid_out(model, mesh)
  # same values as an unsharded init
  assert_trees_close(nnx.state(model), nnx.state(MLP(nnx.Rngs(0))))


def test_sharded_init_with_device_put_is_exact(mesh):
  model = MLP(nnx.Rngs(0))
  state = nnx.state(model)
  shardings = nnx.get_named_sharding(state, mesh, rules=RULES)
  nnx.update(model, jax.device_put(state, shardings))
  for path, v in nnx.state(model, nnx.Param).to_flat_dict().items():
    expected = NamedSharding(mesh, nnx.spmd.variable_spec(v, RULES))
    assert v.value.sharding == expected, path


def test_sharded_train_step_keeps_the_layout(mesh):
  model = MLP(nnx.Rngs(0))
  state = nnx.state(model)
  nnx.update(model, jax.device_put(state, nnx.get_named_sharding(state, mesh, rules=RULES)))
  x = jax.device_put(jnp.linspace(-1, 1, 16 * 8).reshape(16, 8), NamedSharding(mesh, P("data")))
  y = jnp.zeros((16, 8))

  @nnx.jit
  def step(model, x, y):
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    params = nnx.state(model, nnx.Param)
    nnx.update(model, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads))
    with nnx.logical_axis_rules(RULES):
      nnx.with_sharding_constraint(model, mesh=mesh)
    return loss

  losses = [float(step(model, x, y)) for _ in range(3)]
  assert losses[2] < losses[0]
  assert_laid_out(model, mesh)
  assert model.l1.kernel.value.sharding.spec == P(None, "model")


def test_constraint_with_context_mesh_and_logical_constraint(mesh):
  f = jax.jit(lambda x: nnx.with_sharding_constraint(x, P("data", "model")))
  with jax.set_mesh(mesh):
    assert f(jnp.ones((4, 8))).sharding.spec == P("data", "model")
  g = jax.jit(lambda x: nnx.with_logical_constraint(x, ("batch", "mlp"), mesh=mesh))
  assert len(g(jnp.ones((4, 8))).sharding.device_set) == 1  # no rules: a no-op
  with nnx.logical_axis_rules(RULES):
    h = jax.jit(lambda x: nnx.with_logical_constraint(x, ("batch", "mlp"), mesh=mesh))
    assert h(jnp.ones((4, 8))).sharding.spec == P("data", "model")


def test_unknown_mesh_axis_is_named_and_module_unchanged(mesh):
  state = nnx.state(MLP(nnx.Rngs(0)))
  with pytest.raises(
    nnx.UnknownMeshAxisError,
    match=r"l1/bias is (P|PartitionSpec)\('mlp',\).*'mlp'.*\('data', 'model'\)",
  ):
    nnx.get_named_sharding(state, mesh)
  model = MLP(nnx.Rngs(0))
  before = nnx.state(model)

  @nnx.jit
  def bad(model):
    model.l1.bias.value = model.l1.bias.value + 1
    nnx.with_sharding_constraint(model, mesh=mesh)

  with pytest.raises(nnx.UnknownMeshAxisError, match="Fix: use one of the mesh's axis names"):
    bad(model)
  assert_trees_equal(nnx.state(model), before)
  with pytest.raises(nnx.ShardingError, match="no mesh"):
    jax.jit(lambda x: nnx.with_sharding_constraint(x, P("data")))(jnp.ones(4))


def test_add_and_remove_axis():
  p = nnx.Param(jnp.ones((3, 2)), sharding=("embed",))
  nnx.spmd.add_axis(p, 0, {nnx.PARTITION_NAME: "layers"})
  assert p.sharding == ("layers", "embed")
  nnx.spmd.remove_axis(p, 0, {nnx.PARTITION_NAME: "layers"})
  assert p.sharding == ("embed",)
  with pytest.raises(nnx.ShardingError, match="Expected 'layers' at index 0"):
    nnx.spmd.remove_axis(p, 0, {nnx.PARTITION_NAME: "layers"})


def test_stacked_layers_shard_over_the_mesh(mesh):
  init = nnx.with_partitioning(INIT, ("embed", "mlp"))

  @nnx.split_rngs(splits=4)
  @nnx.vmap(in_axes=0, out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
  def make(rngs):
    return nnx.Linear(8, 8, kernel_init=init, rngs=rngs)

  stack = make(nnx.Rngs(0))
  rules = (*RULES, ("layers", None))
  state = nnx.state(stack)
  nnx.update(stack, jax.device_put(state, nnx.get_named_sharding(state, mesh, rules=rules)))
  assert stack.kernel.value.sharding.spec == P(None, None, "model")

  @nnx.jit
  def forward(stack, x):
    @nnx.scan(
      in_axes=(0, nnx.Carry), out_axes=nnx.Carry, transform_metadata={nnx.PARTITION_NAME: "layers"}
    )
    def body(layer, x):
      with nnx.logical_axis_rules(rules):
        return nnx.with_logical_constraint(layer(x), ("batch", "mlp"), mesh=mesh)

    return body(stack, x)

  out = forward(stack, jnp.ones((4, 8)))
  assert_trees_close(out.sum(), forward(stack, jnp.ones((4, 8))).sum())
  assert stack.kernel.out_sharding == ("layers", "embed", "mlp")


def test_vmap_and_scan_call_the_variables_add_and_remove_axis():
  calls = []

  class Traced(nnx.Param):
    def add_axis(self, axis_index, axis_name):
      calls.append(("add", axis_index, axis_name))

    def remove_axis(self, axis_index, axis_name):
      calls.append(("remove", axis_index, axis_name))

  class Block(nnx.Module):
    @nnx.split_rngs(splits=3)
    @nnx.vmap(in_axes=(0, 0), transform_metadata={nnx.PARTITION_NAME: "layers"})
    def __init__(self, rngs):
      self.w = Traced(rngs.params.normal((2, 2)), out_sharding=("a", "b"))

    @nnx.scan(in_axes=(0, nnx.Carry), transform_metadata={nnx.PARTITION_NAME: "layers"})
    def __call__(self, x):
      assert self.w.out_sharding == ("a", "b")
      return x @ self.w, None

  m = Block(nnx.Rngs(0))
  assert m.w.out_sharding == ("layers", "a", "b") and m.w.shape == (3, 2, 2)
  assert calls == [("add", 0, "layers")]
  m(jnp.ones((1, 2)))
  assert calls == [("add", 0, "layers"), ("remove", 0, "layers"), ("add", 0, "layers")]

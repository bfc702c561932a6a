"""``nnx.stack`` / ``nnx.unstack``: layers of one structure as one stacked Module and
back, for native and converted Equinox modules; and the scan-over-layers recipe on a
converted Equinox model (outputs and per-layer gradients against the unrolled model,
``to_eqx`` of the stack in Equinox's own stacked layout)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

D = 8


class Block(eqx.Module):
  """An Equinox transformer block: attention + MLP, each behind a LayerNorm."""

  norm1: eqx.nn.LayerNorm
  attn: eqx.nn.MultiheadAttention
  norm2: eqx.nn.LayerNorm
  mlp: eqx.nn.MLP

  def __init__(self, d, key):
    k1, k2 = jax.random.split(key)
    self.norm1, self.norm2 = eqx.nn.LayerNorm(d), eqx.nn.LayerNorm(d)
    self.attn = eqx.nn.MultiheadAttention(2, d, key=k1)
    self.mlp = eqx.nn.MLP(d, d, 2 * d, 1, key=k2)

  def __call__(self, x):
    h = jax.vmap(self.norm1)(x)
    x = x + self.attn(h, h, h)
    return x + jax.vmap(self.mlp)(jax.vmap(self.norm2)(x))


class Model(eqx.Module):
  blocks: list

  def __init__(self, n, d, key):
    self.blocks = [Block(d, k) for k in jax.random.split(key, n)]

  def __call__(self, x):
    for b in self.blocks:
      x = b(x)
    return x


class Tied(nnx.Module):
  """Two Linears sharing one kernel inside a layer (sharing that stack keeps)."""

  def __init__(self, seed):
    rngs = nnx.Rngs(seed)
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
    self.a = nnx.Linear(3, 3, kernel_init=init, rngs=rngs)
    self.b = nnx.Linear(3, 3, rngs=rngs)
    self.b.kernel = self.a.kernel
    self.count = nnx.BatchStat(jnp.array(seed, jnp.int32), tag="t")


def _native(seed):
  return nnx.Linear(2, 3, rngs=nnx.Rngs(seed))


class WithRngs(nnx.Module):
  """A layer holding an RNG stream (key and count Variables)."""

  def __init__(self, seed):
    self.lin = nnx.Linear(2, 2, rngs=nnx.Rngs(seed))
    self.drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=seed))


def _converted(seed):
  return nnx.from_eqx(eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(seed)))


def _converted_block(seed):
  return nnx.from_eqx(Block(4, jax.random.key(seed)))


MAKERS = {
  "native": _native,
  "converted": _converted,
  "block": _converted_block,
  "tied": Tied,
  "rngs": WithRngs,
}


def _same(a, b):
  """Bitwise: same GraphDef (types, statics, metadata, sharing) and same values."""
  assert nnx.graphdef(a) == nnx.graphdef(b)
  assert_trees_equal(nnx.state(a), nnx.state(b))


@settings(deadline=None, max_examples=10)  # eager stacking and slicing of every array
@given(
  kind=st.sampled_from(sorted(MAKERS)),
  seeds=st.lists(st.integers(0, 2**16), min_size=1, max_size=4),
  axis_name=st.sampled_from([None, "layers"]),
)
def test_unstack_of_stack_is_the_modules_bitwise(kind, seeds, axis_name):
  modules = [MAKERS[kind](s) for s in seeds]
  stacked = nnx.stack(modules, axis_name=axis_name)
  back = nnx.unstack(stacked, axis_name=axis_name)
  assert len(back) == len(modules)
  for a, b in zip(back, modules):
    assert type(a) is type(b)
    _same(a, b)
  _same(nnx.stack(back, axis_name=axis_name), stacked)  # and the other way round


def test_stacked_arrays_gain_a_leading_axis_and_keep_their_metadata():
  layers = [Tied(s) for s in range(3)]
  stacked = nnx.stack(layers, axis_name="layers")
  assert stacked.a.kernel.shape == (3, 3, 3)
  assert stacked.a.kernel.out_sharding == ("layers", "embed", "mlp")
  assert stacked.count.tag == "t" and type(stacked.count) is nnx.BatchStat
  assert stacked.b.kernel is stacked.a.kernel  # sharing within a layer is kept
  assert_trees_equal(stacked.count[...], jnp.arange(3, dtype=jnp.int32))
  assert layers[0].a.kernel.shape == (3, 3)  # the inputs are untouched
  assert layers[0].a.kernel.out_sharding == ("embed", "mlp")
  unnamed = nnx.stack(layers)
  assert unnamed.a.kernel.out_sharding == (None, "embed", "mlp")
  spec = nnx.get_partition_spec(nnx.state(stacked))["a"]["kernel"].value
  assert spec == jax.sharding.PartitionSpec("layers", "embed", "mlp")


def test_each_stacked_layer_draws_from_its_own_rng_stream():
  layers = [WithRngs(s) for s in range(3)]
  stacked = nnx.stack(layers)

  @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  def forward(x, layer):
    y = layer.drop(x)
    return x, y

  _, ys = forward(jnp.ones(64), stacked)
  assert_trees_equal(stacked.drop.rngs.count[...], jnp.ones(3, jnp.uint32))
  assert not jnp.array_equal(ys[0], ys[1])  # different keys per layer
  for i, layer in enumerate(layers):
    assert_trees_close(ys[i], layer.drop(jnp.ones(64)))  # each layer's own first draw


def test_stack_equals_vmap_over_the_constructor():
  @nnx.split_rngs(splits=3)
  @nnx.vmap(in_axes=0, out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
  def make(rngs):
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
    return nnx.Linear(2, 3, kernel_init=init, rngs=rngs)

  vmapped = make(nnx.Rngs(0))
  layers = nnx.unstack(vmapped, axis_name="layers")
  assert layers[0].kernel.out_sharding == ("embed", "mlp")
  _same(nnx.stack(layers, axis_name="layers"), vmapped)


def test_modules_of_different_structure_are_refused_naming_the_path():
  with pytest.raises(nnx.StackStructureError, match=r"modules\[1\].*out_features.*4.*3"):
    nnx.stack([nnx.Linear(2, 3, rngs=nnx.Rngs(0)), nnx.Linear(2, 4, rngs=nnx.Rngs(0))])
  a, b = nnx.Module(), nnx.Module()
  a.w, b.w = nnx.Param(jnp.ones((2, 3))), nnx.Param(jnp.ones((2, 4)))
  with pytest.raises(nnx.StackStructureError, match=r"at w: shape \(2, 4\).*shape \(2, 3\)"):
    nnx.stack([a, b])
  b.w = nnx.BatchStat(jnp.ones((2, 3)))
  with pytest.raises(nnx.StackStructureError, match="at w: a BatchStat .* a Param"):
    nnx.stack([a, b])
  b.w = nnx.Param(jnp.ones((2, 3)), out_sharding=("x", None))
  with pytest.raises(nnx.StackStructureError, match="at w: a Param with metadata"):
    nnx.stack([a, b])
  b.w, b.v = nnx.Param(jnp.ones((2, 3))), nnx.Param(jnp.ones(1))
  with pytest.raises(nnx.StackStructureError, match="at v: a Param in modules.*no attribute"):
    nnx.stack([a, b])
  e1 = nnx.from_eqx(eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0)))
  e2 = nnx.from_eqx(eqx.nn.MLP(3, 2, 5, 1, key=jax.random.key(0)))
  with pytest.raises(nnx.StackStructureError, match=r"at layers/0/out_features"):
    nnx.stack([e1, e2])
  with pytest.raises(nnx.StackStructureError, match="no modules"):
    nnx.stack([])


def test_a_variable_shared_between_layers_is_refused():
  a, b = nnx.Linear(2, 2, rngs=nnx.Rngs(0)), nnx.Linear(2, 2, rngs=nnx.Rngs(1))
  b.kernel = a.kernel
  with pytest.raises(nnx.StackStructureError, match=r"modules\[0\] \(at kernel\).*modules\[1\]"):
    nnx.stack([a, b])
  with pytest.raises(nnx.StackStructureError, match="shared"):
    nnx.stack([a, a])


def test_unstack_errors_name_the_paths():
  m = nnx.Module()
  m.w, m.s = nnx.Param(jnp.ones((3, 2))), nnx.Param(jnp.ones((4,)))
  with pytest.raises(nnx.StackStructureError, match=r"s has shape \(4,\)|w has shape \(3, 2\)"):
    nnx.unstack(m)
  m.s = nnx.Param(jnp.float32(1))
  with pytest.raises(nnx.StackStructureError, match="s is a scalar"):
    nnx.unstack(m)
  with pytest.raises(nnx.StackStructureError, match="no arrays"):
    nnx.unstack(nnx.Module())
  stacked = nnx.stack([Tied(0), Tied(1)], axis_name="layers")
  with pytest.raises(nnx.ShardingError, match="a/kernel.*'stage'"):
    nnx.unstack(stacked, axis_name="stage")


def _stack_arrays(trees):
  return jax.tree.map(lambda *a: jnp.stack(a), *[eqx.filter(t, eqx.is_array) for t in trees])


@pytest.mark.parametrize("policy", [None, jax.checkpoint_policies.nothing_saveable])
def test_scanning_a_converted_models_stack_matches_the_unrolled_equinox_model(policy):
  model = Model(3, D, jax.random.key(0))
  x = jax.random.normal(jax.random.key(1), (5, D))
  blocks = nnx.stack(nnx.from_eqx(model).blocks)

  @nnx.remat(policy=policy)
  def block(b, x):
    return b(x)

  @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
  def forward(x, b):
    return block(b, x)

  def loss(blocks, x):
    return (forward(x, blocks) ** 2).mean()

  assert_trees_close(nnx.jit(forward)(x, blocks), eqx.filter_jit(model)(x))
  grads = nnx.jit(nnx.grad(loss))(blocks, x)
  eqx_grads = eqx.filter_jit(eqx.filter_grad(lambda m, x: (m(x) ** 2).mean()))(model, x)
  per_layer = nnx.to_eqx(nnx.merge(nnx.graphdef(blocks), grads))  # Equinox's layout
  assert_trees_close(eqx.filter(per_layer, eqx.is_array), _stack_arrays(eqx_grads.blocks))


def test_to_eqx_of_the_stack_is_equinoxs_stacked_layout():
  model = Model(3, D, jax.random.key(0))
  stacked = nnx.to_eqx(nnx.stack(nnx.from_eqx(model).blocks))
  built = eqx.filter_vmap(lambda k: Block(D, k))(jax.random.split(jax.random.key(0), 3))
  assert jax.tree.structure(stacked) == jax.tree.structure(built)
  assert eqx.tree_equal(eqx.filter(stacked, eqx.is_array), _stack_arrays(model.blocks))
  dynamic, static = eqx.partition(stacked, eqx.is_array)

  def step(x, d):
    return eqx.combine(d, static)(x), None

  x = jax.random.normal(jax.random.key(1), (5, D))
  scanned = jax.jit(jax.lax.scan, static_argnums=0)(step, x, dynamic)[0]
  assert_trees_close(scanned, eqx.filter_jit(model)(x))
  back = nnx.unstack(nnx.from_eqx(stacked))
  assert eqx.tree_equal(nnx.to_eqx(back[1]), model.blocks[1])

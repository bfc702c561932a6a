"""``nnx.set_partitioning``: sharding annotations by path pattern, and a converted
Equinox model annotated that way through placement on a 2x4 mesh, training with
``nnx.jit`` and with ``eqx.filter_jit``, an orbax checkpoint, ``nnx.stack`` and
``nnx.to_eqx``: shardings kept at each step, losses those of the unsharded run."""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

D = 8


class Block(eqx.Module):
  norm: eqx.nn.LayerNorm
  attn: eqx.nn.MultiheadAttention
  mlp: eqx.nn.MLP

  def __init__(self, d, key):
    k1, k2 = jax.random.split(key)
    self.norm = eqx.nn.LayerNorm(d)
    self.attn = eqx.nn.MultiheadAttention(2, d, key=k1)
    self.mlp = eqx.nn.MLP(d, d, 4 * d, 1, key=k2)

  def __call__(self, x):
    h = jax.vmap(self.norm)(x)
    x = x + self.attn(h, h, h)
    return x + jax.vmap(self.mlp)(h)


class Model(eqx.Module):
  blocks: list

  def __init__(self, n, key):
    self.blocks = [Block(D, k) for k in jax.random.split(key, n)]

  def __call__(self, x):
    for b in self.blocks:
      x = b(x)
    return x


# Megatron-style tensor parallelism in Equinox's (out, in) weight layout.
TABLE = {
  r"(query|key|value)_proj/weight": ("model", None),
  "output_proj/weight": (None, "model"),
  "mlp/layers/0/weight": ("model", None),
  "mlp/layers/0/bias": ("model",),
  "mlp/layers/1/weight": (None, "model"),
}


def _model():
  return nnx.from_eqx(Model(2, jax.random.key(0)))


def _batch(step):
  k = jax.random.key(100 + step)
  return jax.random.normal(k, (4, 3, D)), jax.random.normal(jax.random.fold_in(k, 1), (4, 3, D))


def _loss(model, x, y):
  return ((jax.vmap(model)(x) - y) ** 2).mean()


def _specs(tree):
  """The PartitionSpec of every array leaf of a pytree (Modules included)."""
  return [x.sharding.spec for x in jax.tree.leaves(tree) if isinstance(x, jax.Array)]


def _expected_specs(model, mesh):
  return [s.spec for s in jax.tree.leaves(nnx.get_named_sharding(nnx.state(model), mesh))]


# --------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------
def test_field_names_match_everywhere_and_full_paths_match_one_place():
  m = _model()
  found = nnx.set_partitioning(m, TABLE)
  assert found[r"(query|key|value)_proj/weight"] == [
    f"blocks/{i}/attn/{n}_proj/weight" for i in range(2) for n in ("key", "query", "value")
  ]
  assert m.blocks[1].attn.query_proj.weight.out_sharding == ("model", None)
  assert m.blocks[0].norm.scale.get_metadata("out_sharding", None) is None  # no pattern
  one = _model()
  nnx.set_partitioning(one, {"blocks/1/mlp/layers/1/weight": (None, "model")})
  assert one.blocks[1].mlp.layers[1].weight.out_sharding == (None, "model")
  assert one.blocks[0].mlp.layers[1].weight.get_metadata("out_sharding", None) is None
  # a pattern matches whole keys only: 'eight' is not 'weight'
  with pytest.raises(nnx.UnmatchedPatternError, match="'eight'"):
    nnx.set_partitioning(_model(), {"eight": (None, None)})


def test_the_first_matching_pattern_wins():
  m = _model()
  found = nnx.set_partitioning(m, [("query_proj/weight", (None, "model")), ("weight", None)])
  assert m.blocks[0].attn.query_proj.weight.out_sharding == (None, "model")
  assert m.blocks[0].attn.key_proj.weight.out_sharding == (None, None)  # None: replicated
  assert "blocks/0/attn/query_proj/weight" not in found["weight"]


def test_every_unmatched_pattern_is_reported_and_nothing_changes():
  m = _model()
  table = {**TABLE, "querry_proj/weight": ("model", None), "mlp/layers/2/weight": (None, None)}
  with pytest.raises(nnx.UnmatchedPatternError, match="2 patterns.*'querry_proj/weight'") as e:
    nnx.set_partitioning(m, table)
  assert "'mlp/layers/2/weight'" in str(e.value) and "query_proj/weight" in str(e.value)
  assert m.blocks[0].attn.query_proj.weight.get_metadata("out_sharding", None) is None
  found = nnx.set_partitioning(m, table, allow_unmatched=True)
  assert found["querry_proj/weight"] == [] and found["mlp/layers/2/weight"] == []
  assert m.blocks[0].attn.query_proj.weight.out_sharding == ("model", None)


def test_spec_length_and_pattern_errors_name_the_path():
  with pytest.raises(nnx.ShardingError, match=r"blocks/0/mlp/layers/0/bias has 2 entries.*\(32,\)"):
    nnx.set_partitioning(_model(), {"mlp/layers/0/bias": ("model", None)})
  with pytest.raises(nnx.ShardingError, match="not a valid regular expression"):
    nnx.set_partitioning(_model(), {"weight(": ("model", None)})
  stacked = nnx.stack(_model().blocks)  # a per-layer spec on a stacked array
  with pytest.raises(nnx.ShardingError, match=r"shape \(2, 8, 8\).*stack axis first"):
    nnx.set_partitioning(stacked, {"query_proj/weight": P("model", None)})
  nnx.set_partitioning(stacked, {"query_proj/weight": P(None, "model", None)})
  assert stacked.attn.query_proj.weight.out_sharding == (None, "model", None)


def test_rules_are_stored_and_logical_names_resolve_through_them():
  m = _model()
  nnx.set_partitioning(m, {"query_proj/weight": ("heads", "embed")}, rules=[("heads", "model")])
  w = m.blocks[0].attn.query_proj.weight
  assert w.out_sharding == ("heads", "embed") and w.sharding_rules == (("heads", "model"),)
  assert nnx.get_partition_spec(w).value == P("model", None)


def test_a_shared_variable_matches_by_any_of_its_paths_and_only_filters():
  m = nnx.Module()
  m.a = nnx.Linear(2, 4, rngs=nnx.Rngs(0))
  m.b = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
  m.b.bias = m.a.bias  # one Variable at a/bias (its first path) and b/bias
  m.count = nnx.BatchStat(jnp.zeros(4))
  table = {"b/bias": ("model",), "count": ("model",)}
  with pytest.raises(nnx.UnmatchedPatternError, match="'count'"):
    nnx.set_partitioning(m, table, only=nnx.Param)
  found = nnx.set_partitioning(m, table, only=nnx.Param, allow_unmatched=True)
  assert found == {"b/bias": ["b/bias"], "count": []}
  assert m.a.bias.out_sharding == ("model",)
  assert m.count.get_metadata("out_sharding", None) is None


def test_the_seed_era_sharding_key_is_replaced():
  p = nnx.Param(jnp.ones((2, 4)), sharding=("x", "y"))
  m = nnx.Module()
  m.p = p
  nnx.set_partitioning(m, {"p": (None, "model")})
  assert p.get_metadata("sharding", None) is None and p.out_sharding == (None, "model")
  assert nnx.get_partition_spec(p).value == P(None, "model")


# --------------------------------------------------------------------------
# End to end on a 2x4 mesh
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mesh():
  # Auto axes: XLA propagates the parameters' shardings through Equinox's reshapes
  return jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def _placed(mesh):
  model = _model()
  nnx.set_partitioning(model, TABLE)
  state = nnx.state(model)
  nnx.update(model, jax.device_put(state, nnx.get_named_sharding(state, mesh)))
  return model


@pytest.mark.devices(8)
def test_placement_training_checkpoint_and_to_eqx_keep_the_shardings(mesh, tmp_path):
  model, plain = _placed(mesh), _model()
  want = _expected_specs(model, mesh)
  assert _specs(nnx.state(model)) == want
  assert P("model", None) in want and P(None, "model") in want
  assert model.blocks[0].attn.query_proj.weight.value.sharding == NamedSharding(
    mesh, P("model", None)
  )

  @nnx.jit
  def step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(_loss)(model, x, y)
    opt.update(model, grads)
    return loss

  opts = [nnx.Optimizer(m, optax.adam(1e-2), wrt=nnx.Param) for m in (model, plain)]
  for i in range(3):
    losses = [step(m, o, *_batch(i)) for m, o in zip((model, plain), opts)]
    assert_trees_close(losses[0], losses[1])
    assert _specs(nnx.state(model)) == want
  assert_trees_close(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(plain)))

  path = nnx.checkpoint.save(tmp_path / "ckpt", model)

  def make():
    m = _model()
    nnx.set_partitioning(m, TABLE)
    return m

  graphdef, abstract = nnx.get_abstract_model(make, mesh)
  target = nnx.merge(graphdef, abstract)
  restored = nnx.checkpoint.restore(path, target)
  assert _specs(nnx.state(restored)) == want
  assert_trees_equal(nnx.state(restored), nnx.state(model))

  e = nnx.to_eqx(model)
  assert e.blocks[1].mlp.layers[1].weight.sharding == NamedSharding(mesh, P(None, "model"))
  query = model.blocks[0].attn.query_proj.weight
  assert_trees_equal(e.blocks[0].attn.query_proj.weight, query[...])


@pytest.mark.devices(8)
def test_equinox_style_training_keeps_the_shardings(mesh):
  model, plain = _placed(mesh), _model()
  want = _expected_specs(model, mesh)
  tx = optax.sgd(1e-2)

  @eqx.filter_jit
  def step(model, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(_loss)(model, x, y)
    updates, opt_state = tx.update(grads, opt_state)
    return eqx.apply_updates(model, updates), opt_state, loss

  states = [tx.init(eqx.filter(m, eqx.is_array)) for m in (model, plain)]
  for i in range(3):
    (model, states[0], a), (plain, states[1], b) = [
      step(m, s, *_batch(i)) for m, s in zip((model, plain), states)
    ]
    assert_trees_close(a, b)
    assert _specs(nnx.state(model)) == want


@pytest.mark.devices(8)
def test_annotate_then_stack_then_scan_on_the_mesh(mesh):
  model, plain = _placed(mesh), _model()
  stacked = nnx.stack(model.blocks, axis_name=None)
  w = stacked.attn.query_proj.weight
  assert w.out_sharding == (None, "model", None)
  state = nnx.state(stacked)
  nnx.update(stacked, jax.device_put(state, nnx.get_named_sharding(state, mesh)))
  assert w.value.sharding.spec == P(None, "model", None)

  @nnx.jit
  def forward(blocks, x):
    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    def run(x, b):
      return b(x)

    return run(x, blocks)

  x = _batch(0)[0][0]
  assert_trees_close(forward(stacked, x), eqx.filter_jit(nnx.to_eqx(plain))(x))

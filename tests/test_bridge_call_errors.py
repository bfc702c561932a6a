"""Errors of converted Equinox layers at call time: a batch where one example is
expected (``ExampleShapeError``) and JAX's sharding-type errors on a mesh with
Explicit axes (``ExplicitShardingError``). Both are raised while tracing; a call
that works compiles to the same program with or without the checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import nnx_eqx as nnx
from nnx_eqx.bridge.layers import _attention, _layers, _norms, _recurrent, _sharding
from nnx_eqx.testing import assert_trees_equal, stablehlo_text

K = jr.split(jr.key(0), 8)


def _cases():
  yield "MLP", eqx.nn.MLP(4, 2, 8, depth=2, key=K[0]), (jnp.ones((32, 4)),), (4,)
  yield "Linear", eqx.nn.Linear(4, 3, key=K[1]), (jnp.ones((16, 4)),), (4,)
  yield "Linear", eqx.nn.Linear("scalar", 3, key=K[1]), (jnp.ones(16),), ()
  yield "Conv", eqx.nn.Conv2d(2, 3, 3, key=K[2]), (jnp.ones((8, 2, 6, 6)),), "(2, *spatial)"
  yield "Embedding", eqx.nn.Embedding(7, 4, key=K[3]), (jnp.array([1, 2, 3]),), ()
  yield "LayerNorm", eqx.nn.LayerNorm(4), (jnp.ones((8, 4)),), (4,)
  yield "RMSNorm", eqx.nn.RMSNorm(4), (jnp.ones((8, 4)),), (4,)
  x = jnp.ones((3, 5, 8))
  yield (
    "MultiheadAttention",
    eqx.nn.MultiheadAttention(2, 8, key=K[4]),
    (x, x, x),
    "(seq_length, 8)",
  )
  yield "GRUCell", eqx.nn.GRUCell(3, 4, key=K[5]), (jnp.ones((8, 3)), jnp.zeros((8, 4))), (3,)
  h = jnp.zeros((8, 4))
  yield "LSTMCell", eqx.nn.LSTMCell(3, 4, key=K[6]), (jnp.ones((8, 3)), (h, h)), (3,)


CASES = list(_cases())


@pytest.mark.parametrize("name,model,args,expected", CASES, ids=[c[0] for c in CASES])
def test_a_batch_given_to_a_converted_layer_says_to_use_vmap(name, model, args, expected):
  m = nnx.from_eqx(model)
  got = jnp.shape(args[0])
  with pytest.raises(nnx.bridge.ExampleShapeError) as err:
    m(*args)
  msg = str(err.value)
  eqx_name = type(model).__name__
  assert msg.startswith(f"nnx.bridge.{name} (from eqx.nn.{eqx_name}): input `"), msg
  assert f"has shape {got}, but the layer takes one example of shape {expected}" in msg
  assert f"this looks like a batch of {got[0]}" in msg
  assert "`jax.vmap(model)(x)`" in msg and "eqx.filter_vmap" in msg
  assert isinstance(err.value, nnx.InputShapeError) and isinstance(err.value, ValueError)


def test_the_mlp_of_the_report_and_its_fix():
  m = nnx.from_eqx(eqx.nn.MLP(4, 2, 8, depth=2, key=K[0]))
  with pytest.raises(nnx.bridge.ExampleShapeError, match=r"shape \(32, 4\).*shape \(4,\)"):
    jax.jit(lambda x: m(x))(jnp.ones((32, 4)))
  assert jax.vmap(m)(jnp.ones((32, 4))).shape == (32, 2)


def test_a_wrong_example_names_the_layer_path_inside_sequential():
  seq = eqx.nn.Sequential([eqx.nn.Linear(4, 6, key=K[0]), eqx.nn.Linear(5, 2, key=K[1])])
  m = nnx.from_eqx(seq)
  with pytest.raises(nnx.bridge.ExampleShapeError) as err:
    m(jnp.ones(4))
  msg = str(err.value)
  assert msg.startswith("nnx.bridge.Linear (from eqx.nn.Linear) at root.layers[1]: input `x`")
  assert "has shape (6,), but the layer takes one example of shape (5,)." in msg
  assert "looks like a batch" not in msg


def test_equinox_accepts_what_the_check_accepts():
  # weight @ x with a matrix x runs in Equinox; the converted layer runs it too
  e = eqx.nn.Linear(4, 3, use_bias=False, key=K[0])
  x = jnp.ones((4, 5))
  assert_trees_equal(nnx.from_eqx(e)(x), e(x))


def _no_checks(monkeypatch):
  """Takes every input and sharding check of the converted layers out."""

  def no_check(*args, **kwargs):
    return None

  class NoErrors:
    def __init__(self, *args):
      pass

    def __enter__(self):
      return None

    def __exit__(self, *exc):
      return False

  monkeypatch.setattr(_layers, "check_linear_input", no_check)
  for module in (_layers, _norms, _recurrent):
    monkeypatch.setattr(module, "check_example", no_check)
  for module in (_layers, _attention, _recurrent):
    monkeypatch.setattr(module, "sharding_errors", NoErrors)


def _program_cases():
  x4 = jr.normal(K[7], (4,))
  yield "MLP", eqx.nn.MLP(4, 2, 8, depth=2, key=K[0]), lambda m, x: m(x), x4
  yield "Linear-scalar", eqx.nn.Linear("scalar", 3, key=K[1]), lambda m, x: m(x), jnp.array(0.5)
  yield "Conv2d", eqx.nn.Conv2d(2, 3, 3, key=K[2]), lambda m, x: m(x), jnp.ones((2, 6, 6))
  yield "Embedding", eqx.nn.Embedding(7, 4, key=K[3]), lambda m, x: jax.vmap(m)(x), jnp.arange(3)
  yield "LayerNorm", eqx.nn.LayerNorm(4), lambda m, x: m(x), x4
  yield "RMSNorm", eqx.nn.RMSNorm(4), lambda m, x: m(x), x4
  mha = eqx.nn.MultiheadAttention(2, 8, key=K[4])
  yield "MultiheadAttention", mha, lambda m, x: m(x, x, x), jnp.ones((5, 8))
  yield "GRUCell", eqx.nn.GRUCell(4, 4, key=K[5]), lambda m, x: m(x, x), x4
  yield "LSTMCell", eqx.nn.LSTMCell(4, 4, key=K[6]), lambda m, x: m(x, (x, x)), x4


PROGRAM_CASES = list(_program_cases())


@pytest.mark.parametrize("name,model,call,x", PROGRAM_CASES, ids=[c[0] for c in PROGRAM_CASES])
def test_the_checks_leave_the_compiled_program_unchanged(name, model, call, x, monkeypatch):
  # (that it is the Equinox layer's own program: test_bridge_programs.py)
  m = nnx.from_eqx(model)
  checked = stablehlo_text(jax.jit(call).lower(m, x))
  _no_checks(monkeypatch)
  unchecked = stablehlo_text(jax.jit(call).lower(m, x))
  assert checked == unchecked
  assert "stablehlo." in checked


def test_without_the_checks_jax_raises_its_own_error(monkeypatch):
  _no_checks(monkeypatch)
  m = nnx.from_eqx(eqx.nn.MLP(4, 2, 8, depth=2, key=K[0]))
  with pytest.raises(TypeError, match="dot_general requires contracting dimensions"):
    m(jnp.ones((32, 4)))


# -- sharding on a mesh with Explicit axes -------------------------------------------
def _row_parallel(mesh):
  """An Equinox Linear whose weight and input are both sharded on the contracted axis."""
  e = eqx.nn.Linear(8, 4, key=K[0])
  weight = jax.device_put(e.weight, NamedSharding(mesh, P(None, "model")))
  e = eqx.tree_at(lambda e: e.weight, e, weight)
  x = jax.device_put(jr.normal(K[1], (8,)), NamedSharding(mesh, P("model")))
  return e, x


@pytest.mark.devices(8)
@pytest.mark.parametrize("shape", [(2, 4), (1, 8)])
def test_a_sharding_type_error_names_the_layer_and_the_mesh_setting(shape):
  mesh = jax.make_mesh(shape, ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
  e, x = _row_parallel(mesh)
  m = nnx.from_eqx(e)
  with pytest.raises(nnx.bridge.ExplicitShardingError) as err:
    nnx.jit(lambda m, x: m(x))(m, x)
  msg = str(err.value)
  assert msg.startswith("nnx.bridge.Linear (from eqx.nn.Linear): JAX cannot shard"), msg
  assert "Contracting dimensions are sharded" in msg
  assert "the mesh's axes 'data', 'model' are Explicit" in msg
  assert "axis_types=(jax.sharding.AxisType.Auto,) * 2)" in msg
  assert "jax.sharding.reshard" in msg
  assert type(err.value.__cause__) in _sharding.SHARDING_TYPE_ERRORS
  assert isinstance(err.value, nnx.ShardingError)


@pytest.mark.devices(8)
def test_a_sharding_type_error_inside_sequential_names_the_path():
  mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
  e, x = _row_parallel(mesh)
  m = nnx.from_eqx(eqx.nn.Sequential([eqx.nn.Lambda(jnp.tanh), e]))
  with jax.set_mesh(mesh), pytest.raises(nnx.bridge.ExplicitShardingError) as err:
    m(x)
  assert str(err.value).startswith("nnx.bridge.Linear (from eqx.nn.Linear) at root.layers[1]:")


@pytest.mark.devices(8)
def test_the_fix_of_the_sharding_message_works():
  mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
  e, x = _row_parallel(mesh)
  m = nnx.from_eqx(e)
  assert_trees_equal(nnx.jit(lambda m, x: m(x))(m, x), jax.jit(lambda x: e(x))(x))

"""A converted model is its source's program, both ways.

For every ``eqx.nn`` layer the bridge registers, every ``nnx.nn`` layer and
user-defined modules, the converted model's forward pass, its gradients with
respect to parameters and inputs, and its updated state lower to the same
stripped StableHLO as the source's and give the same bits
(``nnx_eqx.testing.assert_same_program``).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_same_program, assert_trees_equal, stablehlo_text

KEYS = jr.split(jr.key(0), 16)


# -- Equinox layers -> NNX --------------------------------------------------------
def _plain(model, x):
  return model(x)


def _eqx_stateless(model, state, x):
  return model(x), state


def _vmapped_bn(model, state, x):
  return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def _nnx_bn(m, x):
  return nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name="batch")(m, x)


def _dropout_call(model, x):
  return model(x, key=jr.key(3))


def _cell(model, x):
  return model(x[0], x[1] if x.shape[0] == 2 else (x[1], x[2]))


def _attn(model, x):
  return model(x, x, x)


def _embedding(model, x):
  return jax.vmap(model)(x)


def _eqx_cases():
  k = iter(KEYS)
  enn = eqx.nn
  x4 = jr.normal(KEYS[15], (4,))
  img = jr.normal(KEYS[14], (2, 6, 6))

  def seq(n):
    return jr.normal(KEYS[13], n)

  yield "Linear", enn.Linear(4, 3, key=next(k)), _plain, x4
  yield "Linear-scalar", enn.Linear("scalar", 3, key=next(k)), _plain, jnp.array(0.7)
  yield "Linear-nobias", enn.Linear(4, "scalar", use_bias=False, key=next(k)), _plain, x4
  yield "Conv1d", enn.Conv1d(2, 3, 3, padding=1, key=next(k)), _plain, seq((2, 7))
  yield "Conv2d", enn.Conv2d(2, 3, 3, stride=2, key=next(k)), _plain, img
  yield "Conv3d", enn.Conv3d(2, 2, 2, key=next(k)), _plain, seq((2, 3, 4, 4))
  yield "Embedding", enn.Embedding(7, 4, key=next(k)), _embedding, jnp.array([1, 5, 2])
  yield "LayerNorm", enn.LayerNorm(4), _plain, x4
  yield "RMSNorm", enn.RMSNorm(4), _plain, x4
  yield "Dropout", enn.Dropout(0.4), _dropout_call, x4
  yield "Identity", enn.Identity(), _plain, x4
  yield "Lambda", enn.Lambda(jnp.tanh), _plain, x4
  mlp = enn.MLP(4, 2, 8, 2, key=next(k))
  yield "MLP", mlp, _plain, x4
  layers = [enn.Linear(4, 6, key=next(k)), enn.Lambda(jax.nn.relu), enn.Linear(6, 2, key=next(k))]
  yield "Sequential", enn.Sequential(layers), _plain, x4
  for name, pool in [
    ("AvgPool1d", enn.AvgPool1d(2, 1)),
    ("AvgPool2d", enn.AvgPool2d(2, 2)),
    ("AvgPool3d", enn.AvgPool3d(2, 1)),
    ("MaxPool1d", enn.MaxPool1d(3, 2)),
    ("MaxPool2d", enn.MaxPool2d(2, 1)),
    ("MaxPool3d", enn.MaxPool3d(2, 2)),
  ]:
    x = {1: seq((2, 7)), 2: img, 3: seq((2, 4, 4, 4))}[int(name[-2])]
    yield name, pool, _plain, x
  mha = enn.MultiheadAttention(2, 8, key=next(k))
  yield "MultiheadAttention", mha, _attn, seq((5, 8))
  yield "GRUCell", enn.GRUCell(4, 4, key=next(k)), _cell, seq((2, 4))
  yield "LSTMCell", enn.LSTMCell(4, 4, key=next(k)), _cell, seq((3, 4))
  emb, out = enn.Embedding(7, 4, key=next(k)), enn.Linear(4, 7, key=next(k))
  tied = enn.Shared((emb, out), lambda t: t[1].weight, lambda t: t[0].weight)
  yield "Shared", tied, lambda m, x: m()[1](x), x4


EQX_CASES = list(_eqx_cases())


def test_every_registered_equinox_layer_has_a_case():
  covered = {type(m) for _, m, _, _ in EQX_CASES} | {eqx.nn.BatchNorm}
  builtin = {c.eqx_type for c in nnx.bridge.registered() if c.eqx_type.__module__[:8] == "equinox."}
  assert builtin - covered == set()


@pytest.mark.parametrize("name,model,call,x", EQX_CASES, ids=[c[0] for c in EQX_CASES])
def test_from_eqx_runs_the_equinox_program(name, model, call, x):
  m = nnx.from_eqx(model)
  assert_same_program((model, None), m, lambda mo, s, x: (call(mo, x), s), call, x)
  assert_trees_equal(nnx.to_eqx(m), model)


def test_from_eqx_batchnorm_runs_the_equinox_program():
  model, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(4, "batch", mode="batch")
  m = nnx.from_eqx(model, state)
  assert_same_program((model, state), m, _vmapped_bn, _nnx_bn, jr.normal(KEYS[0], (3, 4)))


def test_linear_converts_to_one_class_wherever_it_sits():
  class Block(eqx.Module):
    lin: eqx.nn.Linear

    def __call__(self, x):
      return self.lin(x)

  lin = eqx.nn.Linear(4, 4, key=KEYS[0])
  places = [
    nnx.from_eqx(lin),
    nnx.from_eqx(Block(lin)).lin,
    nnx.from_eqx(eqx.nn.Sequential([lin])).layers[0],
    nnx.from_eqx(eqx.nn.MLP(4, 4, 4, 1, key=KEYS[1])).layers[0],
    nnx.from_eqx(eqx.nn.MultiheadAttention(2, 4, key=KEYS[2])).query_proj,
  ]
  assert {type(p) for p in places} == {nnx.bridge.Linear}
  assert all(p.weight.value.shape == (4, 4) for p in places)


# -- user-defined modules, both ways ---------------------------------------------------
class EqxBlock(eqx.Module):
  """An Equinox model of one's own: Linear layers, a norm, a residual."""

  lin1: eqx.nn.Linear
  norm: eqx.nn.LayerNorm
  lin2: eqx.nn.Linear
  scale: jax.Array

  def __init__(self, key):
    k1, k2 = jr.split(key)
    self.lin1 = eqx.nn.Linear(4, 8, key=k1)
    self.norm = eqx.nn.LayerNorm(8)
    self.lin2 = eqx.nn.Linear(8, 4, key=k2)
    self.scale = jnp.full((4,), 0.5)

  def __call__(self, x):
    return x + self.scale * self.lin2(jax.nn.gelu(self.norm(self.lin1(x))))


class NnxBlock(nnx.Module):
  """An NNX model of one's own: batched Linear layers, a norm, a conv, dropout."""

  def __init__(self, rngs):
    self.lin1 = nnx.Linear(4, 8, rngs=rngs)
    self.norm = nnx.LayerNorm(8, rngs=rngs)
    self.conv = nnx.Conv(8, 8, 3, rngs=rngs)
    self.lin2 = nnx.Linear(8, 4, rngs=rngs)
    self.layers = [nnx.Linear(4, 4, rngs=rngs) for _ in range(2)]

  def __call__(self, x):
    h = self.conv(self.norm(self.lin1(x)))
    x = x + self.lin2(jax.nn.gelu(h))
    for layer in self.layers:
      x = layer(x)
    return x


def test_from_eqx_of_a_user_module_runs_its_program():
  source = EqxBlock(KEYS[1])
  m = nnx.from_eqx(source)
  assert type(m.lin1) is nnx.bridge.Linear and m.lin1.weight.value.shape == (8, 4)
  assert_same_program((source, None), m, _eqx_stateless, _plain, jr.normal(KEYS[2], (4,)))
  assert_trees_equal(nnx.to_eqx(m), source)


def test_to_eqx_of_a_user_module_runs_its_program():
  m = NnxBlock(nnx.Rngs(0))
  e = nnx.to_eqx(m)
  assert e.lin1.kernel.shape == (4, 8)  # NNX's layout, kept
  assert_same_program((e, None), m, _eqx_stateless, _plain, jr.normal(KEYS[0], (2, 5, 4)))
  text = stablehlo_text(eqx.filter_jit(lambda e, x: e(x)).lower(e, jnp.ones((2, 5, 4))))
  assert "transpose" not in text
  assert_trees_equal(nnx.state(nnx.from_eqx(e)), nnx.state(m))


# -- NNX layers -> Equinox -------------------------------------------------------------
def _cell_call(m, x):
  carry = m.initialize_carry(x.shape, rngs=None)
  return m(carry, x)


def _nnx_cases():
  r = nnx.Rngs(0)
  x = jr.normal(KEYS[0], (2, 4))
  img = jr.normal(KEYS[1], (1, 6, 6, 2))
  seq = jr.normal(KEYS[2], (2, 5, 4))
  yield "Linear", nnx.Linear(4, 3, rngs=r), _plain, x
  yield "LinearGeneral", nnx.LinearGeneral(4, (2, 3), rngs=r), _plain, x
  yield "Einsum", nnx.Einsum("ab,bc->ac", (4, 3), (3,), rngs=r), _plain, x
  yield "Conv", nnx.Conv(2, 3, (3, 3), rngs=r), _plain, img
  yield "ConvTranspose", nnx.ConvTranspose(2, 3, (3, 3), rngs=r), _plain, img
  yield "Embed", nnx.Embed(7, 4, rngs=r), _plain, jnp.array([1, 5, 2])
  yield "LayerNorm", nnx.LayerNorm(4, rngs=r), _plain, x
  yield "RMSNorm", nnx.RMSNorm(4, rngs=r), _plain, x
  yield "GroupNorm", nnx.GroupNorm(4, num_groups=2, rngs=r), _plain, x
  yield "InstanceNorm", nnx.InstanceNorm(2, rngs=r), _plain, img
  yield "BatchNorm", nnx.BatchNorm(4, rngs=r), _plain, x
  yield "Dropout", nnx.Dropout(0.4, rngs=nnx.Rngs(dropout=1)), _plain, x
  mha = nnx.MultiHeadAttention(2, 8, decode=False, rngs=r)
  yield "MultiHeadAttention", mha, _plain, jr.normal(KEYS[3], (2, 5, 8))
  for cell in (nnx.LSTMCell, nnx.OptimizedLSTMCell, nnx.GRUCell, nnx.SimpleCell):
    yield cell.__name__, cell(4, 4, rngs=r), _cell_call, x
  yield "RNN", nnx.RNN(nnx.GRUCell(4, 4, rngs=r)), _plain, seq
  bi = nnx.Bidirectional(nnx.RNN(nnx.LSTMCell(4, 3, rngs=r)), nnx.RNN(nnx.GRUCell(4, 3, rngs=r)))
  yield "Bidirectional", bi, _plain, seq
  yield "LoRA", nnx.LoRA(4, 2, 3, rngs=r), _plain, x
  yield "LoRALinear", nnx.LoRALinear(4, 3, lora_rank=2, rngs=r), _plain, x
  yield "PReLU", nnx.PReLU(), _plain, x
  yield "SpectralNorm", nnx.SpectralNorm(nnx.Linear(4, 3, rngs=r), rngs=r), _plain, x
  yield "WeightNorm", nnx.WeightNorm(nnx.Linear(4, 3, rngs=r), rngs=r), _plain, x
  yield "user module", NnxBlock(r), _plain, seq


NNX_CASES = list(_nnx_cases())


@pytest.mark.parametrize("name,m,call,x", NNX_CASES, ids=[c[0] for c in NNX_CASES])
def test_to_eqx_runs_the_nnx_program(name, m, call, x):
  e, state = nnx.to_eqx_with_state(m)
  stateful = e.is_stateful() if isinstance(e, nnx.bridge.NnxModule) else False

  def eqx_call(model, state, x):
    if stateful:  # takes and returns its eqx.nn.State, as Equinox's stateful layers
      return model(x, state)
    return call(model, x), state

  assert_same_program((e, state), m, eqx_call, call, x)
  back = nnx.from_eqx(e, state)
  assert type(back) is type(m)
  assert_trees_equal(nnx.state(back), nnx.state(m))

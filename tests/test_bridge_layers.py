"""Built-in converter pairs: each eqx.nn layer converts exactly and computes the same outputs."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

KEYS = jax.random.split(jax.random.key(0), 8)


def roundtrip(e, state=None):
  m = nnx.from_eqx(e, state)
  back = nnx.to_eqx(m) if state is None else nnx.to_eqx_with_state(m)
  assert_trees_equal(back, e if state is None else (e, state))
  return m


def close(a, b):
  """The leaves agree within the policy (the containers may differ: tuple vs list)."""
  assert_trees_close(jax.tree.leaves(a), jax.tree.leaves(b))


def test_linear_becomes_bridge_linear_in_equinox_layout():
  e = eqx.nn.Linear(3, 2, key=KEYS[0])
  m = roundtrip(e)
  assert type(m) is nnx.bridge.Linear and m.weight.value is e.weight
  x = jnp.arange(3.0)
  assert_trees_equal(m(x), e(x))  # Equinox's equations: the same program


def test_native_linear_on_request_transposes_the_weight():
  e = eqx.nn.Linear(3, 2, key=KEYS[0])
  m = nnx.from_eqx(e, native=True)
  assert type(m) is nnx.Linear
  assert_trees_equal(m.kernel.value, e.weight.T)
  x = jnp.arange(3.0)
  close(m(x), e(x))  # x @ kernel: another program, equal values up to rounding
  assert m(jnp.ones((5, 3))).shape == (5, 2)  # nnx.Linear also takes batches
  assert_trees_equal(nnx.to_eqx(m, native=True), e)
  assert type(nnx.to_eqx(m)) is nnx.bridge.KernelLinear  # by default it keeps its layout


@pytest.mark.parametrize("din,dout", [("scalar", 3), (3, "scalar"), ("scalar", "scalar")])
def test_scalar_linear_keeps_equinox_layout(din, dout):
  e = eqx.nn.Linear(din, dout, key=KEYS[1])
  m = roundtrip(e)
  assert type(m) is nnx.bridge.Linear and m.weight.value.shape == e.weight.shape
  x = jnp.array(0.5) if din == "scalar" else jnp.ones(3)
  assert_trees_close(m(x), e(x))


def test_linear_inside_user_module_keeps_equinox_layout():
  class Wrap(eqx.Module):
    lin: eqx.nn.Linear

    def __call__(self, x):
      return self.lin(x)

  m = roundtrip(Wrap(eqx.nn.Linear(3, 2, key=KEYS[0])))
  assert type(m.lin) is nnx.bridge.Linear


CONV_CASES = [
  (1, {}),
  (1, {"padding": 1, "stride": 2, "padding_mode": "CIRCULAR"}),
  (1, {"padding": "SAME", "padding_mode": "REFLECT", "groups": 2}),
  (2, {"padding": 1, "stride": 2}),
  (2, {"padding": "SAME", "dilation": 2, "padding_mode": "REPLICATE"}),
  (2, {"groups": 2, "use_bias": False}),
  (3, {"padding": 1, "padding_mode": "CIRCULAR", "use_bias": False}),
  (3, {"padding": "VALID", "stride": 2, "groups": 2}),
]


@pytest.mark.parametrize("n,kw", CONV_CASES)
def test_conv(n, kw):
  conv = {1: eqx.nn.Conv1d, 2: eqx.nn.Conv2d, 3: eqx.nn.Conv3d}[n]
  e = conv(2, 4, 3, key=KEYS[2], **kw)
  m = roundtrip(e)
  assert type(m) is nnx.bridge.Conv and m.weight.value.shape == e.weight.shape
  x = jax.random.normal(KEYS[3], (2,) + (5,) * n)
  assert_trees_close(m(x), e(x))
  with pytest.raises(nnx.bridge.ExampleShapeError, match="looks like a batch of 1"):
    m(x[None])


def test_base_conv_and_pool_classes_convert_generically():
  e = eqx.nn.Conv(2, 1, 2, 3, key=KEYS[0])
  m = roundtrip(e)
  assert isinstance(m, nnx.bridge.EqxModule) and type(m).eqx_type is eqx.nn.Conv
  x = jnp.ones((1, 5, 5))
  assert_trees_close(m(x), e(x))


@pytest.mark.parametrize(
  "kind,n,ceil",
  [
    ("Avg", 1, True),
    ("Max", 1, False),
    ("Avg", 2, False),
    ("Max", 2, True),
    ("Avg", 3, False),
    ("Max", 3, True),
  ],
)
def test_pooling(kind, n, ceil):
  e = getattr(eqx.nn, f"{kind}Pool{n}d")(2, 2, use_ceil=ceil)
  m = roundtrip(e)
  assert type(m) is nnx.bridge.Pool and m.average == (kind == "Avg")
  x = jax.random.normal(KEYS[4], (3,) + (5,) * n)
  assert_trees_close(m(x), e(x))


def test_embedding():
  e = eqx.nn.Embedding(6, 3, key=KEYS[0])
  m = roundtrip(e)
  assert_trees_equal(m.embedding.value, e.weight)
  assert_trees_equal(m(jnp.array(4)), e(jnp.array(4)))
  with pytest.raises(nnx.bridge.ExampleShapeError, match=r"shape \(2,\), but .* of shape \(\)"):
    m(jnp.array([1, 2]))


@pytest.mark.parametrize(
  "cls,affine",
  [
    (eqx.nn.LayerNorm, (True, True)),
    (eqx.nn.LayerNorm, (False, True)),
    (eqx.nn.RMSNorm, (True, False)),
    (eqx.nn.RMSNorm, (False, False)),
  ],
)
def test_norms_keep_eps_and_bias(cls, affine):
  e = cls((2, 3), eps=1e-3, use_weight=affine[0], use_bias=affine[1])
  e = jax.tree.map(lambda w: w + jax.random.normal(KEYS[1], w.shape), e)
  m = roundtrip(e)
  assert m.eps == 1e-3 and (m.bias is not None) == affine[1]
  x = jax.random.normal(KEYS[2], (2, 3))
  assert_trees_close(m(x), e(x))
  y, s = m(x, None)  # the Equinox state-passing form
  assert s is None
  with pytest.raises(nnx.bridge.ExampleShapeError, match=r"shape \(3,\), but .* shape \(2, 3\)"):
    m(jnp.ones(3))


def test_rmsnorm_default_bias_survives():
  m = roundtrip(eqx.nn.RMSNorm(4))
  assert m.bias is not None and m.bias.value.shape == (4,)


def test_dropout_with_key_is_bitwise_and_eval_mode():
  e = eqx.nn.Dropout(0.3)
  m = roundtrip(e)
  x = jnp.arange(1.0, 9.0)
  assert_trees_close(m(x, key=KEYS[0]), e(x, key=KEYS[0]))
  with pytest.raises(RuntimeError, match="requires a key"):
    m(x)
  m.eval()
  assert m.deterministic is True
  assert_trees_equal(m(x), x)
  assert nnx.to_eqx(m).inference is True


def test_mha_layout_and_outputs():
  e = eqx.nn.MultiheadAttention(
    2,
    4,
    6,
    5,
    3,
    qk_size=3,
    vo_size=2,
    use_query_bias=True,
    use_key_bias=True,
    use_value_bias=True,
    use_output_bias=True,
    dropout_p=0.2,
    key=KEYS[0],
  )
  m = roundtrip(e)
  assert type(m.query_proj) is nnx.bridge.Linear and m.query_proj.weight.value.shape == (6, 4)
  assert m.output_proj.weight.value.shape == (3, 4)
  q = jax.random.normal(KEYS[1], (3, 4))
  k = jax.random.normal(KEYS[2], (5, 6))
  v = jax.random.normal(KEYS[3], (5, 5))
  assert_trees_equal(m(q, k, v, inference=True), e(q, k, v, inference=True))
  assert_trees_equal(m(q, k, v, key=KEYS[4]), e(q, k, v, key=KEYS[4]))  # per-head keys
  mask = jax.random.bernoulli(KEYS[6], 0.7, (2, 3, 5))  # a mask per head
  ph = lambda a, b, c: (a * 2, b, c)
  assert_trees_equal(
    m(q, k, v, mask, inference=True, process_heads=ph),
    e(q, k, v, mask, inference=True, process_heads=ph),
  )
  with pytest.raises(ValueError, match="mask must have shape"):
    m(q, k, v, jnp.ones((4, 5), bool), inference=True)
  with pytest.raises(ValueError, match="equal length"):
    m(q, k, v[:2], inference=True)


@pytest.mark.parametrize("cls", [eqx.nn.GRUCell, eqx.nn.LSTMCell])
@pytest.mark.parametrize("use_bias", [True, False])
def test_cells_compute_equinox_equations(cls, use_bias):
  e = cls(3, 4, use_bias=use_bias, key=KEYS[0])
  m = roundtrip(e)
  x = jax.random.normal(KEYS[1], (3,))
  h = jax.random.normal(KEYS[2], (4,))
  hidden = h if cls is eqx.nn.GRUCell else (h, -h)
  assert_trees_close(jax.tree.leaves(m(x, hidden)), jax.tree.leaves(e(x, hidden)))


def test_mlp_identity_lambda_sequential():
  e = eqx.nn.Sequential(
    [
      eqx.nn.MLP(3, 4, 5, 2, activation=jnp.tanh, final_activation=jax.nn.sigmoid, key=KEYS[0]),
      eqx.nn.Lambda(jax.nn.relu),
      eqx.nn.Identity(),
      eqx.nn.MLP(4, "scalar", 2, 1, key=KEYS[1]),
    ]
  )
  m = roundtrip(e)
  assert type(m) is nnx.bridge.Sequential and len(m) == 4
  assert [type(layer).__name__ for layer in m] == ["MLP", "Lambda", "Identity", "MLP"]
  assert {type(layer) for mlp in (m[0], m[3]) for layer in mlp.layers} == {nnx.bridge.Linear}
  assert type(m[1:3]) is nnx.bridge.Sequential
  x = jax.random.normal(KEYS[2], (3,))
  assert_trees_equal(m(x), e(x))
  assert_trees_equal(m(x, key=KEYS[3]), e(x, key=KEYS[3]))


def test_mlp_depth_zero_has_no_final_activation():
  e = eqx.nn.MLP(2, 2, 3, 0, final_activation=lambda x: x + 100.0, key=KEYS[0])
  close(roundtrip(e)(jnp.ones(2)), e(jnp.ones(2)))


def test_mlp_with_scan_or_learnt_activation_is_generic():
  e = eqx.nn.MLP(2, 2, 3, 3, scan=True, key=KEYS[0])
  m = roundtrip(e)
  assert isinstance(m, nnx.bridge.EqxModule)
  close(m(jnp.ones(2)), e(jnp.ones(2)))
  e2 = eqx.nn.MLP(2, 2, 3, 1, activation=eqx.nn.PReLU(), key=KEYS[1])
  m2 = roundtrip(e2)
  assert isinstance(m2, nnx.bridge.EqxModule)
  close(m2(jnp.ones(2)), e2(jnp.ones(2)))


def test_nnx_linear_with_computation_dtype_converts_generically():
  lin = nnx.Linear(2, 3, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
  e = nnx.to_eqx(lin)
  assert isinstance(e, nnx.bridge.NnxModule)
  assert_trees_close(e(jnp.ones(2)), lin(jnp.ones(2)))
  back = nnx.from_eqx(e)
  assert type(back) is nnx.Linear and back.dtype == jnp.bfloat16


def test_nnx_linear_metadata_is_kept_by_generic_conversion():
  lin = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  lin.kernel = nnx.Param(lin.kernel.value, sharding=("a", "b"))
  back = nnx.from_eqx(nnx.to_eqx(lin))
  assert back.kernel.sharding == ("a", "b")


def test_native_nnx_layers_convert_generically_and_compute_the_same():
  class Net(nnx.Module):
    def __init__(self, rngs):
      self.conv = nnx.Conv(1, 2, (3, 3), rngs=rngs)
      self.norm = nnx.LayerNorm(2, rngs=rngs)
      self.head = nnx.Linear(2, 3, rngs=rngs)

    def __call__(self, x):
      return self.head(self.norm(self.conv(x)).mean((1, 2)))

  net = Net(nnx.Rngs(0))
  e = nnx.to_eqx(net)
  assert type(e.head) is nnx.bridge.KernelLinear and isinstance(e.conv, nnx.bridge.NnxModule)
  x = jax.random.normal(KEYS[0], (2, 6, 6, 1))
  assert_trees_equal(e(x), net(x))  # the NNX code on the NNX layout: the same program
  assert isinstance(nnx.to_eqx(net, native=True).head, eqx.nn.Linear)
  back = nnx.from_eqx(e)
  assert type(back.conv) is nnx.Conv and type(back.head) is nnx.Linear


def test_converted_linears_work_with_nnx_apis():
  """Optimizer, filters, sharding metadata, nnx.scan over a stack and LoRA."""
  import optax

  keys = jax.random.split(KEYS[0], 3)
  stack = eqx.filter_vmap(lambda k: eqx.nn.Linear(4, 4, key=k))(keys)
  m = nnx.from_eqx(stack)
  assert type(m) is nnx.bridge.Linear and m.weight.value.shape == (3, 4, 4)
  x = jax.random.normal(KEYS[1], (4,))

  @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
  def run(x, layer):
    return jnp.tanh(layer(x))

  def eqx_run(stack, x):
    params, static = eqx.partition(stack, eqx.is_array)
    body = lambda x, p: (jnp.tanh(eqx.combine(p, static)(x)), None)
    return jax.lax.scan(body, x, params)[0]

  assert_trees_equal(nnx.jit(run)(x, m), jax.jit(eqx_run)(stack, x))

  one = nnx.from_eqx(eqx.nn.Linear(4, 3, key=KEYS[2]))
  one.weight = nnx.Param(one.weight.value, sharding=("out", "in"))
  spec = nnx.get_partition_spec(nnx.state(one, nnx.Param))
  assert tuple(spec["weight"].value) == ("out", "in")
  opt = nnx.Optimizer(one, optax.sgd(0.1), wrt=nnx.Param)
  before = one.weight.value
  grads = nnx.grad(lambda m: m(x).sum())(one)
  opt.update(one, grads)
  assert_trees_close(one.weight.value, before - 0.1 * grads["weight"].value)

  lora = nnx.LoRA(4, 2, 3, base_module=one, rngs=nnx.Rngs(0))
  assert_trees_close(lora(x), one(x) + x @ lora.lora_a.value @ lora.lora_b.value)

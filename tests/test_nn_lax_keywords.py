"""flax 0.12 keywords of the dense and conv layers: preferred_element_type, promote_dtype,
dot_general/einsum_op, out_sharding, Einsum's argument order and ellipsis bias,
ConvTranspose CIRCULAR padding, and the Params' metadata."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal, hlo_equal


def randn(*shape, seed=0, dtype=jnp.float32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def np_init(key, shape, dtype=jnp.float32):
  return jnp.asarray(np.random.default_rng(len(shape)).standard_normal(shape), dtype)


INIT = {"kernel_init": np_init, "bias_init": np_init}
HALF = {"param_dtype": jnp.bfloat16, "dtype": jnp.bfloat16}


def _plus_bias(y, b):
  return y + b.astype(y.dtype)


def test_linear_preferred_element_type_matches_lax():
  layer = nnx.Linear(4, 3, preferred_element_type=jnp.float32, rngs=nnx.Rngs(0), **HALF, **INIT)
  x = randn(2, 4, dtype=jnp.bfloat16)
  y = layer(x)
  k, b = layer.kernel.value, layer.bias.value
  dims = (((1,), (0,)), ((), ()))
  expected = lax.dot_general(x, k, dims, preferred_element_type=jnp.float32)
  assert y.dtype == jnp.float32
  assert_trees_close(y, _plus_bias(expected, b))


def test_linear_general_and_einsum_preferred_element_type():
  lg = nnx.LinearGeneral(
    4, (2, 3), preferred_element_type=jnp.float32, rngs=nnx.Rngs(0), **HALF, **INIT
  )
  x = randn(5, 4, dtype=jnp.bfloat16)
  ref = lax.dot_general(
    x, lg.kernel.value, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32
  )
  assert lg(x).dtype == jnp.float32
  assert_trees_close(lg(x), _plus_bias(ref, lg.bias.value))
  es = nnx.Einsum(
    "bi,io->bo", (4, 3), (3,), preferred_element_type=jnp.float32, rngs=nnx.Rngs(0), **HALF, **INIT
  )
  ref = jnp.einsum("bi,io->bo", x, es.kernel.value, preferred_element_type=jnp.float32)
  assert_trees_close(es(x), _plus_bias(ref, es.bias.value))


def test_conv_and_conv_transpose_preferred_element_type():
  conv = nnx.Conv(3, 4, (3,), preferred_element_type=jnp.float32, rngs=nnx.Rngs(0), **HALF, **INIT)
  x = randn(2, 7, 3, dtype=jnp.bfloat16)
  dn = lax.ConvDimensionNumbers((0, 2, 1), (2, 1, 0), (0, 2, 1))
  ref = lax.conv_general_dilated(
    x, conv.kernel.value, (1,), "SAME", dimension_numbers=dn, preferred_element_type=jnp.float32
  )
  assert conv(x).dtype == jnp.float32
  assert_trees_close(conv(x), _plus_bias(ref, conv.bias.value))
  up = nnx.ConvTranspose(
    3, 4, (3,), strides=2, preferred_element_type=jnp.float32, rngs=nnx.Rngs(0), **HALF, **INIT
  )
  ref = lax.conv_transpose(
    x, up.kernel.value, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"),
    preferred_element_type=jnp.float32,
  )  # fmt: skip
  assert_trees_close(up(x), _plus_bias(ref, up.bias.value))


def test_defaults_do_not_pass_new_keywords_to_custom_ops():
  seen = []

  def dot(x, k, dims, precision=None, **kwargs):
    seen.append(kwargs)
    return lax.dot_general(x, k, dims, precision=precision, **kwargs)

  layer = nnx.Linear(4, 3, dot_general=dot, rngs=nnx.Rngs(0))
  layer(jnp.ones((2, 4)))
  layer(jnp.ones((2, 4)), out_sharding=None)
  assert seen == [{}, {}]
  nnx.Linear(4, 3, dot_general=dot, preferred_element_type=jnp.float32, rngs=nnx.Rngs(0))(
    jnp.ones((2, 4))
  )
  assert seen[-1] == {"preferred_element_type": jnp.float32}


def test_out_sharding_reaches_the_matmul():
  mesh = jax.make_mesh((1,), ("d",), axis_types=(jax.sharding.AxisType.Explicit,))
  spec = jax.sharding.PartitionSpec("d", None)
  layer = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
  with jax.set_mesh(mesh):
    y = layer(jnp.ones((2, 4)), out_sharding=spec)
  assert y.sharding.spec == spec


def test_custom_promote_dtype_is_used():
  calls = []

  def keep(args, dtype=None, inexact=True):
    calls.append((tuple(None if a is None else a.dtype for a in args), dtype))
    return args

  layer = nnx.Linear(2, 3, promote_dtype=keep, rngs=nnx.Rngs(0))
  layer(jnp.ones((1, 2)))
  assert calls == [((jnp.float32, jnp.float32, jnp.float32), None)]
  norm = nnx.LayerNorm(3, promote_dtype=keep, rngs=nnx.Rngs(0))
  norm(jnp.ones((1, 3)))
  assert calls[-1] == ((jnp.float32, jnp.float32, jnp.float32), None)
  bn = nnx.BatchNorm(3, promote_dtype=keep, rngs=nnx.Rngs(0))
  bn(jnp.ones((2, 3)))
  assert len(calls[-1][0]) == 5  # input, running mean and var, scale, bias


def test_batchnorm_identity_promotion_keeps_half_params_exact():
  # flax's Linen-compatible mode: no promotion; the formula then promotes per op.
  bn = nnx.BatchNorm(3, param_dtype=jnp.bfloat16, promote_dtype=lambda a, **kw: a, rngs=nnx.Rngs(0))
  x = randn(4, 3)
  y = bn(x)
  mean, var = x.mean(0), x.var(0)
  expected = (x - mean) * lax.rsqrt(var + 1e-5)
  assert y.dtype == jnp.float32
  assert_trees_close(y, expected)


def test_einsum_flax_argument_order_int_bias_and_einsum_op():
  layer = nnx.Einsum("ik,kj->ij", (5, 4), 4, rngs=nnx.Rngs(0), **INIT)
  assert layer.bias.value.shape == (4,)
  x = randn(2, 5)
  assert_trees_close(layer(x), x @ layer.kernel.value + layer.bias.value)

  def twice(eq, a, b, **kw):
    return 2 * jnp.einsum(eq, a, b, **kw)

  doubled = nnx.Einsum("ik,kj->ij", (5, 4), einsum_op=twice, rngs=nnx.Rngs(0), **INIT)
  assert_trees_close(doubled(x), 2 * (x @ doubled.kernel.value))
  with pytest.raises(nnx.LayerConfigError, match="explicit output"):
    nnx.Einsum("ik,kj", (5, 4), rngs=nnx.Rngs(0))


def test_einsum_bias_follows_kernel_axes_through_ellipsis():
  eq = "d...ab,bc...->ad...c"
  layer = nnx.Einsum(eq, (4, 5, 6, 7), (6, 7, 5), rngs=nnx.Rngs(0), **INIT)
  x = randn(8, 6, 7, 3, 4)
  y = layer(x)
  assert y.shape == (3, 8, 6, 7, 5)
  assert_trees_close(y, jnp.einsum(eq, x, layer.kernel.value) + layer.bias.value)
  # a bias whose kernel axes are not trailing in the output is placed by name
  lead = nnx.Einsum("bi,oi->ob", (3, 4), (3,), rngs=nnx.Rngs(0), **INIT)
  x = randn(2, 4)
  expected = lead.kernel.value @ x.T + lead.bias.value[:, None]
  assert_trees_close(lead(x), expected)


def _circular_transpose_reference(x, kernel, stride):
  """1-D transposed convolution on a ring of length ``len(x) * stride`` (NumPy loops)."""
  x, kernel = np.asarray(x), np.asarray(kernel)
  n, k = x.shape[0] * stride, kernel.shape[0]
  full = np.zeros((x.shape[0] * stride + k, kernel.shape[-1]), np.float64)
  for t in range(x.shape[0]):
    for j in range(k):
      full[t * stride + (k - 1 - j)] += x[t] @ kernel[j]  # lax correlates: no flip
  # lax.conv_transpose's VALID output starts where a full window overlaps:
  # fold that length onto the ring with the same centring as flax.
  valid = full[: (x.shape[0] - 1) * stride + k]
  missing = -(valid.shape[0] - n) % (2 * n)
  padded = np.pad(valid, [((missing + 1) // 2, missing // 2), (0, 0)])
  return padded.reshape(-1, n, kernel.shape[-1]).sum(0)


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_transpose_circular_padding(stride):
  up = nnx.ConvTranspose(
    2, 3, (3,), strides=stride, padding="CIRCULAR", use_bias=False, rngs=nnx.Rngs(0), **INIT
  )
  x = randn(5, 2)
  y = up(x)
  assert y.shape == (5 * stride, 3)
  ref = jnp.asarray(_circular_transpose_reference(x, up.kernel.value, stride), jnp.float32)
  assert_trees_close(y, ref)


def test_conv_mask_shape_is_checked():
  with pytest.raises(nnx.LayerConfigError, match=r"mask has shape \(3, 1, 4\)"):
    nnx.Conv(2, 4, (3,), mask=jnp.ones((3, 1, 4)), rngs=nnx.Rngs(0))


LAYERS = [
  (nnx.Linear, (2, 4), {"kernel": ("kernel",), "bias": ("bias",)}),
  (nnx.LinearGeneral, (2, (3, 4)), {"kernel": ("kernel",), "bias": ("bias",)}),
  (nnx.Einsum, ("ik,kj->ij", (5, 4), 4), {"kernel": ("kernel",), "bias": ("bias",)}),
  (nnx.Conv, (2, 4, 3), {"kernel": ("kernel",), "bias": ("bias",)}),
  (nnx.ConvTranspose, (2, 4, 3), {"kernel": ("kernel",), "bias": ("bias",)}),
  (nnx.BatchNorm, (3,), {"scale": ("scale",), "bias": ("bias",)}),
  (nnx.LayerNorm, (3,), {"scale": ("scale",), "bias": ("bias",)}),
  (nnx.RMSNorm, (3,), {"scale": ("scale",)}),
  (nnx.GroupNorm, (6, 3), {"scale": ("scale",), "bias": ("bias",)}),
  (nnx.InstanceNorm, (6,), {"scale": ("scale",), "bias": ("bias",)}),
  (
    nnx.LSTMCell,
    (4, 5),
    {"kernel": ("ii", "kernel"), "recurrent_kernel": ("hf", "kernel"), "bias": ("ho", "bias")},
  ),
  (
    nnx.GRUCell,
    (4, 5),
    {
      "kernel": ("dense_i", "kernel"),
      "bias": ("dense_i", "bias"),
      "recurrent_kernel": ("dense_h", "kernel"),
    },
  ),
  (
    lambda *a, **kw: nnx.MultiHeadAttention(*a, normalize_qk=True, **kw),
    (2, 8),
    {
      "kernel": ("key", "kernel"),
      "out_kernel": ("out", "kernel"),
      "bias": ("value", "bias"),
      "out_bias": ("out", "bias"),
      "query_ln_scale": ("query_ln", "scale"),
      "key_ln_scale": ("key_ln", "scale"),
    },
  ),
]


@pytest.mark.parametrize("cls,args,params", LAYERS)
def test_param_metadata_keywords(cls, args, params):
  kwargs = {f"{name}_metadata": {"tag": name} for name in params}
  layer = cls(*args, **kwargs, rngs=nnx.Rngs(0))
  for name, path in params.items():
    var = layer
    for attr in path:
      var = getattr(var, attr)
    assert isinstance(var, nnx.Param) and var.tag == name


def test_mha_out_metadata_defaults_to_the_projections():
  mha = nnx.MultiHeadAttention(2, 8, kernel_metadata={"tag": "k"}, rngs=nnx.Rngs(0))
  assert mha.out.kernel.tag == "k" and mha.query.kernel.tag == "k"


def test_initializer_factories():
  key = jax.random.key(0)
  assert_trees_equal(nnx.initializers.zeros_init()(key, (2,), jnp.float32), jnp.zeros(2))
  assert_trees_equal(nnx.initializers.ones_init()(key, (2,), jnp.float32), jnp.ones(2))


@pytest.mark.parametrize(
  "make,x,reference",
  [
    (
      lambda: nnx.Linear(4, 3, rngs=nnx.Rngs(0)),
      jnp.ones((2, 4)),
      lambda p, x: lax.dot_general(x, p["kernel"], (((1,), (0,)), ((), ()))) + p["bias"],
    ),
    (
      lambda: nnx.Einsum("nta,hab->nthb", (5, 4, 6), (5, 6), rngs=nnx.Rngs(0)),
      jnp.ones((2, 3, 4)),
      lambda p, x: jnp.einsum("nta,hab->nthb", x, p["kernel"]) + p["bias"],
    ),
  ],
)
def test_default_keywords_keep_the_plain_program(make, x, reference):
  graphdef, state = nnx.split(make())

  def plain(s, x):
    return reference({"kernel": s["kernel"].value, "bias": s["bias"].value}, x)

  ours = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)).lower(state, x)
  assert hlo_equal(ours, jax.jit(plain).lower(state, x))


def _explicit_mesh():
  return jax.make_mesh((2, 2), ("X", "Y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)


@pytest.mark.devices(4)
def test_out_sharding_of_embed_conv_and_attention():
  P = jax.sharding.PartitionSpec
  with jax.set_mesh(_explicit_mesh()):
    emb = nnx.Embed(8, 4, rngs=nnx.Rngs(0))
    ids = jax.sharding.reshard(jnp.arange(4), P("Y"))
    looked_up = emb(ids, out_sharding=P("X"))
    assert looked_up.sharding.spec == P("X", None)
    assert_trees_close(looked_up, emb.embedding.value[jnp.arange(4)])
    q = jax.sharding.reshard(randn(2, 4), P("X", None))
    assert emb.attend(q, out_sharding=P("X", "Y")).sharding.spec == P("X", "Y")
    conv = nnx.Conv(4, 8, (3,), rngs=nnx.Rngs(0))
    x = jax.sharding.reshard(randn(2, 4, 4), P("X", None, None))
    assert conv(x, out_sharding=P("X", "Y", None)).sharding.spec == P("X", "Y", None)
    mha = nnx.MultiHeadAttention(2, 4, rngs=nnx.Rngs(0))
    y = mha(x, qkv_sharding=P("X", None, None, None), out_sharding=P("X", None, "Y"))
    assert y.sharding.spec == P("X", None, "Y")


@pytest.mark.devices(4)
def test_dropout_mask_follows_the_input_sharding():
  P = jax.sharding.PartitionSpec
  with jax.set_mesh(_explicit_mesh()):
    x = jax.sharding.reshard(jnp.ones((2, 4)), P("X", None))
    for drop in [nnx.Dropout(0.5, rngs=nnx.Rngs(0)), nnx.Dropout(0.5, broadcast_dims=(1,))]:
      y = jax.jit(lambda x, drop=drop: drop(x, rngs=nnx.Rngs(0)))(x)
      assert y.sharding.spec == P("X", None)
      assert set(np.unique(np.asarray(y)).tolist()) <= {0.0, 2.0}

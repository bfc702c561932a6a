"""Dense layers and Embed: exact math against hand-written JAX, shapes, dtypes, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close, assert_trees_equal


def randn(*shape, seed=0):
  """Test data from NumPy (jax.random compiles per shape, which is slow on CPU)."""
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def np_init(key, shape, dtype=jnp.float32):
  return jnp.asarray(np.random.default_rng(len(shape)).standard_normal(shape), dtype)


INIT = {"kernel_init": np_init, "bias_init": np_init}


def _x(shape, dtype=jnp.float32):
  return randn(*shape).astype(dtype)


@pytest.mark.parametrize("batch", [(), (5,), (2, 3)])
@pytest.mark.parametrize(
  "param_dtype,x_dtype,dtype,out_dtype",
  [
    (jnp.float32, jnp.float32, None, jnp.float32),
    (jnp.float32, jnp.bfloat16, None, jnp.float32),  # promoted like flax
    (jnp.float32, jnp.float32, jnp.bfloat16, jnp.bfloat16),  # computation dtype wins
    (jnp.bfloat16, jnp.bfloat16, None, jnp.bfloat16),
  ],
)
def test_linear_matches_matmul_plus_bias(batch, param_dtype, x_dtype, dtype, out_dtype):
  layer = nnx.Linear(4, 3, param_dtype=param_dtype, dtype=dtype, rngs=nnx.Rngs(0), **INIT)
  x = _x((*batch, 4), x_dtype)
  y = layer(x)
  cd = out_dtype
  expected = x.astype(cd) @ layer.kernel.value.astype(cd) + layer.bias.value.astype(cd)
  assert y.shape == (*batch, 3) and y.dtype == out_dtype
  assert_trees_close(y, expected)
  assert layer.kernel.value.dtype == param_dtype and layer.bias.value.dtype == param_dtype


def test_linear_init_uses_the_params_stream_like_flax():
  layer = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
  # Rngs(0).params() is fold_in(key(0), count): count 0 for the kernel, 1 for the bias.
  k0 = jax.random.fold_in(jax.random.key(0), 0)
  assert_trees_close(
    layer.kernel.value, jax.nn.initializers.lecun_normal()(k0, (4, 3), jnp.float32)
  )
  assert_trees_equal(layer.bias.value, jnp.zeros(3))
  assert isinstance(layer.kernel, nnx.Param)


def test_linear_without_bias_has_no_bias_leaf():
  layer = nnx.Linear(4, 3, use_bias=False, rngs=nnx.Rngs(0), **INIT)
  assert layer.bias is None and sorted(nnx.state(layer)) == ["kernel"]
  x = _x((2, 4))
  assert_trees_close(layer(x), x @ layer.kernel.value)


def test_linear_wrong_input_size_names_expected_and_actual():
  layer = nnx.Linear(4, 3, rngs=nnx.Rngs(0), **INIT)
  with pytest.raises(nnx.InputShapeError, match=r"has 5 features .* expects 4"):
    layer(jnp.ones((2, 5)))
  with pytest.raises(ValueError):  # also a ValueError for generic handlers
    layer(jnp.ones((2, 5)))


def test_linear_metadata_is_attached():
  layer = nnx.Linear(2, 3, kernel_metadata={"sharding": (None, "model")}, rngs=nnx.Rngs(0), **INIT)
  assert layer.kernel.sharding == (None, "model")


def test_linear_under_nnx_jit_traces_once():
  layer = nnx.Linear(4, 3, rngs=nnx.Rngs(0), **INIT)
  counter = TraceCounter()
  f = nnx.jit(counter(lambda m, x: m(x)))
  x = _x((2, 4))
  assert_trees_close(f(layer, x), layer(x))
  with assert_no_retrace(counter):
    f(layer, x)


@pytest.mark.parametrize("batch", [(), (3,)])
def test_linear_general_matches_einsum(batch):
  q = nnx.LinearGeneral(6, (2, 4), rngs=nnx.Rngs(0), **INIT)
  x = _x((*batch, 5, 6))
  assert q.kernel.value.shape == (6, 2, 4) and q.bias.value.shape == (2, 4)
  expected = jnp.einsum("...i,ihd->...hd", x, q.kernel.value) + q.bias.value
  assert_trees_close(q(x), expected)
  out = nnx.LinearGeneral((2, 4), 6, axis=(-2, -1), rngs=nnx.Rngs(1), **INIT)
  h = _x((*batch, 5, 2, 4))
  expected = jnp.einsum("...hd,hdo->...o", h, out.kernel.value) + out.bias.value
  assert_trees_close(out(h), expected)


def test_linear_general_batch_axis_has_a_kernel_per_batch_index():
  layer = nnx.LinearGeneral(3, 2, batch_axis={0: 4}, rngs=nnx.Rngs(0), **INIT)
  assert layer.kernel.value.shape == (4, 3, 2) and layer.bias.value.shape == (4, 2)
  x = _x((4, 5, 3))
  expected = jnp.einsum("bti,bio->bto", x, layer.kernel.value) + layer.bias.value[:, None, :]
  assert_trees_close(layer(x), expected)


def test_linear_general_errors():
  with pytest.raises(nnx.LayerConfigError, match="same length"):
    nnx.LinearGeneral((2, 3), 4, axis=-1, rngs=nnx.Rngs(0), **INIT)
  layer = nnx.LinearGeneral((2, 4), 6, axis=(-2, -1), rngs=nnx.Rngs(0), **INIT)
  with pytest.raises(nnx.InputShapeError, match=r"\(2, 5\).*expects \(2, 4\)"):
    layer(jnp.ones((3, 2, 5)))


def test_einsum_matches_jnp_einsum():
  layer = nnx.Einsum("nta,hab->nthb", (5, 4, 6), (5, 6), rngs=nnx.Rngs(0), **INIT)
  x = _x((2, 3, 4))
  expected = jnp.einsum("nta,hab->nthb", x, layer.kernel.value) + layer.bias.value
  assert_trees_close(layer(x), expected)
  # the call's equation overrides the constructor's
  y = layer(_x((3, 4)), "ta,hab->thb")
  assert y.shape == (3, 5, 6)
  with pytest.raises(nnx.LayerConfigError, match="two operands"):
    nnx.Einsum("ab->a", (2, 2), rngs=nnx.Rngs(0), **INIT)
  with pytest.raises(nnx.LayerConfigError, match="no equation"):
    nnx.Einsum(None, (2, 2), rngs=nnx.Rngs(0), **INIT)(jnp.ones(2))


def test_embed_lookup_and_attend_are_exact():
  emb = nnx.Embed(7, 3, embedding_init=np_init, rngs=nnx.Rngs(0))
  ids = jnp.array([[0, 6, 2], [3, 3, 1]])
  assert_trees_equal(emb(ids), emb.embedding.value[ids])
  q = _x((2, 3))
  assert_trees_close(emb.attend(q), q @ emb.embedding.value.T)
  assert emb(jnp.array(4)).shape == (3,)


def test_embed_default_init_has_std_one_over_sqrt_features():
  emb = nnx.Embed(2000, 16, rngs=nnx.Rngs(0))  # variance_scaling(1, fan_in, out_axis=0)
  assert abs(float(emb.embedding.value.std()) - 0.25) < 0.01


def test_embed_errors():
  emb = nnx.Embed(7, 3, embedding_init=np_init, rngs=nnx.Rngs(0))
  with pytest.raises(nnx.InputDtypeError, match="integers, got dtype float32"):
    emb(jnp.ones(2))
  with pytest.raises(TypeError):
    emb(jnp.ones(2))
  assert_trees_equal(emb(np.array([1, 2])), emb(jnp.array([1, 2])))  # NumPy ids
  with pytest.raises(nnx.InputShapeError, match="Embed.attend.*has 4 features.*expects 3"):
    emb.attend(jnp.ones((2, 4)))

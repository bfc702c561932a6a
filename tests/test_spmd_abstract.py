"""nnx.as_abstract: shardings for the abstract Variables of nnx.eval_shape."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

import nnx_eqx as nnx


def _abstract_linear(**kw):
  return nnx.eval_shape(lambda: nnx.Linear(4, 8, rngs=nnx.Rngs(0), **kw))


def test_without_sharding_metadata_nothing_changes():
  out = nnx.as_abstract(_abstract_linear())
  assert isinstance(out.kernel, nnx.Param)
  assert getattr(out.kernel.value, "sharding", None) is None


def test_the_variables_own_mesh_is_used():
  mesh = jax.make_mesh((1,), ("model",))
  abstract = nnx.eval_shape(
    lambda: nnx.Param(jnp.ones((2, 4)), sharding=(None, "model"), mesh=mesh, eager_sharding=False)
  )
  out = nnx.as_abstract(abstract)
  assert out.value.sharding.spec == P(None, "model") and out.value.sharding.mesh == mesh
  assert abstract.value.sharding is None  # the input is untouched


def test_the_context_mesh_and_rules_are_used():
  mesh = jax.make_mesh((1,), ("model",), (jax.sharding.AxisType.Auto,))
  abstract = nnx.eval_shape(lambda: nnx.Param(jnp.ones((2, 4)), out_sharding=("embed", "mlp")))
  with jax.set_mesh(mesh), nnx.logical_axis_rules([("mlp", "model")]):
    out = nnx.as_abstract(abstract)
  assert out.value.sharding.spec == P(None, "model")
  assert out.value.sharding.mesh.axis_names == ("model",)

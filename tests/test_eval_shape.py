"""nnx.eval_shape: abstract Modules without allocation; inputs untouched."""

import jax
import jax.numpy as jnp

import nnx_eqx as nnx


class MLP(nnx.Module):
  def __init__(self, rngs):
    self.l1 = nnx.Linear(3, 8, rngs=rngs)
    self.l2 = nnx.Linear(8, 2, rngs=rngs)
    self.count = nnx.Variable(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    return self.l2(self.l1(x))


def test_abstract_model_has_shape_dtype_leaves_and_same_structure():
  abstract = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
  concrete = MLP(nnx.Rngs(0))
  assert isinstance(abstract, MLP)
  assert nnx.graphdef(abstract) == nnx.graphdef(concrete)
  leaves = jax.tree.leaves(nnx.state(abstract))
  assert leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  shapes = jax.tree.map(lambda x: (x.shape, x.dtype), nnx.state(abstract))
  assert shapes == jax.tree.map(lambda x: (x.shape, x.dtype), nnx.state(concrete))


def test_restore_into_an_abstract_model():
  abstract = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
  graphdef, abstract_state = nnx.split(abstract)
  source = MLP(nnx.Rngs(1))
  restored = nnx.merge(graphdef, jax.tree.map(lambda a, x: x, abstract_state, nnx.state(source)))
  y = restored(jnp.ones((1, 3)))
  assert y.shape == (1, 2)


def test_module_arguments_are_not_modified():
  model = MLP(nnx.Rngs(0))
  out = nnx.eval_shape(lambda m, x: m(x), model, jnp.ones((4, 3)))
  assert out == jax.ShapeDtypeStruct((4, 2), jnp.float32)
  assert int(model.count.value) == 0
  assert isinstance(model.l1.kernel.value, jax.Array)


def test_keyword_arguments():
  out = nnx.eval_shape(lambda din, dout: nnx.Linear(din, dout, rngs=nnx.Rngs(0)), 3, dout=5)
  assert out.kernel.value.shape == (3, 5)


def test_ref_mode_model_comes_out_abstract_with_ordinary_variables():
  """As flax.nnx's test_eval_shape_mutable_array: a model built in ref mode (a
  jax.Ref cannot hold an abstract value) comes out with ShapeDtypeStruct values."""
  with nnx.var_defaults(ref=True):
    abstract = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
  assert isinstance(abstract.l1.kernel, nnx.Param) and not abstract.l1.kernel.ref
  assert abstract.l1.kernel.get_value() == jax.ShapeDtypeStruct((3, 8), jnp.float32)
  count = abstract.count.get_value()  # (weakly typed on some jax versions)
  assert isinstance(count, jax.ShapeDtypeStruct) and (count.shape, count.dtype) == ((), jnp.int32)

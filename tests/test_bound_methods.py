"""Every lifted transform refuses a Module's bound method (it would close over
the module instead of lifting it) with a ValueError that names the fix."""

import functools

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Scaled(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.array([1.0, 2.0]))

  def loss(self, x):
    return (self.w * x).sum()


TRANSFORMS = {
  "nnx.jit": nnx.jit,
  "nnx.vmap": nnx.vmap,
  "nnx.grad": nnx.grad,
  "nnx.value_and_grad": nnx.value_and_grad,
  "nnx.remat": nnx.remat,
  "nnx.scan": nnx.scan,
  "nnx.vjp": nnx.vjp,
  "nnx.jvp": nnx.jvp,
  "nnx.pmap": nnx.pmap,
  "nnx.checkify": nnx.checkify,
  "nnx.custom_vjp": nnx.custom_vjp,
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_bound_method_raises(name):
  m = Scaled()
  with pytest.raises(nnx.BoundMethodError, match=rf"{name} does not support bound methods"):
    TRANSFORMS[name](m.loss)


def test_shard_map_bound_method_raises():
  mesh = jax.sharding.Mesh(jax.devices()[:1], ("d",))
  with pytest.raises(nnx.BoundMethodError, match="nnx.shard_map does not support bound methods"):
    nnx.shard_map(Scaled().loss, mesh=mesh, in_specs=None, out_specs=None)


def test_bound_method_inside_partial_raises():
  m = Scaled()
  with pytest.raises(ValueError, match=r"Scaled\.loss"):
    nnx.jit(functools.partial(m.loss, x=jnp.ones(2)))


def test_eval_shape_bound_method_raises():
  m = Scaled()
  with pytest.raises(nnx.BoundMethodError, match="unbound Scaled.loss"):
    nnx.eval_shape(m.loss, jnp.ones(2))


def test_unbound_method_and_decorated_method_work():
  m = Scaled()
  g = nnx.grad(Scaled.loss)(m, jnp.array([3.0, 4.0]))
  assert g.w.value.tolist() == [3.0, 4.0]

  class Decorated(Scaled):
    @nnx.jit
    def loss(self, x):
      return (self.w * x).sum()

  assert float(Decorated().loss(jnp.ones(2))) == 3.0

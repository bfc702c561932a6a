"""The converter registry: user pairs, clashes, overrides, declining converters."""

import equinox as eqx
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


class Scale(eqx.Module):
  s: jnp.ndarray

  def __call__(self, x):
    return self.s * x


class NnxScale(nnx.Module):
  def __call__(self, x):
    return jnp.exp(self.log_s.value) * x


def _to_nnx(e, ctx):
  out = NnxScale()
  out.log_s = ctx.variable("s", fn=jnp.log)
  return out


def _to_eqx(m, ctx):
  return Scale(ctx.leaf("log_s", fn=jnp.exp))


@pytest.fixture
def scale_pair():
  conv = nnx.bridge.register(Scale, NnxScale, to_nnx=_to_nnx, to_eqx=_to_eqx)
  yield conv
  nnx.bridge.unregister(Scale, NnxScale)


def test_user_pair_is_used_both_ways(scale_pair):
  assert scale_pair in nnx.bridge.registered()
  e = Scale(jnp.array([1.0, 2.0]))
  m = nnx.from_eqx(e)
  assert type(m) is NnxScale and type(m.log_s) is nnx.Param
  assert_trees_close(m(jnp.ones(2)), e(jnp.ones(2)))
  assert_trees_close(nnx.to_eqx(m), e)


def test_clash_names_both_pairs_and_the_fix(scale_pair):
  class Other(nnx.Module):
    pass

  with pytest.raises(nnx.bridge.ConverterClashError, match=r"Scale already has a converter") as err:
    nnx.bridge.register(Scale, Other, to_nnx=_to_nnx)
  msg = str(err.value)
  assert "NnxScale" in msg and "Other" in msg and "override=True" in msg
  assert "nnx.bridge.unregister(Scale, NnxScale)" in msg
  with pytest.raises(nnx.bridge.ConverterClashError, match=r"The NNX type .*NnxScale"):
    nnx.bridge.register(eqx.nn.Identity, NnxScale, to_eqx=_to_eqx)
  # override replaces the Equinox -> NNX direction only
  nnx.bridge.register(Scale, Other, to_nnx=lambda e, ctx: Other(), override=True)
  assert type(nnx.from_eqx(Scale(jnp.ones(1)))) is Other
  assert isinstance(nnx.bridge.ConverterClashError("x"), ValueError)


def test_register_needs_a_direction():
  with pytest.raises(TypeError, match="give `to_nnx=` and/or `to_eqx=`"):
    nnx.bridge.register(Scale, NnxScale)


def test_declining_converter_falls_back_to_generic():
  nnx.bridge.register(Scale, NnxScale, to_nnx=lambda e, ctx: NotImplemented)
  try:
    m = nnx.from_eqx(Scale(jnp.ones(2)))
    assert isinstance(m, nnx.bridge.EqxModule) and type(m).eqx_type is Scale
  finally:
    nnx.bridge.unregister(Scale)


def test_builtin_pairs_are_registered():
  pairs = {(c.eqx_type, c.nnx_type) for c in nnx.bridge.registered()}
  for t in (
    eqx.nn.Conv1d,
    eqx.nn.Conv2d,
    eqx.nn.Conv3d,
    eqx.nn.MaxPool2d,
    eqx.nn.AvgPool1d,
    eqx.nn.BatchNorm,
    eqx.nn.MultiheadAttention,
    eqx.nn.GRUCell,
    eqx.nn.LSTMCell,
    eqx.nn.Shared,
  ):
    assert any(e is t for e, _ in pairs), t
  assert (eqx.nn.Linear, nnx.bridge.Linear) in pairs
  assert (nnx.bridge.KernelLinear, nnx.Linear) in pairs

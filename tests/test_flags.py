"""Mode flags as module attributes: train()/eval(), set_attributes, and layers that obey them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_equal


class Noisy(nnx.Module):
  def __init__(self):
    self.deterministic = False
    self.scale = nnx.Param(jnp.ones(2))


class Norm(nnx.Module):
  def __init__(self):
    self.use_running_average = False


class Plain(nnx.Module):
  def __init__(self):
    self.scale = nnx.Param(jnp.ones(2))


class Model(nnx.Module):
  def __init__(self):
    shared = Noisy()
    self.a = shared
    self.b = shared
    self.blocks = nnx.List([Noisy(), Norm()])
    self.heads = nnx.Dict(norm=Norm(), plain=Plain())


def flags(model):
  return {
    "/".join(map(str, p)): (m.__dict__.get("deterministic"), m.__dict__.get("use_running_average"))
    for p, m in model.modules()
    if isinstance(m, (Noisy, Norm))
  }


def test_train_and_eval_switch_every_module_in_the_graph():
  m = Model()
  m.eval()
  assert flags(m) == {
    "a": (True, None),
    "blocks/0": (True, None),
    "blocks/1": (None, True),
    "heads/norm": (None, True),
  }
  assert m.a is m.b and "deterministic" not in vars(m.heads.plain)  # no attribute is added
  m.train()
  assert set(flags(m).values()) == {(False, None), (None, False)}


def test_train_and_eval_forward_extra_attributes():
  m = Model()
  m.eval(scale_mode="frozen")  # no module has it: ignored, as for the built-in flags
  assert "scale_mode" not in vars(m.a)
  m.blocks[0].decode = False
  m.train(decode=True)
  assert m.blocks[0].decode is True


def test_set_attributes_with_filters():
  m = Model()
  m.set_attributes(Norm, use_running_average=True)
  assert m.blocks[1].use_running_average and m.heads.norm.use_running_average
  m.set_attributes(lambda path, mod: path[:1] == ("blocks",), deterministic=True)
  assert m.blocks[0].deterministic and not m.a.deterministic
  m.set_attributes((Noisy, Norm), deterministic=False, use_running_average=False)
  assert set(flags(m).values()) == {(False, None), (None, False)}


def test_unknown_flag_names_raise_naming_the_attribute():
  m = Model()
  with pytest.raises(nnx.NnxError, match=r"no module has the attribute\(s\) \['use_running_avg'\]"):
    m.set_attributes(use_running_avg=True)
  # an attribute present only outside the filtered modules is also unknown
  with pytest.raises(nnx.NnxError, match=r"\['use_running_average'\].*raise_if_not_found=False"):
    m.set_attributes(Noisy, use_running_average=True)
  m.set_attributes(use_running_avg=True, deterministic=True, raise_if_not_found=False)
  assert m.a.deterministic and "use_running_avg" not in vars(m.a)


def test_flags_are_static_so_switching_mode_retraces_and_switching_back_hits_the_cache():
  m = Model()
  counter = TraceCounter()

  @nnx.jit
  @counter
  def run(m, x):
    return x * 2.0 if m.a.deterministic else x

  x = jnp.ones(2)
  assert_trees_equal(run(m, x), x)
  m.eval()
  assert_trees_equal(run(m, x), 2 * x)  # the cached walk saw the change
  m.train()
  with assert_no_retrace(counter):
    assert_trees_equal(run(m, x), x)
  assert counter.count == 2


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(3, 3, rngs=rngs)
    self.bn = nnx.BatchNorm(3, rngs=rngs)
    self.dropout = nnx.Dropout(0.5, rngs=rngs)

  def __call__(self, x, **kwargs):
    return self.dropout(self.bn(self.linear(x)), **kwargs)


def test_dropout_obeys_the_flag_and_an_explicit_argument_wins():
  drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=0))
  x = jnp.ones((4, 8))
  drop.eval()
  assert_trees_equal(drop(x), x)
  y = drop(x, deterministic=False)  # explicit argument beats eval()
  assert set(np.unique(np.asarray(y)).tolist()) <= {0.0, 2.0} and not np.array_equal(y, x)
  drop.train()
  assert not np.array_equal(drop(x), x)
  assert_trees_equal(drop(x, deterministic=True), x)  # beats train()


def test_batchnorm_obeys_the_flag_and_an_explicit_argument_wins():
  m = Block(nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (8, 3))
  mean0 = m.bn.mean.value
  m.eval()
  assert m.bn.use_running_average and m.dropout.deterministic
  m(x)
  assert_trees_equal(m.bn.mean.value, mean0)  # running stats untouched
  m.bn(m.linear(x), use_running_average=False)  # explicit argument beats eval()
  assert not np.array_equal(m.bn.mean.value, mean0)
  m.train()
  mean1 = m.bn.mean.value
  m.bn(m.linear(x), use_running_average=True)  # beats train()
  assert_trees_equal(m.bn.mean.value, mean1)
  m(x)
  assert not np.array_equal(m.bn.mean.value, mean1)


def test_eval_inside_nnx_jit_propagates_to_the_caller():
  m = Block(nnx.Rngs(0))
  x = jnp.ones((2, 3))

  @nnx.jit
  def eval_forward(m, x):
    m.eval()
    return m(x)

  eval_forward(m, x)
  assert m.dropout.deterministic and m.bn.use_running_average  # structural change propagates

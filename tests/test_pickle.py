"""Pickle and cloudpickle round trips of Modules, Variables, States, GraphDefs,
Rngs, Optimizers and the bridge's converted modules; deepcopy keeps sharing."""

import copy
import os
import pickle
import subprocess
import sys

import cloudpickle
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  all_paths,
  assert_no_retrace,
  assert_trees_equal,
  graphs,
  same_graph,
  sharing_classes,
)

PICKLERS = [pytest.param(pickle, id="pickle"), pytest.param(cloudpickle, id="cloudpickle")]


def _round_trip(mod, obj):
  return mod.loads(mod.dumps(obj))


def _leaves(node):
  return jax.tree.leaves(nnx.state(node))


class Block(nnx.Module):
  """A user Module with shared and cyclic references and static attributes."""

  def __init__(self, rngs):
    self.linear = nnx.Linear(3, 4, rngs=rngs)
    self.tied = self.linear  # shared submodule
    self.alias = self.linear.kernel  # shared Variable
    self.norm = nnx.BatchNorm(4, rngs=rngs)
    self.drop = nnx.Dropout(0.5, rngs=rngs)
    self.seq = nnx.Sequential(nnx.Linear(4, 4, rngs=rngs), jax.nn.gelu)
    self.items = nnx.List([nnx.Linear(4, 2, rngs=rngs), nnx.Variable(jnp.arange(3))])
    self.table = nnx.Dict(a=nnx.Linear(2, 2, rngs=rngs), b=nnx.BatchStat(jnp.zeros(2)))
    self.config = {"width": 4, "names": ["a", "b"]}
    self.me = self  # a cycle

  def __call__(self, x):
    return self.items[0](self.seq(self.norm(self.linear(x))))


@pytest.mark.parametrize("mod", PICKLERS)
@given(m=graphs())
def test_random_graphs_round_trip_with_sharing_cycles_and_bits(mod, m):
  back = _round_trip(mod, m)
  assert same_graph(back, m)
  assert sharing_classes(back) == sharing_classes(m)
  assert_trees_equal(_leaves(back), _leaves(m))
  assert nnx.graphdef(back) == nnx.graphdef(m)


@pytest.mark.parametrize("mod", PICKLERS)
def test_user_module_nn_layers_and_containers(mod):
  m = Block(nnx.Rngs(0))
  nnx.split(m)  # a cached walk on the module must not get in the way
  back = _round_trip(mod, m)
  assert back.tied is back.linear and back.alias is back.linear.kernel and back.me is back
  assert back.config == m.config and type(back.items) is nnx.List
  assert same_graph(back, m)
  assert_trees_equal(_leaves(back), _leaves(m))
  x = jnp.ones((2, 3))
  m.eval(), back.eval()
  assert_trees_equal(back(x), m(x))


@pytest.mark.parametrize("mod", PICKLERS)
def test_variable_state_and_graphdef(mod):
  v = nnx.Param(jnp.arange(4.0), sharding=("x",), tag="w")
  v2 = _round_trip(mod, v)
  assert type(v2) is nnx.Param and v2.sharding == ("x",) and v2.tag == "w"
  assert_trees_equal(v2.value, v.value)
  v2.value = v2.value + 1  # owned by the loading trace: mutable

  m = Block(nnx.Rngs(1))
  graphdef, params, rest = nnx.split(m, nnx.Param, ...)
  nnx.merge(graphdef, params, rest)  # compiles the GraphDef's builder
  g2, p2, r2 = _round_trip(mod, (graphdef, params, rest))
  assert g2 == graphdef and hash(g2) == hash(graphdef)
  assert type(p2) is nnx.State and p2.alias.value.dtype == jnp.float32
  assert_trees_equal(p2, params)
  assert same_graph(nnx.merge(g2, p2, r2), m)


def test_graphdef_hash_is_rebuilt_in_another_process(tmp_path):
  # str hashes differ between processes: a GraphDef pickled by another process
  # must still equal and hash like a local one (so nnx.jit caches hit).
  path = tmp_path / "g.pkl"
  code = (
    "import pickle, nnx_eqx as nnx;"
    "from test_pickle import Block;"
    f"pickle.dump(nnx.graphdef(Block(nnx.Rngs(0))), open({str(path)!r}, 'wb'))"
  )
  env = {**os.environ, "PYTHONHASHSEED": "12345", "JAX_PLATFORMS": "cpu"}
  env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
  subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
  with open(path, "rb") as f:
    other = pickle.load(f)
  local = nnx.graphdef(Block(nnx.Rngs(0)))
  assert other == local and hash(other) == hash(local)


def test_cloudpickle_stores_a_module_class_defined_in_a_function(tmp_path):
  # cloudpickle stores a class it cannot import by value; plain pickle loads it back,
  # here and in a process where the class was never defined
  class Model(nnx.Module):
    def __init__(self, rngs):
      self.linear = nnx.Linear(2, 8, rngs=rngs)
      self.bn = nnx.BatchNorm(8, rngs=rngs)
      self.dropout = nnx.Dropout(0.1, rngs=rngs)
      self.linear_out = nnx.Linear(8, 3, rngs=rngs)

    def __call__(self, x):
      return self.linear_out(nnx.relu(self.dropout(self.bn(self.linear(x)))))

  model = Model(nnx.Rngs(0))
  model.eval()
  x = jnp.ones((5, 2))
  y = model(x)
  path = tmp_path / "model.pkl"
  path.write_bytes(cloudpickle.dumps(model))
  loaded = pickle.loads(path.read_bytes())
  assert isinstance(loaded, Model)
  assert_trees_equal(loaded(x), y)
  code = (
    "import pickle, sys, numpy as np, jax.numpy as jnp;"
    "m = pickle.load(open(sys.argv[1], 'rb'));"
    "np.save(sys.argv[2], np.asarray(m(jnp.ones((5, 2)))))"
  )
  out = tmp_path / "y.npy"
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  subprocess.run(
    [sys.executable, "-c", code, str(path), str(out)], check=True, env=env, timeout=120
  )
  assert_trees_equal(jnp.asarray(np.load(out)), y)


@pytest.mark.parametrize("mod", PICKLERS)
def test_rng_streams_continue(mod):
  rngs = nnx.Rngs(0, dropout=1)
  rngs.params(), rngs.dropout(), rngs.dropout()
  back = _round_trip(mod, rngs)
  for stream in ("params", "dropout", "default"):
    for _ in range(2):
      a = jax.random.key_data(getattr(rngs, stream)())
      b = jax.random.key_data(getattr(back, stream)())
      assert_trees_equal(b, a)


def _train_step(counter):
  @nnx.jit
  @counter
  def step(model, opt, x, y):
    def loss_fn(m):
      return jnp.mean((m(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss

  return step


@pytest.mark.parametrize("mod", PICKLERS)
def test_round_tripped_module_trains_without_retrace(mod):
  counter = TraceCounter()
  step = _train_step(counter)
  model = Block(nnx.Rngs(0))
  model.eval()
  back = _round_trip(mod, model)
  opt = nnx.Optimizer(back, optax.sgd(0.1), wrt=nnx.Param)
  x, y = jnp.ones((2, 3)), jnp.zeros((2, 2))
  losses = [float(step(back, opt, x, y)) for _ in range(3)]
  assert counter.count == 1
  assert losses[2] < losses[0]
  assert back.tied is back.linear  # sharing survives training


def test_optimizer_round_trip_continues_identically():
  # optax transformations are closures: plain pickle cannot store them, cloudpickle can
  counter = TraceCounter()
  step = _train_step(counter)
  model = Block(nnx.Rngs(0))
  model.eval()
  opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
  x, y = jnp.ones((2, 3)), jnp.zeros((2, 2))
  step(model, opt, x, y)
  model2, opt2 = cloudpickle.loads(cloudpickle.dumps((model, opt)))
  assert_trees_equal(nnx.state(opt2), nnx.state(opt))
  # the loaded optax functions are new objects: the copy's first call traces once
  assert_trees_equal(step(model2, opt2, x, y), step(model, opt, x, y))
  with assert_no_retrace(counter):
    for _ in range(2):
      assert_trees_equal(step(model2, opt2, x, y), step(model, opt, x, y))
  assert_trees_equal(nnx.state(model2), nnx.state(model))


class Affine(eqx.Module):
  weight: jax.Array
  scale: float = eqx.field(static=True)

  def __call__(self, x):
    return x * self.weight * self.scale


class Scaled(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.arange(3.0))
    self.names = ["a", "b"]

  def __call__(self, x):
    return x * self.w


@pytest.mark.parametrize("mod", PICKLERS)
def test_bridge_converted_modules(mod):
  x = jnp.ones(3)
  for em in (Affine(jnp.arange(3.0), 2.0), eqx.nn.Linear(3, 2, key=jax.random.key(0))):
    nm = nnx.from_eqx(em)
    back = _round_trip(mod, nm)
    assert type(back) is type(nm)
    assert_trees_equal(back(x), nm(x))
    assert eqx.tree_equal(nnx.to_eqx(back), em)
  e = nnx.to_eqx(Scaled())
  e2 = _round_trip(mod, e)
  assert type(e2) is type(e) and eqx.tree_equal(e2, e)
  assert_trees_equal(e2(x), e(x))
  model, state = nnx.to_eqx_with_state(nnx.BatchNorm(3, rngs=nnx.Rngs(0)))
  model2, state2 = _round_trip(mod, (model, state))
  assert eqx.tree_equal(model2, model)
  y2, _ = model2(jnp.ones((3,)), state2)
  y, _ = model(jnp.ones((3,)), state)
  assert_trees_equal(y2, y)


@given(m=graphs())
def test_deepcopy_keeps_sharing_and_rewalks(m):
  nnx.split(m)  # cache a walk on m
  c = copy.deepcopy(m)
  assert same_graph(c, m)
  assert sharing_classes(c) == sharing_classes(m)
  assert not {id(o) for _, o in all_paths(c)} & {id(o) for _, o in all_paths(m)}

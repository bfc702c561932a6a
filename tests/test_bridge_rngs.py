"""Randomness in converted models: ``key=`` (Equinox's masks, bit for bit), call-time
``rngs=`` (one drawn key), and streams kept from ``nnx.from_eqx(model, rngs=...)``
(fresh masks per call, counts written back by ``nnx.jit``)."""

import itertools
import math
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  eqx_models,
  hlo_equal,
  same_graph,
)

KEY = jr.key(7)
X = jnp.arange(1.0, 13.0).reshape(3, 4)
V = jnp.linspace(0.1, 1.0, 32)  # enough elements that two masks differ


class Net(eqx.Module):
  """A user module (converted generically) with a Dropout and an attention layer."""

  lin: eqx.nn.Linear
  drop: eqx.nn.Dropout
  attn: eqx.nn.MultiheadAttention

  def __call__(self, x, *, key=None):
    k1 = k2 = None
    if key is not None:
      k1, k2 = jr.split(key)
    y = self.drop(jax.vmap(self.lin)(x), key=k1)
    return self.attn(y, y, y, key=k2)


class Block(eqx.Module):
  drop: eqx.nn.Dropout

  def __call__(self, x, *, key=None):
    return self.drop(x, key=key)


def _models():
  k = jr.split(jr.key(0), 3)
  mha = eqx.nn.MultiheadAttention(2, 4, dropout_p=0.5, key=k[0])
  seq = eqx.nn.Sequential(
    [eqx.nn.Linear(32, 32, key=k[1]), eqx.nn.Dropout(0.5), eqx.nn.Lambda(jnp.tanh)]
    + [eqx.nn.Dropout(0.25)]
  )
  net = Net(eqx.nn.Linear(4, 4, key=k[2]), eqx.nn.Dropout(0.3), mha)
  return {  # name: (Equinox model, call, where its first Dropout sits)
    "dropout": (eqx.nn.Dropout(0.5), lambda m, **kw: m(X, **kw), "root"),
    "attention": (mha, lambda m, **kw: m(X, X, X, **kw), "root.dropout"),
    "sequential": (seq, lambda m, **kw: m(V, **kw), "root.layers[1]"),
    "user_module": (net, lambda m, **kw: m(X, **kw), "root.drop"),
    "user_in_sequential": (
      eqx.nn.Sequential([eqx.nn.Lambda(jnp.tanh), Block(eqx.nn.Dropout(0.5))]),
      lambda m, **kw: m(V, **kw),
      "root.layers[1].drop",
    ),
  }


MODELS = _models()
NAMES = sorted(MODELS)
ONE_DROPOUT = ["dropout", "attention"]  # one stream: the source with the stream's key


def counts(m):
  """The count of every stream in ``m``."""
  return [int(c) for c in jax.tree.leaves(nnx.state(m, nnx.RngCount))]


def converted(name, with_streams):
  """``(Equinox model, call, its conversion, the conversion's stream counts)``."""
  e, call, _ = MODELS[name]
  m = nnx.from_eqx(e, rngs=nnx.Rngs(dropout=1) if with_streams else None)
  return e, call, m, counts(m)


def fresh_stream(seed):
  """The stream ``from_eqx(..., rngs=nnx.Rngs(dropout=seed))`` gives a lone Dropout."""
  return nnx.Rngs(dropout=seed).dropout.fork()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("with_streams", [False, True])
def test_explicit_key_is_the_source_bit_for_bit_and_wins(name, with_streams):
  e, call, m, before = converted(name, with_streams)
  assert bool(before) == with_streams
  f_m, f_e = jax.jit(lambda k: call(m, key=k)), jax.jit(lambda k: call(e, key=k))
  assert hlo_equal(f_m.lower(KEY), f_e.lower(KEY))  # the same program ...
  assert_trees_equal(f_m(KEY), f_e(KEY))  # ... so the same bits
  assert_trees_equal(call(m, key=KEY), call(e, key=KEY))
  r = nnx.Rngs(dropout=3)
  assert_trees_equal(call(m, key=KEY, rngs=r), call(e, key=KEY))  # key= wins over rngs=
  assert int(r.dropout.count[...]) == 0 and counts(m) == before  # ... and over the streams


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("with_streams", [False, True])
def test_call_rngs_are_the_source_with_one_drawn_key(name, with_streams):
  e, call, m, before = converted(name, with_streams)
  r, ref = nnx.Rngs(dropout=5), nnx.Rngs(dropout=5)
  y1, y2 = call(m, rngs=r), call(m, rngs=r)
  # Eager calls run the same operations on the same keys: the same bits.
  assert_trees_equal(y1, call(e, key=ref.dropout()))
  assert_trees_equal(y2, call(e, key=ref.dropout()))
  assert int(r.dropout.count[...]) == 2 and counts(m) == before  # call rngs= win over streams
  assert not bool(jnp.all(y1 == y2))
  stream = nnx.RngStream(9, tag="dropout")
  assert_trees_equal(call(m, rngs=stream), call(e, key=nnx.RngStream(9, tag="dropout")()))
  assert_trees_equal(call(m, rngs=KEY), call(e, key=KEY))  # a raw key is the key


@pytest.mark.parametrize("name", NAMES)
def test_streams_give_fresh_masks_and_advance(name):
  e, call, _ = MODELS[name]
  m = nnx.from_eqx(e, rngs=nnx.Rngs(dropout=2))
  n = len(counts(m))
  assert n >= 1 and counts(m) == [0] * n
  ys = [call(m) for _ in range(3)]
  assert counts(m) == [3] * n
  for a, b in itertools.combinations(ys, 2):
    assert not bool(jnp.all(a == b))
  if name in ONE_DROPOUT:  # each call is the source called with the stream's next key
    ref = fresh_stream(2)
    for y in ys:
      assert_trees_equal(y, call(e, key=ref()))


@pytest.mark.parametrize("name", NAMES)
def test_under_nnx_jit_counts_are_written_back_without_retracing(name):
  e, call, _ = MODELS[name]
  m = nnx.from_eqx(e, rngs=nnx.Rngs(dropout=2))
  eager = nnx.from_eqx(e, rngs=nnx.Rngs(dropout=2))
  counter = TraceCounter()
  f = nnx.jit(counter(lambda m: call(m)))
  ys = [f(m)]
  with assert_no_retrace(counter):
    ys += [f(m), f(m)]
  assert counter.count == 1
  assert counts(m) == [3] * len(counts(m))
  for y in ys:  # compiled vs eager: another program, the same keys
    assert_trees_close(y, call(eager))
  assert counts(eager) == counts(m)


@pytest.mark.parametrize("name", NAMES)
def test_no_key_in_training_names_the_layer_and_both_fixes(name):
  e, call, path = MODELS[name]
  m = nnx.from_eqx(e)
  with pytest.raises(nnx.bridge.MissingKeyError) as info:
    call(m)
  msg = str(info.value)
  assert msg.startswith(f"Dropout at {path} requires a key"), msg
  assert "requires a key when running in non-deterministic" in msg  # Equinox's words too
  for fix in ("key=jax.random.key(0)", "nnx.from_eqx(eqx_model, rngs=nnx.Rngs(dropout=0))"):
    assert fix in msg
  assert "rngs=nnx.Rngs(dropout=0))" in msg and "model.eval()" in msg
  assert isinstance(info.value, RuntimeError)  # what Equinox raises
  assert isinstance(info.value, nnx.MissingRngsError)  # what native NNX layers raise
  m.eval()
  call(m)  # inference needs no key
  with pytest.raises(RuntimeError, match=re.escape("requires a key")):
    call(e)  # Equinox's own error, for comparison


def test_an_inactive_dropout_draws_nothing():
  x = jnp.ones(4)
  off = nnx.from_eqx(eqx.nn.Dropout(0.0), rngs=nnx.Rngs(dropout=0))
  assert_trees_equal(off(x), x)
  on = nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=nnx.Rngs(dropout=0))
  on.eval()
  assert_trees_equal(on(x), x)
  assert_trees_equal(on(x, inference=True), x)
  assert counts(off) == [0] and counts(on) == [0]
  on.train()
  on(x)
  assert counts(on) == [1]


def test_from_eqx_forks_one_stream_per_dropout_from_the_dropout_stream():
  rngs = nnx.Rngs(0, dropout=1)
  m = nnx.from_eqx(MODELS["user_module"][0], rngs=rngs)
  assert int(rngs.dropout.count[...]) == 2 and int(rngs.default.count[...]) == 0
  assert type(m.drop.rngs) is nnx.RngStream and type(m.attn.dropout.rngs) is nnx.RngStream
  assert m.lin.__dict__.get("rngs") is None  # only random layers get one
  single = nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=nnx.Rngs(3))  # no "dropout": the default
  assert_trees_equal(single.rngs.key[...], nnx.Rngs(3).default.fork().key[...])
  with pytest.raises(nnx.RngsTypeError, match="nnx.from_eqx: `rngs` must be"):
    nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=0)


@settings(deadline=None)
@given(eqx_models(), st.integers(0, 2**31 - 1))
def test_to_eqx_drops_the_streams_and_round_trips(case, seed):
  """Streams are NNX-side only: the Equinox form is the source, and converting it
  back with the same rngs gives the same module, streams included."""
  m = nnx.from_eqx(case.model, case.state, rngs=nnx.Rngs(dropout=seed))
  if case.state is None:
    back = nnx.to_eqx(m)
    assert_trees_equal(back, case.model)
    again = nnx.from_eqx(back, rngs=nnx.Rngs(dropout=seed))
  else:
    back, state = nnx.to_eqx_with_state(m)
    assert_trees_equal((back, state), (case.model, case.state))
    again = nnx.from_eqx(back, state, rngs=nnx.Rngs(dropout=seed))
  assert same_graph(again, m)


@settings(deadline=None)
@given(
  seed=st.integers(0, 2**31 - 1),
  k=st.integers(1, 63),
  shape=st.lists(st.integers(1, 5), max_size=3).map(tuple),
)
def test_streams_drop_what_native_dropout_drops(seed, k, shape):
  """For any seed and a rate of k/64, a converted Dropout with
  ``rngs=nnx.Rngs(dropout=seed)`` zeroes the same elements on every call as
  ``nnx.Dropout(rate, rngs=nnx.Rngs(dropout=seed))``, and the kept values agree.

  Both fork one stream and draw ``bernoulli(key, 1 - rate)``. Equinox computes
  the keep probability in float32 (``1 - stop_gradient(p)``), NNX in Python
  floats: for rates whose ``1 - rate`` rounds differently (e.g. 0.9) a sample
  between the two thresholds would be kept by one and dropped by the other, so
  the law is stated for rates k/64, where both are exact.
  """
  rate = k / 64
  converted = nnx.from_eqx(eqx.nn.Dropout(rate), rngs=nnx.Rngs(dropout=seed))
  native = nnx.Dropout(rate, rngs=nnx.Rngs(dropout=seed))
  x = jnp.arange(1.0, math.prod(shape) + 1.0).reshape(shape)
  for _ in range(3):
    a, b = converted(x), native(x)
    assert_trees_equal(a == 0, b == 0)
    assert_trees_close(a, b)
  assert counts(converted) == counts(native) == [3]

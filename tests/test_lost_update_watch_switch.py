"""``nnx.set_lost_update_watch``: turning the watch for dropped updates off
makes state Variables flatten as Params do (their metadata as aux data, no
weak reference, no link in a trace), drops go unreported as in flax.nnx, and
turning it on again watches every new trace; flipping it recompiles nothing."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.graph.tracing import _copy_links, _lost_updates
from nnx_eqx.testing import TraceCounter, assert_no_retrace

X = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(4, 3)


@pytest.fixture
def off():
  previous = nnx.set_lost_update_watch(False)
  yield
  nnx.set_lost_update_watch(previous)


def _bn():
  return nnx.BatchNorm(3, rngs=nnx.Rngs(0))


def test_the_watch_is_on_by_default_and_the_setter_returns_the_previous_value():
  assert _lost_updates.WATCHING[0] is True
  assert nnx.set_lost_update_watch(False) is True
  assert nnx.set_lost_update_watch(True) is False
  assert nnx.set_lost_update_watch(True) is True


def test_off_a_dropped_update_goes_unreported_and_the_old_value_stays(off):
  bn = _bn()
  jax.jit(lambda m, x: m(x))(bn, X)  # the statistics' update is dropped
  assert float(bn.mean[...].sum()) == 0.0  # read without an error
  assert jax.tree.leaves(bn)  # flattened without an error
  assert not _lost_updates.PENDING and not _lost_updates.STALE


def test_off_state_variables_flatten_with_their_metadata_and_copies_are_not_linked(off):
  stat = nnx.BatchStat(jnp.zeros(3), tag="t")
  _, aux = jax.tree_util.tree_flatten(stat)[1].node_data()
  assert aux == (("tag", "t"),) and type(aux) is tuple
  assert _copy_links.AUX not in stat.__dict__
  seen = []

  def f(m, x):
    seen.append(dict(m.mean.__dict__))
    return m(x)

  jax.jit(f)(_bn(), X)
  assert _copy_links.COPY_MARK not in seen[0]


def test_turning_it_off_forgets_the_stale_marks_already_made():
  bn = _bn()
  jax.jit(lambda m, x: m(x))(bn, X)
  with pytest.raises(nnx.LostUpdateError):
    bn.mean[...]
  previous = nnx.set_lost_update_watch(False)
  try:
    assert float(bn.mean[...].sum()) == 0.0
  finally:
    nnx.set_lost_update_watch(previous)
  assert float(bn.mean[...].sum()) == 0.0  # (forgotten, not resumed)


def test_on_again_a_new_trace_is_watched():
  bn = _bn()
  previous = nnx.set_lost_update_watch(False)
  jax.jit(lambda m, x: m(x))(bn, X)
  nnx.set_lost_update_watch(previous)
  jax.jit(lambda m, x: m(x))(bn, X)  # a new function: traced with the watch on
  with pytest.raises(nnx.LostUpdateError, match=r"BatchNorm\.mean"):
    bn.mean[...]
  nnx.clear_lost_updates(bn)


def test_flipping_the_watch_recompiles_nothing():
  counter = TraceCounter()
  step = jax.jit(counter(lambda m, x: (m(x), m)))  # carries the update out
  bn = _bn()
  _, bn = step(bn, X)
  with assert_no_retrace(counter):
    previous = nnx.set_lost_update_watch(False)
    try:
      _, bn = step(bn, X)
      _, bn = step(nnx.clone(bn), X)
    finally:
      nnx.set_lost_update_watch(previous)
    _, bn = step(bn, X)
  assert counter.count == 1


def test_lifted_transforms_carry_updates_with_the_watch_off(off):
  bn = _bn()
  nnx.jit(lambda m, x: m(x))(bn, X)
  assert float(jnp.abs(bn.mean[...]).sum()) > 0.0


@pytest.mark.parametrize("bad", [1, "off", None])
def test_a_switch_that_is_not_a_bool_is_refused_naming_the_fix(bad):
  with pytest.raises(TypeError, match=r"True or False.*bool\(\.\.\.\)"):
    nnx.set_lost_update_watch(bad)
  assert _lost_updates.WATCHING[0] is True


@pytest.mark.parametrize(
  ("raw", "expected"), [("0", False), ("off", False), (" False ", False), ("1", True), ("ON", True)]
)
def test_the_environment_variable_sets_the_starting_value(monkeypatch, raw, expected):
  monkeypatch.setenv("NNX_EQX_LOST_UPDATE_WATCH", raw)
  assert _lost_updates._watch_from_env() is expected


def test_an_environment_value_that_is_not_a_switch_names_the_variable_and_the_values(monkeypatch):
  monkeypatch.setenv("NNX_EQX_LOST_UPDATE_WATCH", "maybe")
  with pytest.raises(ValueError, match=r"NNX_EQX_LOST_UPDATE_WATCH='maybe'.*0/false/off"):
    _lost_updates._watch_from_env()

"""Recovering a module whose state update a JAX transformation dropped: writing whole
values over it (``nnx.update``, a checkpoint restored into it) is a write, not a use of
the stale values -- it succeeds and ends the marks it covers; Variables it does not
cover stay marked. Building the module again (``nnx.merge`` of saved values) gives a
module free of marks. Values read from stale Variables are refused as any read is."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.graph.tracing import _lost_updates
from nnx_eqx.testing import assert_trees_equal

X = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(4, 3)


class Net(nnx.Module):
  def __init__(self):
    self.bn1 = nnx.BatchNorm(3, rngs=nnx.Rngs(0))
    self.bn2 = nnx.BatchNorm(3, rngs=nnx.Rngs(1))

  def __call__(self, x):
    return self.bn2(self.bn1(x) * 2.0)


_drop = jax.jit(lambda m, x: m(x))  # returns the output only: the statistics are dropped


def _saved(m):
  """The values of ``m``'s Variables, as arrays apart from its Variables."""
  return nnx.state(m).to_pure_dict()


def _stale_paths(m) -> set[str]:
  """The attributes ``nnx.state(m)`` names as stale (empty when it raises nothing)."""
  try:
    nnx.state(m)
  except nnx.LostUpdateError as e:
    return {p for p in ("bn1.mean", "bn1.var", "bn2.mean", "bn2.var") if f"Net.{p}`" in str(e)}
  return set()


def _assert_values(m, saved):
  got = nnx.state(m).to_pure_dict()
  assert_trees_equal(got, saved)  # values written whole: bitwise


@pytest.fixture
def dropped():
  m = Net()
  saved = _saved(m)
  _drop(m, X)
  assert _stale_paths(m) == {"bn1.mean", "bn1.var", "bn2.mean", "bn2.var"}
  return m, saved


@pytest.mark.parametrize("source", ["pure dict", "State of other Variables"])
def test_an_update_covering_every_stale_variable_restores_the_module(dropped, source):
  m, saved = dropped
  values = saved if source == "pure dict" else nnx.state(nnx.merge(nnx.graphdef(Net()), saved))
  nnx.update(m, values)  # (the very arrays m held before the call: still a write)
  assert _stale_paths(m) == set()
  _assert_values(m, saved)
  y = m(X)  # trains on as usual
  assert y.shape == X.shape and float(jnp.abs(m.bn1.mean[...]).sum()) > 0


def test_an_update_covering_part_leaves_the_rest_marked(dropped):
  m, saved = dropped
  nnx.update(m, {"bn1": saved["bn1"]})
  m.bn1.mean[...]
  m.bn1.var[...]
  assert _stale_paths(m) == {"bn2.mean", "bn2.var"}
  with pytest.raises(nnx.LostUpdateError, match="Net.bn2.mean"):
    m(X)
  nnx.update(m.bn2, {"mean": saved["bn2"]["mean"]})
  assert _stale_paths(m) == {"bn2.var"}
  nnx.update(m, nnx.State({"bn2": {"var": jnp.ones(3, jnp.float32)}}))
  assert _stale_paths(m) == set()
  m(X)


def test_an_update_of_a_split_variable_ends_its_mark(dropped):
  m, _ = dropped
  _, state = nnx.split(nnx.BatchStat(jnp.ones(3, jnp.float32)))
  nnx.update(m.bn1.mean, state)
  assert_trees_equal(m.bn1.mean[...], jnp.ones(3, jnp.float32))
  assert _stale_paths(m) == {"bn1.var", "bn2.mean", "bn2.var"}
  nnx.clear_lost_updates(m)


def test_a_state_sharing_the_stale_variables_holds_the_stale_values():
  """``nnx.state``/``nnx.split`` hold the graph's own Variables (as in flax.nnx
  0.12): taken before the dropped call, they hold the stale values, and writing
  them anywhere is a read of those values, refused with the error."""
  m = Net()
  shared = nnx.state(m)
  other = Net()
  before = _saved(other)
  _drop(m, X)
  with pytest.raises(nnx.LostUpdateError, match="Net.bn1.mean"):
    nnx.update(m, shared)
  with pytest.raises(nnx.LostUpdateError, match="Net.bn1.mean"):
    nnx.update(other, shared)
  _assert_values(other, before)  # refused before anything was written
  nnx.clear_lost_updates(m)


def test_merging_saved_values_builds_a_module_free_of_marks(dropped):
  m, saved = dropped
  graphdef = nnx.graphdef(m)  # (structure only: given for the stale module)
  assert graphdef == nnx.graphdef(Net())
  fresh = nnx.merge(graphdef, saved)
  _assert_values(fresh, saved)
  fresh(X)
  # The stale module itself was not written: its marks stay, and every use but
  # nnx.graphdef still raises.
  assert _stale_paths(m) == {"bn1.mean", "bn1.var", "bn2.mean", "bn2.var"}
  for use in (lambda: nnx.split(m), lambda: m(X), lambda: jax.tree.leaves(m)):
    with pytest.raises(nnx.LostUpdateError):
      use()
  nnx.clear_lost_updates(m)


def test_merging_the_stale_variables_themselves_is_refused_where_used():
  m = Net()
  graphdef, state = nnx.split(m)
  _drop(m, X)
  rebuilt = nnx.merge(graphdef, state)  # holds m's own (stale) Variables
  with pytest.raises(nnx.LostUpdateError, match="bn1.mean"):
    rebuilt(X)
  nnx.clear_lost_updates(m)


def test_merging_copies_of_the_stale_variables_is_refused():
  """``copy=True`` reads the stale Variables' values into new ones: refused, as
  ``nnx.update`` from them is, before anything is built."""
  m = Net()
  graphdef, state = nnx.split(m)
  _drop(m, X)
  with pytest.raises(nnx.LostUpdateError, match="Net.bn1.mean"):
    nnx.merge(graphdef, state, copy=True)
  nnx.clear_lost_updates(m)
  copied = nnx.merge(graphdef, state, copy=True)  # the values from before the call
  assert copied.bn1.mean is not m.bn1.mean
  assert_trees_equal(copied.bn1.mean[...], m.bn1.mean[...])


def test_restoring_a_checkpoint_into_the_stale_module_restores_it(tmp_path):
  pytest.importorskip("orbax.checkpoint")
  m = Net()
  saved = _saved(m)
  path = nnx.checkpoint.save(tmp_path / "ckpt", m)
  _drop(m, X)
  assert nnx.checkpoint.restore(path, m) is m
  assert _stale_paths(m) == set()
  _assert_values(m, saved)
  m(X)


def test_restoring_a_checkpoint_into_a_state_target_leaves_the_module_marked(tmp_path):
  pytest.importorskip("orbax.checkpoint")
  m = Net()
  graphdef, state = nnx.split(m)
  path = nnx.checkpoint.save(tmp_path / "ckpt", m)
  _drop(m, X)
  restored = nnx.checkpoint.restore(path, state)  # a new State: m is not written
  fresh = nnx.merge(graphdef, restored)
  fresh(X)
  assert _stale_paths(m) == {"bn1.mean", "bn1.var", "bn2.mean", "bn2.var"}
  nnx.clear_lost_updates(m)


def test_a_module_restored_after_a_drop_reports_the_next_drop(dropped):
  m, saved = dropped
  nnx.update(m, saved)
  _drop(m, X)
  assert _stale_paths(m) == {"bn1.mean", "bn1.var", "bn2.mean", "bn2.var"}
  nnx.clear_lost_updates(m)


def test_the_error_lists_restoring_the_values_among_its_fixes(dropped):
  m, _ = dropped
  with pytest.raises(nnx.LostUpdateError) as info:
    m.bn1.mean[...]
  text = str(info.value)
  assert "nnx.update(model, saved)" in text and "nnx.checkpoint.restore(path, model)" in text
  nnx.clear_lost_updates(m)
  assert not _lost_updates.unreported()

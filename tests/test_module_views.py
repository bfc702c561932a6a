"""nnx.view, nnx.with_attributes, nnx.view_info; flax 0.12 containers; TrainState.create."""

import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(2, 3, rngs=rngs)
    self.drop = nnx.Dropout(0.5, deterministic=False, rngs=rngs)
    self.bn = nnx.BatchNorm(3, use_running_average=False, rngs=rngs)
    self.shared = self.linear


def test_view_changes_copy_and_shares_variables():
  block = Block(nnx.Rngs(0))
  new = nnx.view(block, deterministic=True, use_running_average=True)
  assert (new.drop.deterministic, new.bn.use_running_average) == (True, True)
  assert (block.drop.deterministic, block.bn.use_running_average) == (False, False)
  assert new.linear.kernel is block.linear.kernel
  assert new.shared is new.linear and new.linear is not block.linear


def test_view_only_filter_and_unused_keys():
  block = Block(nnx.Rngs(0))
  new = nnx.view(block, only=nnx.Dropout, deterministic=True)
  assert new.drop.deterministic and not new.bn.use_running_average
  with pytest.raises(ValueError, match=r"Unused keys found in nnx.view: \['nope'\]"):
    nnx.view(block, deterministic=True, nope=1)
  assert nnx.view(block, nope=1, raise_if_not_found=False).drop.deterministic is False


def test_view_calls_set_view_with_accepted_keywords():
  seen = []

  class Custom(nnx.Module):
    def set_view(self, mode: str | None = None):
      """Sets the mode.

      Args:
        mode: the mode name.
          Second line.
      """
      seen.append(mode)
      self.mode = mode

  c = nnx.view(Custom(), mode="eval")
  assert c.mode == "eval" and seen == ["eval"]
  assert nnx.view_info(Custom()).endswith(
    "Custom:\n  mode: str | None = None\n    the mode name.\n    Second line."
  )


def test_view_info_lists_mode_flags_per_class_once():
  info = nnx.view_info(nnx.List([Block(nnx.Rngs(0)), Block(nnx.Rngs(1))]))
  assert info.count("BatchNorm:") == 1 and info.count("Dropout:") == 1
  assert "Linear" not in info
  assert nnx.view_info(Block(nnx.Rngs(0)), only=nnx.Linear) == ""


def test_with_attributes_leaves_original_unchanged():
  block = Block(nnx.Rngs(0))
  new = nnx.with_attributes(block, only=nnx.BatchNorm, use_running_average=True)
  assert new.bn.use_running_average and not block.bn.use_running_average
  assert new.bn.mean is block.bn.mean
  with pytest.raises(ValueError, match=r"following attributes: \['missing'\]"):
    nnx.with_attributes(block, missing=True)


def test_set_attributes_error_is_value_error():
  with pytest.raises(ValueError, match=r"following attributes: \['nope'\]"):
    Block(nnx.Rngs(0)).set_attributes(nope=True)


def test_sequential_star_args_iteration_and_identity():
  lin = nnx.Linear(2, 8, rngs=nnx.Rngs(0))
  seq = nnx.Sequential(lin, jax.nn.relu)
  assert len(jax.tree.leaves(seq)) == 2 and seq.layers[0] is lin
  assert seq(jnp.ones((1, 2))).shape == (1, 8)
  assert list(nnx.Sequential([lin]).layers) == [lin]
  empty = nnx.Sequential()
  assert empty(3) == 3 and empty(1, 2) == (1, 2) and empty() is None
  assert empty(k=2) == {"k": 2}


def test_sequential_paths_spreading_rngs_and_errors():
  seq = nnx.Sequential(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), lambda x: (x, x), jnp.add)
  paths = sorted(nnx.state(seq).to_flat_dict())
  assert paths == [("layers", 0, "bias"), ("layers", 0, "kernel")]
  y = seq(jnp.ones((1, 2)))
  assert_trees_close(y, 2 * seq.layers[0](jnp.ones((1, 2))))
  as_kwargs = nnx.Sequential(lambda x: {"a": x, "b": 1}, lambda a, b: a + b)
  assert as_kwargs(1) == 2
  seen = []

  def takes_rngs(x, rngs):
    seen.append(rngs)
    return x

  rngs = nnx.Rngs(0)
  assert nnx.Sequential(takes_rngs, abs)(-1, rngs=rngs) == 1 and seen == [rngs]
  with pytest.raises(TypeError, match="layer 1 .*not callable"):
    nnx.Sequential(abs, 3)(1)
  assert len(seq[:1]) == 1 and seq[:1].layers[0] is seq.layers[0]


def test_list_is_mutable_sequence_and_dict_setdefault():
  items = nnx.List([1, 2, 3, 4])
  items[1:3] = [6, 7]
  assert items[1:3] == [6, 7] and 7 in items and items.index(7) == 2
  items.reverse()
  assert list(items) == [4, 7, 6, 1]
  d = nnx.Dict({"a": 1})
  assert d.setdefault("a", 10) == 1 and d.setdefault("c", 3) == 3 and len(d) == 2


def test_train_state_create():
  m = nnx.Dict(a=nnx.Param(jnp.ones(2)), b=nnx.BatchStat(jnp.zeros(2)))
  graphdef, params, stats = nnx.split(m, nnx.Param, nnx.BatchStat)
  state = nnx.TrainState.create(graphdef, params=params, tx=optax.sgd(1.0), batch_stats=stats)
  state = state.apply_gradients(jax.tree.map(jnp.ones_like, state.params))
  assert int(state.step) == 1
  assert_trees_close(state.params["a"].value, jnp.zeros(2))  # 1 - 1.0 * 1, computed eagerly


def test_compat_exports_the_view_helpers():
  assert nnx.compat.view is nnx.view and nnx.compat.view_info is nnx.view_info

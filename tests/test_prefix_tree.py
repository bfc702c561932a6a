"""nnx.extract.prefix: per-leaf prefix values shaped like the graph, in tree and graph mode."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(2, 3, rngs=rngs)
    self.bn = nnx.BatchNorm(3, rngs=rngs)


def test_tree_mode_copies_the_graph_with_values_for_leaves():
  m = Block(nnx.Rngs(0))
  out = nnx.extract.prefix(m, {nnx.Param: "p", nnx.BatchStat: "s"}, graph=False)
  assert type(out) is Block and out is not m
  assert (out.linear.kernel, out.linear.bias, out.bn.mean, out.bn.var) == ("p", "p", "s", "s")
  assert isinstance(m.linear.kernel, nnx.Param)  # the input is untouched


def test_callable_sees_full_paths_and_leaves():
  seen = {}

  def fn(path, leaf):
    seen[path] = type(leaf).__name__
    return 0

  nnx.extract.prefix({"m": nnx.Linear(1, 1, rngs=nnx.Rngs(0)), "x": 1.0}, fn, graph=False)
  assert seen == {("m", "bias"): "Param", ("m", "kernel"): "Param", ("x",): "float"}


def test_graph_mode_gives_tree_states_and_references_for_repeats():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  first, again, other = nnx.extract.prefix((m, m, 5), {nnx.Param: 0, ...: None}, graph=True)
  assert isinstance(first, nnx.extract.TreeState)
  assert first.state.to_pure_dict() == {"bias": 0, "kernel": 0}
  assert again.graphdef.nodes == [nnx.graphlib.NodeRef(0)] and len(again.state) == 0
  assert other is None
  assert jax.tree.leaves(first) == [0, 0]


def test_ellipsis_catches_the_rest_and_no_match_names_the_path():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  assert nnx.extract.prefix(m, {...: "all"}, graph=False).kernel == "all"
  with pytest.raises(ValueError, match="No filter matched leaf at path bias"):
    nnx.extract.prefix(m, {nnx.BatchStat: 0}, graph=False)


def test_tree_mode_rejects_sharing():
  v = nnx.Param(jnp.ones(1))
  m = nnx.Module()
  m.a, m.b = v, v
  with pytest.raises(nnx.SharedReferenceError, match=r"nnx.prefix\(graph=False\)"):
    nnx.extract.prefix(m, {...: 0}, graph=False)

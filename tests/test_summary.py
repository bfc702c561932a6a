"""nnx.tabulate: counts and bytes per module and Variable type, checked against hand counts."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.training._summary import summarize, totals


class Counter(nnx.Variable):
  pass


class Block(nnx.Module):
  def __init__(self, din, dout, *, rngs):
    self.dense = nnx.Linear(din, dout, rngs=rngs)
    self.mean = nnx.BatchStat(jnp.zeros(dout))
    self.calls = Counter(jnp.zeros((), jnp.int32))

  def __call__(self, x):
    self.calls.value = self.calls.value + 1
    self.mean.value = 0.9 * self.mean.value
    return jax.nn.relu(self.dense(x))


class Net(nnx.Module):
  def __init__(self, rngs):
    self.b1 = Block(4, 8, rngs=rngs)
    self.b2 = Block(8, 3, rngs=rngs)
    self.reuse = self.b1  # shared: counted once
    self.tied = self.b2.dense.kernel  # shared Variable: counted once
    self.head = nnx.Param(jnp.ones((3, 2), jnp.bfloat16))
    self.rngs = rngs

  def __call__(self, x):
    return self.b2(self.b1(x)) @ self.head.value.astype(jnp.float32)


# Hand counts: Linear(4, 8) = 4*8 + 8 = 40, Linear(8, 3) = 8*3 + 3 = 27,
# head = 6 bfloat16, BatchStats 8 + 3, Counters 1 + 1, Rngs: 1 key (8 B) + 1 count (4 B).
def test_summarize_matches_hand_counts():
  rows = {r.path: r for r in summarize(Net(nnx.Rngs(0)))}
  paths = [(), ("b1",), ("b1", "dense"), ("b2",), ("b2", "dense"), ("rngs",), ("rngs", "default")]
  assert list(rows) == paths
  assert rows[()].counts == {"Param": (6, 12)}
  assert rows[("b1",)].counts == {"BatchStat": (8, 32), "Counter": (1, 4)}
  assert rows[("b1", "dense")].counts == {"Param": (40, 160)}
  assert rows[("b2", "dense")].counts == {"Param": (27, 108)}
  assert rows[("rngs", "default")].counts == {"RngState": (2, 12)}
  assert rows[("b1",)].type_name == "Block"
  tot = totals(list(rows.values()))
  assert tot == {
    "Param": (40 + 27 + 6, 4 * 67 + 2 * 6),
    "BatchStat": (11, 44),
    "Counter": (2, 8),
    "RngState": (2, 12),
  }


def test_summarize_depth_folds_descendants_into_ancestors():
  rows = summarize(Net(nnx.Rngs(0)), depth=1)
  assert [r.path for r in rows] == [(), ("b1",), ("b2",), ("rngs",)]
  by = {r.path: r.counts for r in rows}
  assert by[("b1",)] == {"BatchStat": (8, 32), "Counter": (1, 4), "Param": (40, 160)}
  whole = summarize(Net(nnx.Rngs(0)), depth=0)
  assert len(whole) == 1 and whole[0].counts == totals(rows)


def test_tabulate_table_with_call_shapes():
  model = Net(nnx.Rngs(0))
  before = nnx.state(model)
  table = nnx.tabulate(model, jnp.ones((5, 4)))
  lines = table.splitlines()
  assert lines[0].split() == "path type inputs outputs Param BatchStat Counter RngState".split()
  row = {ln.split()[0]: ln for ln in lines[2:-2]}
  assert row["b1"].split()[1:4] == ["Block", "float32[5,", "4]"]
  assert "float32[5, 8]" in row["b1.dense"] and "40 (160 B)" in row["b1.dense"]
  assert "float32[5, 3]" in row["b2"]
  assert row["<root>"].split()[1:] == "Net float32[5, 4] float32[5, 2] 6 (12 B)".split()
  assert "reuse" not in row  # a shared module is listed once
  assert lines[-1].split() == "Total 73 (280 B) 11 (44 B) 2 (8 B) 2 (12 B)".split()
  # Tracing the call abstractly changes nothing in the model.
  assert jax.tree.all(jax.tree.map(lambda a, b: (a == b).all(), nnx.state(model), before))
  assert int(model.b1.calls.value) == 0


def test_tabulate_without_inputs_and_byte_units():
  big = nnx.Linear(1000, 1000, rngs=nnx.Rngs(0))
  table = nnx.tabulate(big)
  assert table.splitlines()[0].split() == ["path", "type", "Param"]
  assert "1,001,000 (3.8 MB)" in table
  assert nnx.Linear.__call__ is big.__class__.__call__  # no wrapper left behind


class Failing(nnx.Module):
  def __init__(self, rngs):
    self.block = Block(2, 2, rngs=rngs)

  def __call__(self, x):
    self.block(x)
    raise ValueError("boom")


def test_tabulate_restores_call_methods_after_an_error():
  original = Block.__call__
  with pytest.raises(ValueError, match="boom"):
    nnx.tabulate(Failing(nnx.Rngs(0)), jnp.ones((1, 2)))
  assert Block.__call__ is original and Failing.__dict__["__call__"].__name__ == "__call__"
  assert "__call__" not in nnx.Module.__dict__

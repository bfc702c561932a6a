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


CONSOLE = {"width": 10_000, "force_terminal": False, "no_color": True}


def _cells(line: str) -> list[str]:
  sep = "│" if "│" in line else "┃"
  return [c.strip() for c in line.strip()[1:-1].split(sep)]


def test_tabulate_table_with_call_shapes():
  model = Net(nnx.Rngs(0))
  before = nnx.state(model)
  lines = nnx.tabulate(model, jnp.ones((5, 4)), console_kwargs=CONSOLE).splitlines()
  assert lines[0].strip() == "Net Summary"
  header = _cells(lines[2])
  assert header == "path type inputs outputs BatchStat Counter Param RngState".split()
  rows = [_cells(ln) for ln in lines if ln.startswith("│")]
  first = [r for r in rows if r[1]]  # the first line of each row names its type
  assert [(r[0], r[1]) for r in first] == [
    ("", "Net"),
    ("b1", "Block"),
    ("b1/dense", "Linear"),
    ("b2", "Block"),
    ("b2/dense", "Linear"),
  ]  # call order; the shared module `reuse` is called through b1 and listed once
  assert first[1][2:4] == ["float32[5,4]", "float32[5,8]"]
  # Cells: a module's own Variables, then its subtree's count (shared Variables once).
  assert first[0][4:] == ["11 (44 B)", "2 (8 B)", "head: bfloat16[3,2]", "2 (12 B)"]
  assert first[2][6] == "bias: float32[8]"
  assert "40 (160 B)" in [r[6] for r in rows] and "73 (280 B)" in [r[6] for r in rows[:5]]
  total = next(r for r in rows if r[3] == "Total")
  assert total[4:] == ["11 (44 B)", "2 (8 B)", "73 (280 B)", "2 (12 B)"]
  assert lines[-1].strip() == "Total Parameters: 88 (344 B)"
  # Tracing the call abstractly changes nothing in the model.
  assert jax.tree.all(jax.tree.map(lambda a, b: (a == b).all(), nnx.state(model), before))
  assert int(model.b1.calls.value) == 0


def test_tabulate_without_inputs_and_byte_units():
  big = nnx.Linear(1000, 1000, rngs=nnx.Rngs(0))
  lines = nnx.tabulate(big, console_kwargs=CONSOLE).splitlines()
  assert _cells(lines[2]) == ["path", "type", "inputs", "outputs", "Param"]
  assert "1,001,000 (4.0 MB)" in lines[-1]  # 4,004,000 bytes, decimal units as flax
  assert nnx.Linear.__call__ is big.__class__.__call__  # no wrapper left behind


def test_tabulate_rows_per_method_and_input_signature_with_flops():
  class Model(nnx.Module):
    def __init__(self):
      self.w = nnx.Param(jnp.ones(4))

    def scale(self, x, *, by=None):
      return x * self.w

    def __call__(self, x):
      return self.scale(x, by={}) + self.scale(x, by=None) + self.scale(x, by={})

  table = nnx.tabulate(
    Model(), jnp.ones(4), compute_flops=True, compute_vjp_flops=True, console_kwargs=CONSOLE
  )
  lines = table.splitlines()
  assert _cells(lines[2])[4:6] == ["flops", "vjp_flops"]
  rows = [_cells(ln) for ln in lines if ln.startswith("│") and _cells(ln)[1]]
  assert [(r[0], r[2]) for r in rows] == [
    ("", "float32[4]"),
    ("scale", "float32[4]"),  # by={} once: a repeated signature is one row
    ("scale", "float32[4]"),
  ]
  assert "by: {}" in table and "by: None" in table
  assert int(rows[1][4]) > 0 and int(rows[1][5]) > int(rows[1][4])


@pytest.mark.parametrize("flops", [False, True])
def test_tabulate_lists_a_shared_module_at_its_first_path_once(flops):
  calls = []

  class Block(nnx.Module):
    def __init__(self, linear, rngs):
      self.linear, self.norm = linear, nnx.LayerNorm(2, rngs=rngs)

    def __call__(self, x):
      calls.append(1)
      return self.norm(self.linear(x))

  class Model(nnx.Module):
    def __init__(self, rngs):
      shared = nnx.Linear(2, 2, rngs=rngs)
      self.b1, self.b2 = Block(shared, rngs), Block(shared, rngs)

    def __call__(self, x):
      return self.b2(self.b1(x))

  table = nnx.tabulate(
    Model(nnx.Rngs(0)), jnp.ones((1, 2)), compute_flops=flops, console_kwargs=CONSOLE
  )
  paths = [_cells(ln)[0] for ln in table.splitlines() if ln.startswith("│") and _cells(ln)[1]]
  assert paths == ["", "b1", "b1/linear", "b1/norm", "b2", "b2/norm"]
  assert len(calls) == 2  # each block body runs once, FLOPs or not


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

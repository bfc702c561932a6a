"""Filters: literals, combinators and their errors."""

import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.filterlib import to_predicate


class Model(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.ones(2))
    self.s = nnx.BatchStat(jnp.ones(2))
    self.c = nnx.Cache(jnp.ones(2))
    self.v = nnx.Variable(jnp.ones(2))
    self.t = nnx.Variable(jnp.ones(2), tag="special")
    self.buf = np.ones(2)
    self.sub = nnx.Module()
    self.sub.w = nnx.Param(jnp.ones(1))


def paths(state):
  return sorted("/".join(map(str, p)) for p in state.to_flat_dict())


@pytest.mark.parametrize(
  "flt,expected",
  [
    (nnx.Param, ["sub/w", "w"]),
    (..., ["buf", "c", "s", "sub/w", "t", "v", "w"]),
    (True, ["buf", "c", "s", "sub/w", "t", "v", "w"]),
    (None, []),
    (False, []),
    ((nnx.BatchStat, nnx.Cache), ["c", "s"]),
    (nnx.Any(nnx.BatchStat, nnx.Cache), ["c", "s"]),
    (
      nnx.All(nnx.Variable, nnx.Not(nnx.Param), nnx.Not(nnx.BatchStat), nnx.Not(nnx.Cache)),
      ["t", "v"],
    ),
    (nnx.Not(nnx.Variable), ["buf"]),
    (nnx.buffers, ["buf"]),
    (nnx.PathContains("sub"), ["sub/w"]),
    (nnx.OfType(nnx.Cache), ["c"]),
    ("special", ["t"]),
    ("params", ["sub/w", "w"]),
    (nnx.WithTag("batch_stats"), ["s"]),
    (nnx.Everything(), ["buf", "c", "s", "sub/w", "t", "v", "w"]),
    (nnx.Nothing(), []),
    (lambda path, v: path[-1] == "w", ["sub/w", "w"]),
  ],
)
def test_filter_selects(flt, expected):
  assert paths(nnx.state(Model(), flt)) == expected


def test_first_matching_filter_wins():
  _, a, b = nnx.split(Model(), nnx.Variable, ...)
  assert paths(b) == ["buf"]
  assert len(a.to_flat_dict()) == 6


def test_combinators_hash_and_compare():
  assert nnx.Not(nnx.Param) == nnx.Not(nnx.Param)
  assert hash(nnx.All(nnx.Param, nnx.Cache)) == hash(nnx.All(nnx.Param, nnx.Cache))
  assert repr(nnx.Not(nnx.Param)) == "Not(Param)"


def test_unknown_filter_raises():
  with pytest.raises(nnx.UnknownFilterError, match="Invalid filter 3 of type int"):
    to_predicate(3)
  with pytest.raises(TypeError):  # also a TypeError
    nnx.state(Model(), 3.5)


@pytest.mark.parametrize("catch_all", [..., True])
def test_catch_all_filter_must_come_last(catch_all):
  with pytest.raises(nnx.FilterError, match=r"can only be used as the last filters, got .* 0 of 2"):
    nnx.split(Model(), catch_all, nnx.Param)
  with pytest.raises(ValueError, match="can only be used as the last filters"):
    nnx.state(Model()).split(catch_all, nnx.Param)


def test_non_exhaustive_split_names_the_remainder():
  with pytest.raises(nnx.FilterError, match=r"Non-exhaustive filters, got a non-empty remai.*s \("):
    nnx.split(Model(), nnx.Param)


def test_path_contains_exact_or_substring():
  assert nnx.PathContains("sub")(("sub", "w"), None)
  assert not nnx.PathContains("su")(("sub", "w"), None)
  assert nnx.PathContains("su", exact=False)(("sub", "w"), None)
  assert nnx.PathContains(1, exact=False)(("l", 12), None)
  assert nnx.PathContains("a", exact=False) != nnx.PathContains("a")

"""The first line of a Module's repr counts its Variables' elements and bytes per
Variable type (as flax.nnx's repr does); shared Variables count once."""

import jax
import jax.numpy as jnp

import nnx_eqx as nnx


def test_counts_per_type_and_total():
  m = nnx.Module()
  m.w = nnx.Param(jnp.ones((2, 500)))
  m.s = nnx.BatchStat(jnp.ones((3,), jnp.int8))
  m.tied = m.w
  m.raw = jnp.ones((2,))
  first = repr(m).splitlines()[0]
  assert first == "Module(  # BatchStat: 3 (3 B), Param: 1,000 (4.0 KB), Total: 1,005 (4.0 KB)"


def test_nested_modules_and_static_only_modules_have_no_comment():
  outer = nnx.Module()
  outer.inner = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
  outer.empty = nnx.Module()
  outer.empty.n = 3
  lines = repr(outer).splitlines()
  assert lines[0].startswith("Module(  # Param: 6 (24 B)")
  assert "  empty=Module(" in lines and "  inner=Linear(" in lines
  assert repr(outer.empty).splitlines()[0] == "Module("


def test_counts_under_a_trace_and_for_abstract_models():
  seen = []

  @jax.jit
  def f(m):
    seen.append(repr(m).splitlines()[0])
    return m(jnp.ones((1, 2)))

  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  f(model)
  f(model)
  abstract = nnx.eval_shape(lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
  assert seen == ["Linear(  # Param: 9 (36 B), Total: 9 (36 B)"]  # one trace
  assert repr(abstract).splitlines()[0] == seen[0]

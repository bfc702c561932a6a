"""nnx.cached_partial: bound graph arguments are clones sharing the Variables."""

import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


def test_bound_module_is_a_clone_with_the_same_variables():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  seen = []

  def f(bound, x):
    seen.append(bound)
    return bound(x)

  g = nnx.cached_partial(f, m)
  y1, y2 = g(jnp.ones((1, 2))), g(jnp.ones((1, 2)))
  assert seen[0] is seen[1] and seen[0] is not m
  assert seen[0].kernel is m.kernel and seen[0].bias is m.bias
  assert y1.shape == (1, 3) and bool((y1 == y2).all())


def test_updates_through_a_jitted_step_reach_the_original():
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))

  @nnx.jit
  def step(model, x):
    model.bias.value += 1.0
    return model(x).sum()

  g = nnx.cached_partial(step, m)
  for _ in range(3):
    g(jnp.ones((1, 2)))
  assert m.bias.value.tolist() == [3.0, 3.0, 3.0]


def test_non_graph_arguments_are_bound_as_they_are():
  g = nnx.compat.cached_partial(lambda a, b, c: (a, b, c), 1, "s")
  assert g(2) == (1, "s", 2)


@pytest.mark.parametrize("kw", [{"graph": False}, {"graph_updates": False}])
def test_tree_mode_is_refused(kw):
  m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r"graph-mode-only API .* Fix: call it outside"):
    nnx.cached_partial(lambda m: m, m, **kw)
  with nnx.set_graph_mode(False), pytest.raises(nnx.GraphModeRequiredError, match="graph=False"):
    nnx.cached_partial(lambda m: m, m)

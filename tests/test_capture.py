"""nnx.capture: sown intermediates and perturbations of one call, by module path."""

import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close


class Block(nnx.Module):
  def __init__(self, seed):
    self.lin = nnx.Linear(2, 2, rngs=nnx.Rngs(seed))

  def __call__(self, x):
    y = self.lin(x)
    self.sow(nnx.Intermediate, "y", y)
    return y

  def double(self, x):
    return 2 * x


class Net(nnx.Module):
  def __init__(self):
    self.blocks = nnx.List([Block(0), Block(1)])

  def __call__(self, x):
    for b in self.blocks:
      x = b(x)
    self.sow(nnx.Intermediate, "out", x)
    return x


def _state_paths(state):
  return sorted(state.to_flat_dict())


def test_sown_values_come_back_by_module_path_and_the_modules_are_left_clean():
  net, x = Net(), jnp.ones((1, 2))
  before = nnx.state(net)
  out, inter = nnx.capture(net, nnx.Intermediate)(x)
  assert _state_paths(inter) == [("blocks", 0, "y"), ("blocks", 1, "y"), ("out",)]
  assert_trees_close(inter["out"].value[0], out)
  assert_trees_close(inter["blocks"][1]["y"].value[0], out)
  assert isinstance(inter["out"], nnx.Intermediate)
  nnx_state_after = nnx.state(net)
  assert _state_paths(nnx_state_after) == _state_paths(before)  # no slot, no sown attribute


def test_capture_forms_decorator_bound_method_and_no_types():
  net, x = Net(), jnp.ones((1, 2))

  @nnx.capture(nnx.Intermediate)
  def forward(model, x):
    return model(x)

  out, inter = forward(net, x)
  assert "out" in inter
  assert_trees_close(nnx.capture(net)(x), out)  # nothing captured: the output alone
  _, inter2 = nnx.capture(net.blocks[0].double, nnx.Intermediate)(x)
  assert _state_paths(inter2) == []
  with pytest.raises(TypeError, match="root must be a Module"):
    nnx.capture(lambda x: x, nnx.Intermediate)(x)


def test_sow_under_jit_inside_capture_and_the_call_traces_once():
  traces = []

  @nnx.jit
  def step(model, x):
    traces.append(1)
    return model(x)

  net, x = Net(), jnp.ones((1, 2))
  out, inter = nnx.capture(lambda m, x: step(m, x), nnx.Intermediate)(net, x)
  assert_trees_close(inter["out"].value[0], out)
  nnx.capture(lambda m, x: step(m, x), nnx.Intermediate)(net, x)
  assert len(traces) == 1


def test_method_outputs_sow_every_public_method_and_are_undone():
  b, x = Block(0), jnp.ones((1, 2))
  run = nnx.capture(lambda m, x: m.double(m(x)), nnx.Intermediate, method_outputs=nnx.Intermediate)
  out, inter = run(b, x)
  assert_trees_close(inter["double"].value[0], out)
  assert len(inter["y"].value) == 1 and "__call__" in inter
  assert not hasattr(Block.double, "__wrapped__")  # methods restored


def test_perturbation_gradient_is_the_gradient_of_the_intermediate():
  class M(nnx.Module):
    def __init__(self):
      self.w = nnx.Param(jnp.array([1.0, 2.0]))

    def __call__(self, x):
      h = self.perturb("h", x * self.w)
      return jnp.sum(jnp.sin(h))

  m, x = M(), jnp.array([0.5, 0.25])
  _, perturbations = nnx.capture(m, nnx.Perturbation)(x)
  assert_trees_close(perturbations["h"].value, jnp.zeros(2))

  def loss(m, p):
    return nnx.capture(m, nnx.Intermediate, init=nnx.State({"h": nnx.Perturbation(p)}))(x)[0]

  g = nnx.grad(loss, argnums=1)(m, jnp.zeros(2))
  assert_trees_close(g, jnp.cos(x * m.w[...]))


def test_sow_of_an_uncaptured_type_inside_capture_is_dropped():
  b = Block(0)
  _, cached = nnx.capture(b, nnx.Cache)(jnp.ones((1, 2)))
  assert _state_paths(cached) == [] and not hasattr(b, "y")


def test_perturbations_state_through_jit_and_grad():
  class M(nnx.Module):
    def __call__(self, x):
      h = self.perturb("h", x)
      self.sow(nnx.Intermediate, "y", 3 * h)
      return jnp.sum(3 * h)

  m, x = M(), jnp.array([1.0, 2.0])
  _, perturbations = nnx.capture(m, nnx.Perturbation)(x)

  @nnx.jit
  def step(m, perturbations, x):
    def loss(m, perturbations, x):
      return nnx.capture(m, nnx.Intermediate, init=perturbations)(x)

    return nnx.grad(loss, argnums=1, has_aux=True)(m, perturbations, x)

  grads, inter = step(m, perturbations, x)
  assert_trees_close(grads["h"].value, jnp.full(2, 3.0))
  assert_trees_close(inter["y"].value[0], 3 * x)

"""Modules of the other libraries are refused by name where nnx_eqx takes NNX modules
or States: an ``eqx.Module`` (and a flax.nnx Module) raises ``nnx.WrongLibraryError``
naming the argument, the type and the fix, never an empty State."""

import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx

KEY = jax.random.key(0)
X = jnp.ones(2)


def _mlp():
  return eqx.nn.MLP(2, 2, 4, 1, key=KEY)


def _nnx_linear():
  return nnx.Linear(2, 2, rngs=nnx.Rngs(0))


# (entry point, how it is called with the Equinox module m, the argument it names)
ENTRY_POINTS = {
  "nnx.state": (lambda m: nnx.state(m, nnx.Param), "node"),
  "nnx.split": (lambda m: nnx.split(m), "node"),
  "nnx.graphdef": (lambda m: nnx.graphdef(m), "node"),
  "nnx.update": (lambda m: nnx.update(m, {}), "node"),
  "nnx.pop": (lambda m: nnx.pop(m, nnx.Intermediate), "node"),
  "nnx.clone": (lambda m: nnx.clone(m), "node"),
  "nnx.variables": (lambda m: nnx.variables(m), "node"),
  "nnx.iter_graph": (lambda m: nnx.iter_graph(m), "node"),
  "nnx.iter_modules": (lambda m: nnx.iter_modules(m), "node"),
  "nnx.merge": (lambda m: nnx.merge(nnx.graphdef(_nnx_linear()), m), "states[0]"),
  "nnx.Optimizer": (lambda m: nnx.Optimizer(m, optax.adam(1e-2), wrt=nnx.Param), "model"),
  "nnx.ModelAndOptimizer": (lambda m: nnx.ModelAndOptimizer(m, optax.sgd(0.1)), "model"),
  "Optimizer.update": (
    lambda m: nnx.Optimizer(_nnx_linear(), optax.sgd(0.1)).update(m, {}),
    "model",
  ),
  "nnx.tabulate": (lambda m: nnx.tabulate(m, X), "model"),
  "nnx.checkpoint.save": (lambda m: nnx.checkpoint.save("unused-ckpt", m), "target"),
  "nnx.checkpoint.restore": (lambda m: nnx.checkpoint.restore("unused-ckpt", m), "target"),
}
NAMES = {"nnx.ModelAndOptimizer": "nnx.Optimizer"}  # (it is an Optimizer)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_an_equinox_module_is_refused_by_name(entry, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  call, arg = ENTRY_POINTS[entry]
  with pytest.raises(nnx.WrongLibraryError) as info:
    call(_mlp())
  message = str(info.value)
  assert message.startswith(f"{NAMES.get(entry, entry)}: `{arg}` is equinox.nn.MLP, an Equinox")
  assert "nnx.from_eqx(" in message
  assert isinstance(info.value, TypeError) and isinstance(info.value, nnx.NnxError)
  assert not list(pathlib.Path(tmp_path).iterdir())  # nothing written


# -- the lifted transforms take an eqx.Module as data; where JAX cannot, they say so ---
TRANSFORMS = {
  "nnx.jit": lambda m: nnx.jit(lambda m, x: m(x))(m, X),
  "nnx.grad": lambda m: nnx.grad(lambda m: m(X).sum())(m),
  "nnx.value_and_grad": lambda m: nnx.value_and_grad(lambda m: m(X).sum())(m),
  "nnx.scan": lambda m: nnx.scan(lambda m, x: (m, m(x)), in_axes=(nnx.Carry, 0))(
    m, jnp.ones((3, 2))
  ),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_a_transform_names_the_equinox_argument_jax_cannot_trace(transform):
  with pytest.raises(nnx.WrongLibraryError) as info:
    TRANSFORMS[transform](_mlp())
  message = str(info.value)
  assert message.startswith(f"{transform}: argument 0 is equinox.nn.MLP, an Equinox module")
  assert "its leaf at .activation is a custom_jvp" in message
  assert "nnx.from_eqx(" in message and "eqx.filter_jit" in message
  assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_a_transform_takes_an_equinox_module_of_arrays_as_data(transform):
  m = eqx.nn.Linear(2, 2, key=KEY)  # every leaf an array: a pytree like any other
  out = TRANSFORMS[transform](m)
  want = {
    "nnx.jit": lambda: m(X),
    "nnx.grad": lambda: jax.grad(lambda m: m(X).sum())(m),
    "nnx.value_and_grad": lambda: jax.value_and_grad(lambda m: m(X).sum())(m),
    "nnx.scan": lambda: (m, jax.vmap(m)(jnp.ones((3, 2)))),
  }[transform]()
  nnx.testing.assert_trees_close(out, want)


def test_other_transforms_keep_non_array_leaves_static():
  m = _mlp()
  ys = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(m, jnp.ones((3, 2)))
  nnx.testing.assert_trees_close(ys, jax.vmap(m)(jnp.ones((3, 2))))


def test_a_converted_model_is_accepted_everywhere():
  model = nnx.from_eqx(_mlp())
  assert len(jax.tree.leaves(nnx.state(model, nnx.Param))) == 4
  opt = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
  grads = nnx.grad(lambda m: m(X).sum())(model)
  opt.update(model, grads)
  assert int(opt.step.value) == 1


def test_an_equinox_module_inside_an_nnx_module_is_a_pytree_as_before():
  class Holder(nnx.Module):
    def __init__(self):
      self.inner = eqx.nn.Linear(2, 2, key=KEY)  # an Equinox pytree as an attribute
      self.scale = nnx.Param(jnp.ones(2))

  h = Holder()
  assert "scale" in nnx.state(h) and "inner" in nnx.state(h)
  assert nnx.graphdef(nnx.clone(h)) == nnx.graphdef(h)
  y = nnx.jit(lambda h: h.inner(X) * h.scale)(h)
  nnx.testing.assert_trees_close(y, h.inner(X))


def test_a_flax_module_is_refused_with_the_flax_bridge_message():
  fnnx = pytest.importorskip("flax.nnx", reason="needs flax (the `flax` extra)")
  f = fnnx.Linear(2, 2, rngs=fnnx.Rngs(0))
  for call, api, arg in [
    (lambda: nnx.state(f), "nnx.state", "node"),
    (lambda: nnx.split(f), "nnx.split", "node"),
    (lambda: nnx.Optimizer(f, optax.sgd(0.1)), "nnx.Optimizer", "model"),
  ]:
    with pytest.raises(nnx.WrongLibraryError, match=rf"^{api}: `{arg}`: got flax\.nnx\..*Linear"):
      call()
  with pytest.raises(nnx.WrongLibraryError, match=r"nnx\.from_flax\(\.\.\.\)"):
    nnx.graphdef(f)
  assert len(jax.tree.leaves(nnx.state(nnx.from_flax(f)))) == 2  # converted: accepted

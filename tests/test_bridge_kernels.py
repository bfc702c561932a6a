"""Same kernels: one module, three ways to jit it, one program; conversions keep the program.

For a module ``m``, ``nnx.jit(f)``, ``eqx.filter_jit(f)`` and ``jax.jit`` over
``nnx.split`` state lower to the same stripped StableHLO, for ``f`` a forward
pass and a train step. The one difference is Equinox's own: ``eqx.filter_jit``
returns an extra ``i32`` constant (the marker it blocks on after each call),
which is removed before comparing. An Equinox model and its NNX conversion
run the same program (forward, gradients, state updates: the same StableHLO
and bits), here for the test architectures; ``test_bridge_programs.py`` does it
layer by layer, both ways.
"""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import EQX_ARCHITECTURES, assert_same_program, stablehlo_text
from nnx_eqx.testing._eqx import _randomize, _template

_MAIN = re.compile(r"func\.func public @main\((.*)\) -> \((.*)\) \{")


def drop_eqx_marker(text: str) -> str:
  """Removes the extra leading ``tensor<i32>`` output that eqx.filter_jit adds."""
  lines = text.splitlines()
  main = next(i for i, line in enumerate(lines) if "func.func public @main" in line)
  assert re.search(r"-> \(tensor<i32>", lines[main]), lines[main]
  lines[main] = re.sub(r"-> \(tensor<i32>, ", "-> (", lines[main])
  ret = next(i for i in range(main, len(lines)) if lines[i].strip().startswith("return"))
  m = re.match(r"(\s*return )(%\w+), (.*) : tensor<i32>, (.*)", lines[ret])
  assert m, lines[ret]
  marker = m.group(2)
  lines[ret] = f"{m.group(1)}{m.group(3)} : {m.group(4)}"
  defn = [i for i, line in enumerate(lines) if line.strip().startswith(f"{marker} = ")]
  assert len(defn) == 1 and "stablehlo.constant dense<0> : tensor<i32>" in lines[defn[0]]
  del lines[defn[0]]
  return "\n".join(lines)


class MLP(nnx.Module):
  def __init__(self, rngs):
    self.l1 = nnx.Linear(4, 8, rngs=rngs)
    self.l2 = nnx.Linear(8, 2, rngs=rngs)

  def __call__(self, x):
    return self.l2(jax.nn.relu(self.l1(x)))


X, Y = jnp.ones((3, 4)), jnp.zeros((3, 2))


def forward(m, x):
  return m(x)


def train_step(m, x, y):
  loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(m)
  nnx.update(m, jax.tree.map(lambda p, g: p - 0.1 * g, nnx.state(m, nnx.Param), grads))
  return loss, m


def _three_ways(f, m, *args):
  graphdef, state = nnx.split(m)

  def pure(state, *args):
    out = f(nnx.merge(graphdef, state), *args)
    return jax.tree.map(
      lambda o: nnx.state(o) if isinstance(o, nnx.Module) else o,
      out,
      is_leaf=lambda o: isinstance(o, nnx.Module),
    )

  a = stablehlo_text(nnx.jit(f).lower(m, *args))
  b = drop_eqx_marker(stablehlo_text(eqx.filter_jit(f).lower(m, *args)))
  c = stablehlo_text(jax.jit(pure).lower(state, *args))
  return a, b, c


def _models():
  yield "nnx MLP", MLP(nnx.Rngs(0)), X, Y
  k = jax.random.split(jax.random.key(0), 3)
  cnn = eqx.nn.Sequential(
    [
      eqx.nn.Conv2d(1, 4, 3, padding=1, key=k[0]),
      eqx.nn.Lambda(jax.nn.relu),
      eqx.nn.MaxPool2d(2, 2),
      eqx.nn.Lambda(jnp.ravel),
      eqx.nn.Linear(64, 3, key=k[1]),
    ]
  )
  yield "converted CNN", _Batched(nnx.from_eqx(cnn)), jnp.ones((2, 1, 8, 8)), jnp.zeros((2, 3))


class _Batched(nnx.Module):
  def __init__(self, inner):
    self.inner = inner

  def __call__(self, x):
    return jax.vmap(self.inner)(x)


@pytest.mark.parametrize(
  "name,m,x,y", list(_models()), ids=lambda v: v if isinstance(v, str) else ""
)
@pytest.mark.parametrize("step", ["forward", "train_step"])
def test_three_jits_lower_to_the_same_stablehlo(name, m, x, y, step):
  if step == "forward":
    a, b, c = _three_ways(forward, m, x)
  else:
    a, b, c = _three_ways(train_step, m, x, y)
  assert a == b, "nnx.jit vs eqx.filter_jit"
  assert a == c, "nnx.jit vs jax.jit over nnx.split"


def test_eqx_marker_is_the_only_difference():
  m = MLP(nnx.Rngs(0))
  raw = stablehlo_text(eqx.filter_jit(forward).lower(m, X))
  assert raw != stablehlo_text(nnx.jit(forward).lower(m, X))
  assert drop_eqx_marker(raw) == stablehlo_text(nnx.jit(forward).lower(m, X))


def eqx_forward(model, state, x):
  if state is None:
    return model(x), state
  return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def nnx_forward(m, x, stateful):
  if not stateful:
    return m(x)
  return nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name="batch")(m, x)


@pytest.mark.parametrize("arch", EQX_ARCHITECTURES, ids=lambda a: f"{a[0]}-{len(a[2])}")
def test_converted_architectures_run_the_equinox_program(arch):
  model, state = _template(arch)
  model = _randomize(model, 0)
  if state is not None:
    state = _randomize(state, 1, positive=True)
  shape = arch[1] if state is None else (3, *arch[1])
  x = jnp.zeros(shape, jnp.int32 if arch[0] == "tokens" else jnp.float32)
  m = nnx.from_eqx(model, state)
  stateful = state is not None
  assert_same_program((model, state), m, eqx_forward, lambda m, x: nnx_forward(m, x, stateful), x)

"""A user's script, type-checked by CI (``.ci/run``) against the installed wheel.

mypy reads nnx_eqx's annotations only through the ``py.typed`` marker the wheel
ships; without it every nnx_eqx name would be ``Any`` (or an import error). The
calls in ``_wrong_calls`` are type errors on purpose, each silenced by an ignore
that names the error: CI runs mypy with ``--warn-unused-ignores``, so if mypy
stopped seeing the annotations those ignores would be unused and the check fails.
``python tests/typing/user_script.py`` runs the script.
"""

import jax
import jax.numpy as jnp
import optax

import nnx_eqx as nnx


class MLP(nnx.Module):
  def __init__(self, din: int, dhidden: int, dout: int, *, rngs: nnx.Rngs) -> None:
    self.l1 = nnx.Linear(din, dhidden, rngs=rngs)
    self.l2 = nnx.Linear(dhidden, dout, rngs=rngs)

  def __call__(self, x: jax.Array) -> jax.Array:
    return self.l2(jax.nn.relu(self.l1(x)))


def train(steps: int) -> list[float]:
  model = MLP(4, 16, 2, rngs=nnx.Rngs(0))
  optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
  x, y = jnp.ones((8, 4)), jnp.zeros((8, 2))

  @nnx.jit
  def step(model: MLP, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array) -> jax.Array:
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    optimizer.update(model, grads)
    return loss

  graphdef, state = nnx.split(model)
  nnx.merge(graphdef, state)
  return [float(step(model, optimizer, x, y)) for _ in range(steps)]


def _wrong_calls() -> None:
  """Never run: mypy must report each of these (see the module docstring)."""
  nnx.Linear("4", 2, rngs=nnx.Rngs(0))  # type: ignore[arg-type]
  layer: int = nnx.Linear(2, 3, rngs=nnx.Rngs(0))  # type: ignore[assignment]
  del layer


if __name__ == "__main__":
  losses = train(3)
  assert losses[-1] < losses[0], losses
  print(f"nnx_eqx {nnx.__version__} from {nnx.__file__}: losses {losses}")

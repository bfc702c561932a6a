"""``obj._pytree__state``: flax.nnx's per-object record (``nnx.pytreelib.PytreeState``),
whose ``trace_state`` is the JAX trace the object belongs to."""

import inspect

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx


class Foo(nnx.Module): ...


class Point(nnx.Pytree):
  def __init__(self):
    self.x = jnp.zeros(2)


@pytest.mark.parametrize(
  "make",
  [
    Foo,
    Point,
    lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)),
    lambda: nnx.List([1]),
    lambda: nnx.Dict(a=1),
    lambda: nnx.Rngs(0),
  ],
  ids=["module", "pytree", "linear", "list", "dict", "rngs"],
)
def test_every_pytree_has_a_state_record(make):
  obj = make()
  assert hasattr(obj, "_pytree__state")
  state = obj._pytree__state
  assert type(state) is nnx.pytreelib.PytreeState
  assert state.initializing is False and state.is_setup is False
  assert state.trace_state.is_valid()
  assert "_pytree__state" not in obj._pytree__nodes  # bookkeeping, not an attribute


def test_trace_state_is_the_trace_the_object_belongs_to():
  m = Foo()
  seen = {}

  @jax.jit
  def f(state):
    seen["captured"] = m._pytree__state.trace_state.is_valid()
    with pytest.raises(nnx.TraceContextError):
      m.a = 1
    rebuilt = nnx.merge(graphdef, state)
    seen["rebuilt"] = rebuilt._pytree__state.trace_state.is_valid()
    rebuilt.a = 1  # an object rebuilt under this trace belongs to it
    return state

  graphdef, state = nnx.split(m)
  f(state)
  assert seen == {"captured": False, "rebuilt": True}
  assert m._pytree__state.trace_state.is_valid()


def test_pytree_state_signature_and_repr_follow_flax():
  params = list(inspect.signature(nnx.pytreelib.PytreeState).parameters)
  assert params == ["initializing", "is_setup"]
  state = nnx.pytreelib.PytreeState(True, True)
  assert state.initializing and state.is_setup
  assert repr(state).startswith("PytreeState(\n  trace_state=TraceState(")

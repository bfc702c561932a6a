"""``nnx.TrainState``: the seeds' functional training state over optax.

Built on ``nnx.legacy.Pytree``."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import optax

from ..graph.state._state import State
from ..graph.walk._graphdef import ApplyCaller, GraphDef
from ._pytree import Pytree, TreeNode

M = TypeVar("M")


class TrainState(Pytree, Generic[M]):
  """Parameters, optimizer state and step count of a model, as one immutable pytree.

  Children (traced by ``jax.jit``): ``params``, ``opt_state``, ``step`` and any
  extra keyword field that is a node (a State, an array, a Variable). Static:
  ``graphdef`` (alias ``moduledef``), ``tx`` and other extra fields. Follows the
  seeds' ``nnx.TrainState`` (and flax's ``train_state.TrainState``).

  Args:
    graphdef: the model's GraphDef, from ``nnx.split`` or ``Module.partition``.
    params: the trainable State.
    tx: an optax ``GradientTransformation``.
    step: the initial step count (stored as an ``int32`` array).
    **kwargs: extra fields, e.g. ``batch_stats=state`` (a State is a child).

  Raises:
    ImmutableError: on attribute assignment (use ``replace``).

  Example:
    >>> import jax, jax.numpy as jnp, optax, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> graphdef, params = nnx.split(model, nnx.Param)
    >>> state = nnx.TrainState(graphdef, params=params, tx=optax.sgd(0.1))
    >>> @jax.jit
    ... def train_step(state, x, y):
    ...   def loss_fn(params):
    ...     y_pred, _ = state.apply(params)(x)
    ...     return jnp.mean((y_pred - y) ** 2)
    ...   return state.apply_gradients(grads=jax.grad(loss_fn)(state.params))
    >>> state = train_step(state, jnp.ones((4, 2)), jnp.zeros((4, 1)))
    >>> int(state.step)
    1
  """

  def __init__(
    self,
    graphdef: GraphDef,
    *,
    params: State,
    tx: optax.GradientTransformation,
    step: Any = 0,
    **kwargs: Any,
  ):
    self.graphdef = graphdef
    # Reading a TreeNode attribute of a Pytree returns its value (a State, an array).
    self.params: State = TreeNode(params)  # type: ignore[assignment]
    self.tx = tx
    self.opt_state: Any = TreeNode(tx.init(params))
    self.step: jax.Array = TreeNode(jnp.asarray(step, dtype=jnp.int32))  # type: ignore[assignment]
    for name, value in kwargs.items():
      setattr(self, name, value)

  @classmethod
  def create(
    cls,
    graphdef: GraphDef,
    *,
    params: State,
    tx: optax.GradientTransformation,
    step: Any = 0,
    **kwargs: Any,
  ) -> TrainState[M]:
    """flax's constructor spelling: ``TrainState.create(graphdef, params=..., tx=...)``.

    Same arguments as the class itself; subclasses that declare extra fields
    (``batch_stats: nnx.State``) receive them through ``**kwargs``.

    Raises:
      ImmutableError: never for valid fields; fields are set during construction.

    Example:
      >>> import optax, nnx_eqx as nnx
      >>> graphdef, params = nnx.split(nnx.Linear(2, 1, rngs=nnx.Rngs(0)), nnx.Param)
      >>> state = nnx.TrainState.create(graphdef, params=params, tx=optax.sgd(0.1))
      >>> int(state.step)
      0
    """
    return cls(graphdef, params=params, tx=tx, step=step, **kwargs)

  @property
  def moduledef(self) -> GraphDef:
    """Seed-era name of :attr:`graphdef`."""
    return self.graphdef

  def apply(self, *states: State | str) -> ApplyCaller:
    """Calls the model functionally (``GraphDef.apply``) on the given States,
    or on fields named by strings (default: ``params``):
    ``state.apply("params", "batch_stats")(x)``
    returns ``(out, (new_state, graphdef))``.

    Raises:
      AttributeError: if a string names no field.
    """
    resolved = tuple(getattr(self, s) if isinstance(s, str) else s for s in states)
    return self.graphdef.as_seed().apply(*(resolved or (self.params,)))

  def apply_gradients(self, grads: State, **kwargs: Any) -> TrainState[M]:
    """One optimizer update: returns a new TrainState with updated ``params``,
    ``opt_state``, ``step + 1``, and any other fields given in ``kwargs``.

    Raises:
      UnknownFieldError: if ``kwargs`` names a field this state lacks.
    """
    updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
    params = optax.apply_updates(self.params, updates)
    return self.replace(params=params, opt_state=opt_state, step=self.step + 1, **kwargs)

"""``nnx.remat``: ``jax.checkpoint`` lifted over Modules (as flax.nnx.remat)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax

from ..lifting import _lift
from ..lifting._dispatch import Dispatcher, Lifted, join_rest, positional
from ..lifting._seed_hooks import SEED_HOOKS


class RematWrapped(Lifted):
  """The callable returned by :func:`remat`."""

  name = "nnx.remat"

  def __init__(self, fn, prevent_cse: bool, static_argnums: tuple, policy):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.prevent_cse = prevent_cse
    self.static_argnums = static_argnums
    self.policy = policy
    self._dispatch = Dispatcher(self._pure)

  def __call__(self, *args, **kwargs):
    args = positional(self.fn, args, kwargs, self.name)
    statics: tuple = ()
    if self.static_argnums:
      pos = sorted(i % len(args) for i in self.static_argnums)
      statics = tuple((i, args[i]) for i in pos)
      args = tuple(a for i, a in enumerate(args) if i not in pos)
    split, w, leaves, rest = _lift.prepare(args)
    key = (w.graphdef if w is not None else None, split, statics)
    out, updates = self._dispatch(key, leaves, rest)
    return _lift.apply_updates(w, updates, out)

  def _pure(self, key, leaves, dyn):
    (graphdef, split, statics), spec = key

    def call(*args):
      args = list(args)
      for i, v in statics:
        args.insert(i, v)
      return self.fn(*args)

    def inner(leaves, dyn):
      return _lift.call_inner(call, graphdef, split, leaves, join_rest(spec, dyn))

    ckpt = jax.checkpoint(inner, prevent_cse=self.prevent_cse, policy=self.policy)
    return ckpt(leaves, dyn)


def remat(
  f: Callable | None = None,
  *,
  prevent_cse: bool = True,
  static_argnums: int | Sequence[int] = (),
  policy: Callable[..., bool] | None = None,
  is_init: bool | None = None,
):
  """``jax.checkpoint`` lifted over Modules (as flax.nnx.remat).

  The function's activations are recomputed in the backward pass instead of
  stored. Module arguments are split into their leaves, which enter the
  checkpoint as ordinary inputs; only leaves the function changes come out
  (so parameters are never duplicated), and those updates are written back.
  The program is the one ``jax.checkpoint`` gives for the same function
  written over the split state.

  Args:
    f: the function; may decorate methods (``__call__``). Decorating
      ``__init__`` (or ``is_init=True``) returns it unchanged (seed behaviour).
    prevent_cse, policy: as ``jax.checkpoint`` (e.g.
      ``jax.checkpoint_policies.dots_saveable``).
    static_argnums: positional arguments that are static (hashable) values.
    is_init: force the seed-era ``__init__`` behaviour on or off.

  Returns:
    The rematerialised function. Outside a trace it compiles once per graph
    and shapes (a second call does not retrace).

  Raises:
    Whatever the function raises; the caller's Modules are then unchanged.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> @nnx.remat
    ... def apply(m, x):
    ...   return jnp.sin(m(x)).sum()
    >>> grads = nnx.grad(apply)(model, jnp.ones((1, 2)))
    >>> grads.kernel.value.shape
    (2, 2)
  """
  if isinstance(static_argnums, int):
    static_argnums = (static_argnums,)

  def wrap(fn: Callable):
    _lift.reject_bound_method(fn, "nnx.remat")
    if isinstance(fn, type):
      return SEED_HOOKS["remat"](
        fn, prevent_cse=prevent_cse, static_argnums=static_argnums, policy=policy
      )
    init = is_init if is_init is not None else getattr(fn, "__name__", "") == "__init__"
    if init:
      return fn
    return RematWrapped(fn, prevent_cse, tuple(static_argnums), policy)

  return wrap if f is None else wrap(f)

"""``nnx.jit``: ``jax.jit`` lifted over Modules (as flax.nnx.jit)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax

from . import _lift


class JitWrapped:
  """The callable returned by :func:`jit`; binds as a method when decorating one.

  Each distinct static key (GraphDef, argument layout, static arguments) gets
  its own ``jax.jit`` of the pure function with the key bound, so a call passes
  only arrays: the leaf values and the other arguments. Unchanged-structure
  updates come back as a plain ``{leaf index: value}`` dict, which JAX builds
  without calling back into Python.
  """

  def __init__(
    self,
    fn: Callable,
    static_argnums: Sequence[int],
    static_argnames: Sequence[str],
    donate_argnums: Sequence[int],
    jit_kwargs: dict,
  ):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.static_argnums = tuple(sorted(static_argnums))
    self.static_argnames = frozenset(static_argnames)
    self.donate_argnums = frozenset(donate_argnums)
    self._jit_kwargs = jit_kwargs
    self._compiled: dict = {}  # (key, donate) -> jax.jit of the pure function
    self._plain = not (self.static_argnums or self.static_argnames or self.donate_argnums)
    self._last = _lift.LastCall()

  def _pure(self, key, leaves, *rest):
    graphdef, split, static_vals, n_args, kw_names = key

    def call(*args):
      args = list(args)
      for i, v in zip(self.static_argnums, static_vals[0]):
        args.insert(i, v)
      kwargs = dict(args.pop()) if kw_names is not None else {}
      kwargs.update(static_vals[1])
      return self.fn(*args, **kwargs)

    out, updates = _lift.call_inner(call, graphdef, split, leaves, rest)
    if updates.structure is None:
      return out, dict(zip(updates.index, updates.values))
    return out, updates

  def _jitted(self, key: tuple, donate: bool = False) -> Callable:
    """The ``jax.jit`` for ``key``: ``(leaves, *rest) -> (out, updates)``."""
    fn = self._compiled.get((key, donate))
    if fn is None:
      if len(self._compiled) >= _MAX_KEYS:  # drop the oldest, as jax.jit's own cache does
        del self._compiled[next(iter(self._compiled))]
      kwargs = dict(self._jit_kwargs, donate_argnums=0) if donate else self._jit_kwargs
      fn = self._compiled[key, donate] = jax.jit(functools.partial(self._pure, key), **kwargs)
    return fn

  def __get__(self, obj, objtype=None):
    if obj is None:
      return self
    return functools.partial(self, obj)

  def _split_static(self, args: tuple, kwargs: dict):
    if self.static_argnums:
      static_pos = [i if i >= 0 else len(args) + i for i in self.static_argnums]
      static = tuple(args[i] for i in static_pos)
      args = tuple(a for i, a in enumerate(args) if i not in static_pos)
    else:
      static = ()
    skw: tuple = ()
    if self.static_argnames and kwargs:
      skw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
      kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
    return args, kwargs, (static, skw)

  def _prepare(self, args: tuple, kwargs: dict):
    """``(walk, static key, leaves, rest, argsplit)`` for a call."""
    if self.static_argnums or self.static_argnames:
      args, kwargs, static_vals = self._split_static(args, kwargs)
    else:
      static_vals = _NO_STATIC
    kw_names = None
    if kwargs:
      kw_names = tuple(kwargs)
      args = args + (kwargs,)
    split, w, leaves, rest = _lift.prepare(args)
    key = (w.graphdef if w is not None else None, split, static_vals, len(args), kw_names)
    return w, key, leaves, rest, split

  def __call__(self, *args, **kwargs):
    if self._plain and not kwargs:  # the common case, kept short: it runs on every step
      _, w, leaves, rest, fn = self._last.prepare(args, self._plain_jitted)
    else:
      w, key, leaves, rest, split = self._prepare(args, kwargs)
      donate = bool(self.donate_argnums) and any(
        i in self.donate_argnums for i in split.arg_of_node
      )
      fn = self._jitted(key, donate)
    out, updates = fn(leaves, *rest)
    if type(updates) is dict:  # values only
      if updates:
        w.set_leaves(updates.keys(), updates.values())  # type: ignore[union-attr]
      return out
    return _lift.apply_updates(w, updates, out)

  def _plain_jitted(self, args: tuple, split, w) -> Callable:
    """The ``jax.jit`` for a call without static, keyword or donated arguments."""
    return self._jitted((w.graphdef if w is not None else None, split, _NO_STATIC, len(args), None))

  def lower(self, *args, **kwargs):
    """Lowers for the given arguments (``jax.stages.Lowered``), for inspecting HLO."""
    _, key, leaves, rest, _ = self._prepare(args, kwargs)
    return self._jitted(key).lower(leaves, *rest)


_MAX_KEYS = 4096
_NO_STATIC: tuple = ((), ())


def jit(
  fn: Callable | None = None,
  *,
  static_argnums: int | Sequence[int] = (),
  static_argnames: str | Sequence[str] = (),
  donate_argnums: int | Sequence[int] = (),
  **jit_kwargs: Any,
):
  """``jax.jit`` lifted over Modules: state updates inside propagate out.

  Module (and Variable) arguments — also inside tuples, lists and dicts — are
  split into a cached GraphDef (static) and their leaf values (traced);
  inside, fresh modules are merged and passed to ``fn``; afterwards only the
  leaves that changed are returned and written back into the caller's
  objects. Structural changes (new attributes, modules returned) propagate
  too. If ``fn`` raises, the caller's modules are unchanged. A second call
  with the same graph and shapes does not retrace, and the graph is not
  re-walked. Follows flax.nnx.jit.

  Args:
    fn: the function; may also decorate methods.
    static_argnums: positional arguments treated as static (hashable).
    static_argnames: keyword arguments treated as static.
    donate_argnums: arguments whose Module leaves are donated to the call.
    **jit_kwargs: passed to ``jax.jit`` (e.g. ``inline``, ``keep_unused``).

  Returns:
    The wrapped function (``.lower(*args)`` gives ``jax.stages.Lowered``).

  Raises:
    Whatever ``fn`` raises; the caller's modules are then left unchanged.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Counter(nnx.Module):
    ...   def __init__(self):
    ...     self.n = nnx.Variable(jnp.array(0))
    >>> @nnx.jit
    ... def bump(c):
    ...   c.n += 1
    >>> c = Counter(); bump(c); bump(c)
    >>> int(c.n.value)
    2
  """
  if isinstance(static_argnums, int):
    static_argnums = (static_argnums,)
  if isinstance(static_argnames, str):
    static_argnames = (static_argnames,)
  if isinstance(donate_argnums, int):
    donate_argnums = (donate_argnums,)

  def wrap(f: Callable) -> JitWrapped:
    _lift.reject_bound_method(f, "nnx.jit")
    return JitWrapped(f, static_argnums, static_argnames, donate_argnums, jit_kwargs)

  return wrap if fn is None else wrap(fn)

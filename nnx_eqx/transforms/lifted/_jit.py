"""``nnx.jit``: ``jax.jit`` lifted over Modules (as flax.nnx.jit)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ...graph._errors import NnxError
from ..axes import _shardings
from ..lifting import _lift, _ref_outputs
from ..lifting._foreign_args import explain_argument_error


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
    in_shardings: Any = None,
    donate_argnames: Sequence[str] = (),
    graph_updates: bool = True,
  ):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.values_only = not graph_updates
    self.static_argnums = tuple(sorted(static_argnums))
    self.static_argnames = frozenset(static_argnames)
    self.donate_argnums = frozenset(donate_argnums)
    self.donate_argnames = frozenset(donate_argnames)
    self._jit_kwargs = jit_kwargs
    self._compiled: dict = {}  # (key, donate) -> jax.jit of the pure function
    self.in_shardings = in_shardings
    self._leaf_shardings: dict = {}  # key -> sharding per leaf (with in_shardings)
    self._plain = not (
      self.static_argnums
      or self.static_argnames
      or self.donate_argnums
      or self.donate_argnames
      or in_shardings is not None
    )
    self._last = _lift.LastCall()
    self._ref_outputs = False  # set once a traced call returned jax.Refs

  def _pure(self, key, leaves, *rest, donate: bool = False):
    graphdef, split, static_vals, n_args, kw_names = key

    def call(*args):
      args = list(args)
      kwargs = dict(args.pop()) if kw_names is not None else {}
      for i, v in static_vals[0]:
        args.insert(i, v)
      kwargs.update(static_vals[1])
      return self.fn(*args, **kwargs)

    out, updates = _lift.call_inner(
      call, graphdef, split, leaves, rest, values_only=self.values_only, name="jit", share_out=True
    )
    if updates.structure is None:
      index, values = updates.index, updates.values
      if donate:  # donated buffers are gone: every leaf comes back, changed or not
        changed = dict(zip(index, values))
        index = tuple(range(len(leaves)))
        values = [changed.get(i, leaves[i]) for i in index]
      if self.in_shardings is not None:  # updated state keeps its input sharding
        leaf_sh = self._leaf_shardings[key]
        values = _shardings.constrain(values, [leaf_sh[i] for i in index])
      updates = dict(zip(index, values))
    elif self.in_shardings is not None:  # state at an input path keeps that input's sharding
      updates.values = _shardings.constrain_by_path(
        updates.values, updates.structure[0].paths, graphdef.paths, self._leaf_shardings[key]
      )
    result, has_refs = _ref_outputs.lower_refs((out, updates), (leaves, rest))
    if has_refs:
      self._ref_outputs = True
    return result

  def _jitted(self, key: tuple, donate: bool = False, w=None) -> Any:
    """The ``jax.jit`` for ``key``: ``(leaves, *rest) -> (out, updates)``."""
    fn = self._compiled.get((key, donate))
    if fn is None:
      if len(self._compiled) >= _MAX_KEYS:  # drop the oldest, as jax.jit's own cache does
        oldest = next(iter(self._compiled))
        del self._compiled[oldest]
        self._leaf_shardings.pop(oldest[0], None)
      kwargs = dict(self._jit_kwargs, donate_argnums=0) if donate else dict(self._jit_kwargs)
      if self.in_shardings is not None:
        kwargs["in_shardings"] = self._resolve_shardings(key, w)
      pure = functools.partial(self._pure, key, donate=donate)
      fn = self._compiled[key, donate] = jax.jit(pure, **kwargs)
    return fn

  def _resolve_shardings(self, key: tuple, w) -> tuple:
    """``in_shardings`` for ``(leaves, *rest)`` under ``key``; keeps the leaves' part."""
    _, split, _, n_args, kw_names = key
    n_pos = n_args - (kw_names is not None)
    specs = _shardings.per_argument(self.in_shardings, n_pos) + [None] * (n_args - n_pos)
    leaf_sh, rest_sh = _shardings.resolve(specs, split, w, n_args)
    self._leaf_shardings[key] = leaf_sh
    return (leaf_sh, *rest_sh)

  def __get__(self, obj, objtype=None):
    if obj is None:
      return self
    return functools.partial(self, obj)

  def _split_static(self, args: tuple, kwargs: dict):
    if self.static_argnums:
      n = len(args)
      static_pos = sorted(i if i >= 0 else n + i for i in self.static_argnums)
      static_pos = [i for i in static_pos if i < n]  # others may come as keywords
      static = tuple((i, args[i]) for i in static_pos)
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
      if self.donate_argnames and kwargs:
        donate = donate or any(k in self.donate_argnames for k in kwargs)
      fn = self._jitted(key, donate, w)
      if self.in_shardings is not None and w is not None:
        leaf_sh = self._leaf_shardings.get(key)
        if leaf_sh is None:
          leaf_sh = self._resolve_shardings(key, w)[0]
        leaves = _shardings.place(w, leaves, leaf_sh)
    try:
      out, updates = fn(leaves, *rest)
    except TypeError as e:  # (no cost unless raised)
      explain_argument_error(args, "nnx.jit", e)
      raise
    if self._ref_outputs:
      out, updates = _ref_outputs.raise_refs((out, updates), (leaves, rest))
    if type(updates) is dict:  # values only
      if updates:
        w.set_leaves(updates.keys(), updates.values())  # type: ignore[union-attr]
      return out
    return _lift.apply_updates(w, updates, out)

  def _plain_jitted(self, args: tuple, split, w) -> Callable:
    """The ``jax.jit`` for a call without static, keyword or donated arguments."""
    return self._jitted((w.graphdef if w is not None else None, split, _NO_STATIC, len(args), None))

  def lower(self, *args, **kwargs) -> Lowered:
    """Lowers for the given arguments, for inspecting HLO or compiling ahead of time.

    The result behaves as ``jax.stages.Lowered`` (``as_text()``, ...); its
    ``compile()`` gives a callable taking the same arguments as this function,
    which writes Module updates back as a call of this function does.
    """
    w, key, leaves, rest, _ = self._prepare(args, kwargs)
    return Lowered(self, key, self._jitted(key, False, w).lower(leaves, *rest))


class Lowered:
  """A lowered lifted-jit call: ``jax.stages.Lowered`` plus :meth:`compile`."""

  def __init__(self, wrapped: JitWrapped, key: tuple, lowered: Any):
    self._wrapped, self._key, self._lowered = wrapped, key, lowered

  def __getattr__(self, name: str) -> Any:
    return getattr(self._lowered, name)

  def compile(self, *args, **kwargs) -> Compiled:
    """Compiles (arguments as ``jax.stages.Lowered.compile``)."""
    return Compiled(self._wrapped, self._key, self._lowered.compile(*args, **kwargs))


class Compiled:
  """A compiled lifted-jit call; calling it runs the executable on new arguments
  of the same structure and writes Module updates back."""

  def __init__(self, wrapped: JitWrapped, key: tuple, compiled: Any):
    self._wrapped, self._key, self._compiled = wrapped, key, compiled

  def __getattr__(self, name: str) -> Any:
    return getattr(self._compiled, name)

  def __call__(self, *args, **kwargs):
    w, key, leaves, rest, _ = self._wrapped._prepare(args, kwargs)
    if key != self._key:
      raise CompiledStructureError(
        "nnx.jit: the arguments differ in graph structure, layout or static values from"
        " those this executable was compiled for. Fix: lower and compile again for them,"
        " or call the jitted function itself."
      )
    out, updates = self._compiled(leaves, *rest)
    if self._wrapped._ref_outputs:
      out, updates = _ref_outputs.raise_refs((out, updates), (leaves, rest))
    if type(updates) is dict:
      if updates:
        w.set_leaves(updates.keys(), updates.values())  # type: ignore[union-attr]
      return out
    return _lift.apply_updates(w, updates, out)


class CompiledStructureError(NnxError, TypeError):
  """A compiled lifted-jit call got arguments of another structure than it was
  compiled for."""


_MAX_KEYS = 4096
_NO_STATIC: tuple = ((), ())


def jit(
  fn: Callable | None = None,
  *,
  static_argnums: int | Sequence[int] | None = (),
  static_argnames: str | Sequence[str] | None = (),
  donate_argnums: int | Sequence[int] | None = (),
  in_shardings: Any = None,
  out_shardings: Any = None,
  graph_updates: bool = True,
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

  Any other argument is a pytree of data, as ``jax.jit`` takes it: an Equinox
  model (an ``eqx.Module``) too, as flax.nnx.jit takes it, so an ``eqx.nn.Linear``
  passed in is traced as its arrays (and not lifted: it is no NNX module, its
  fields are never written back). One holding leaves JAX cannot trace (the
  activation function of ``eqx.nn.MLP``) is refused with an error naming the
  argument and the leaf; convert it with ``nnx.from_eqx`` to use it as a module,
  or call it under ``eqx.filter_jit``.

  Args:
    fn: the function; may also decorate methods.
    static_argnums: positional arguments treated as static (hashable).
    static_argnames: keyword arguments treated as static.
    donate_argnums: arguments whose Module leaves are donated to the call.
      (``donate_argnames=`` names them instead.) Donated state that the call
      leaves unchanged is returned too, so the caller's Variables stay valid.
    in_shardings: one entry per (non-static) positional argument, or one
      value for all: a ``jax.sharding.Sharding`` (or ``PartitionSpec`` under
      a mesh, or None). For a Module argument the entry applies to all its
      state, or per filter with :class:`StateSharding`; the Module's state
      is moved to those shardings (also in the caller's Variables).
    out_shardings: as ``jax.jit``, a prefix of the output.
    graph_updates: False (flax's ``graph_updates=False``, also implied by
      ``graph=False``) writes back only new values of the Variables passed in:
      Variables or Modules swapped, added or removed inside are not propagated.
    **jit_kwargs: passed to ``jax.jit`` (e.g. ``inline``, ``keep_unused``).

  Returns:
    The wrapped function; ``.lower(*args)`` gives a ``jax.stages.Lowered``
    whose ``compile()`` is callable with the same arguments.

  Raises:
    BoundMethodError: ``fn`` is a Module's bound method.
    WrongLibraryError: an ``eqx.Module`` argument holds a leaf JAX cannot trace.
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
  static_argnums = () if static_argnums is None else static_argnums
  static_argnames = () if static_argnames is None else static_argnames
  donate_argnums = () if donate_argnums is None else donate_argnums
  if isinstance(static_argnums, int):
    static_argnums = (static_argnums,)
  if isinstance(static_argnames, str):
    static_argnames = (static_argnames,)
  if isinstance(donate_argnums, int):
    donate_argnums = (donate_argnums,)
  donate_argnames = jit_kwargs.pop("donate_argnames", None) or ()
  if isinstance(donate_argnames, str):
    donate_argnames = (donate_argnames,)

  # Shardings of Module outputs become constraints inside the trace (jax.jit
  # cannot take them); others go to jax.jit (None: the updates).
  by_constraint = out_shardings is not None and _shardings.has_node_specs(out_shardings)
  if out_shardings is not None and not by_constraint:
    jit_kwargs = dict(jit_kwargs, out_shardings=(out_shardings, None))

  def wrap(f: Callable) -> JitWrapped:
    _lift.reject_bound_method(f, "nnx.jit")
    argnums = tuple(static_argnums) + _positions_of(f, static_argnames, static_argnums)
    g = f
    if by_constraint:

      @functools.wraps(f)
      def g(*args, **kwargs):
        return _shardings.constrain_outputs(f(*args, **kwargs), out_shardings)

    donated = tuple(donate_argnums) + _positions_of(f, donate_argnames, donate_argnums)
    return JitWrapped(
      g,
      argnums,
      static_argnames,
      donated,
      jit_kwargs,
      in_shardings,
      donate_argnames,
      graph_updates,
    )

  return wrap if fn is None else wrap(fn)


def _positions_of(f: Callable, names: Sequence[str], taken: Sequence[int]) -> tuple:
  """Positions of the parameters ``names`` of ``f`` (as ``jax.jit`` infers
  ``static_argnums`` from ``static_argnames``), other than those in ``taken``."""
  if not names:
    return ()
  try:
    params = list(inspect.signature(f).parameters.values())
  except (TypeError, ValueError):
    return ()
  kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
  return tuple(
    i for i, p in enumerate(params) if p.kind in kinds and p.name in names and i not in taken
  )


class JitPartial:
  """The callable returned by :func:`jit_partial`: the jitted function with its
  leading arguments bound."""

  def __init__(self, jitted: JitWrapped, partial_args: tuple):
    functools.update_wrapper(self, jitted.fn)
    self.jitted, self.partial_args = jitted, partial_args

  def __call__(self, *args, **kwargs):
    return self.jitted(*self.partial_args, *args, **kwargs)

  def lower(self, *args, **kwargs) -> Lowered:
    """As :meth:`JitWrapped.lower`; the compiled call takes the remaining arguments."""
    return _PartialLowered(self, self.jitted.lower(*self.partial_args, *args, **kwargs))


class _PartialLowered(Lowered):
  def __init__(self, partial: JitPartial, lowered: Lowered):
    super().__init__(lowered._wrapped, lowered._key, lowered._lowered)
    self._partial_args = partial.partial_args

  def compile(self, *args, **kwargs) -> Compiled:
    compiled = super().compile(*args, **kwargs)
    return _PartialCompiled(compiled, self._partial_args)


class _PartialCompiled(Compiled):
  def __init__(self, compiled: Compiled, partial_args: tuple):
    super().__init__(compiled._wrapped, compiled._key, compiled._compiled)
    self._partial_args = partial_args

  def __call__(self, *args, **kwargs):
    return super().__call__(*self._partial_args, *args, **kwargs)


def jit_partial(fun: Callable, *partial_args: Any, **jit_options: Any) -> JitPartial:
  """:func:`jit` of ``fun`` with its first arguments bound (as flax.nnx.jit_partial).

  The bound arguments (usually the model and optimizer of a train step) are
  passed on every call as :func:`jit` passes them, so their Variables may
  change between calls without a retrace, and updates made inside are
  written back to them.

  Args:
    fun: the function; ``partial_args`` fill its first positional parameters.
    *partial_args: Modules, Variables or other arguments to bind.
    **jit_options: as :func:`jit`; a tuple ``in_shardings`` starts with the
      entries of the bound arguments.

  Returns:
    A callable taking the remaining arguments (also ``.lower(...)``, whose
    ``compile()`` takes them too).

  Raises:
    BoundMethodError: ``fun`` is a Module's bound method.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> forward = nnx.jit_partial(lambda m, x: m(x), model)
    >>> forward(jnp.ones((4, 2))).shape
    (4, 3)
  """
  return JitPartial(jit(fun, **jit_options), partial_args)

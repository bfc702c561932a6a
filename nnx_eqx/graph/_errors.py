"""The exception hierarchy of nnx_eqx.

Every error the library raises on bad input derives from :class:`NnxError`, so
``except nnx.NnxError`` catches all of them. Each class also derives from the
builtin exception a user would expect (``TypeError``, ``ValueError``,
``KeyError``) so existing handlers keep working.

Messages follow one rule: name the offending path or argument, say what was
expected and what was found, and say how to fix it.
"""

from __future__ import annotations

import sys

import equinox


class NnxError(Exception):
  """Base class of every exception raised by nnx_eqx."""


class TraceContextError(NnxError, RuntimeError):
  """A Module, Variable or Rngs was mutated from a JAX trace other than the one
  that created it (e.g. a module created outside ``jax.jit`` mutated inside it).

  Fix: use the lifted transforms (``nnx.jit``, ``nnx.grad``, …), which split the
  module on the way in and write updates back on the way out, or pass the state
  explicitly with ``nnx.split``/``nnx.merge``.
  """


class LostUpdateError(NnxError, RuntimeError):
  """A state update made inside a JAX transformation was dropped.

  ``jax.jit``, ``jax.grad``, ``jax.vmap``, ``jax.checkpoint`` (and Equinox's
  ``filter_*`` wrappers) run a Module as a copy rebuilt from its pytree; a layer
  that updates state (``BatchNorm`` statistics, an RNG stream's count) updates the
  copy, and the update is lost unless the copy (or its state) is returned; the
  module keeps the values from before the call. Using that module again --
  reading or writing such a value, calling the module, flattening it, a graph
  walk -- raises this error, naming each Variable and where it was written.
  Other modules are not concerned, and an update dropped on an object nobody
  uses again (a temporary ``rngs.fork()``) raises nothing. A correct program
  never sees it: staleness belongs to the Variable that was traced, not to its
  array (a clone, an ``nnx.update`` target or a checkpoint restored from the same
  arrays is not concerned), writing a new value to that Variable ends it, each
  thread's traces are watched apart, a transformation that raised leaves nothing
  stale (it returned nothing: the module holds what it held), and the lifted
  transforms (``nnx.jit``, ``nnx.vmap``, ``nnx.scan``, ...) carry every update.
  (flax.nnx 0.12 drops such updates without a word.)

  What is watched: every *state* Variable -- any Variable type but ``Param``
  and its subclasses: ``BatchStat``, an ``nnx.Rngs`` stream's count, ``Cache``,
  ``Intermediate``, a plain ``nnx.Variable``, your own subclasses, and an
  ``nnx.Optimizer``'s step count and moments (so a dropped ``Optimizer.update``
  is reported) -- written inside ``jax.jit``, ``jax.grad``/``jax.value_and_grad``,
  ``jax.vmap``, ``jax.checkpoint``, nested in one another or under ``lax``
  control flow within them, and Equinox's ``filter_jit``, ``filter_grad``,
  ``filter_value_and_grad``, ``filter_vmap``, ``filter_checkpoint``.

  What is not reported, and why: a ``Param`` written inside a plain
  transformation and dropped (forward passes read Params and optimizers update
  them; not linking Params keeps an Equinox-style step over a model of Params
  at its former cost); writes under ``jax.eval_shape``/``eqx.filter_eval_shape``
  (shape evaluation discards every value); a compiled program runs without a
  trace to watch -- after a drop found on a module still held every program
  traces again once, but after a drop on a temporary a later call with another
  module of that structure drops silently. One case is reported more widely: a
  Variable rebuilt by a pytree map that keeps the very arrays
  (``jax.tree.map(lambda a: a, m)``) cannot be told from the copy Equinox's
  ``partition`` makes to pass ``m`` to ``filter_jit``, so its drop is reported on
  ``m`` as well while ``m`` holds those arrays. (Details:
  ``nnx_eqx/graph/tracing/_lost_updates.py``.)

  Fix: use ``nnx.jit``/``nnx.value_and_grad``; or return
  ``nnx.state(model, nnx.Not(nnx.Param))`` and ``nnx.update`` the module with it;
  or store the state in ``jax.Ref``s with ``nnx.with_vars(model, ref=True, ...)``.
  To recover the module, write whole values over it -- ``nnx.update(model,
  saved)`` with values kept apart from its Variables (``nnx.state(model)
  .to_pure_dict()`` taken before: a State from ``nnx.state``/``nnx.split`` holds
  the module's own Variables, hence the stale values), or
  ``nnx.checkpoint.restore(path, model)``: that is a write, not a use, and ends
  the marks of the Variables it covers (the others stay marked) -- or build it
  again with ``nnx.merge(nnx.graphdef(model), saved)`` (``nnx.graphdef`` reads
  no values: it is given for the stale module); ``nnx.clear_lost_updates(model)``
  accepts the values from before the dropped call instead.
  ``nnx.set_lost_update_watch(False)`` turns the watch off for the process
  (flax.nnx's behaviour, at the flatten cost from before the watch).

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> bn = nnx.BatchNorm(2, rngs=nnx.Rngs(0))
    >>> forward = eqx.filter_jit(lambda m: m(jnp.ones((3, 2))))
    >>> y = forward(bn)            # the statistics of a copy move, and the copy is dropped
    >>> try:
    ...   forward(bn)
    ... except nnx.LostUpdateError as e:
    ...   print(str(e).splitlines()[1])
      - BatchStat of shape (2,) at `BatchNorm.mean` (written from ...)
    >>> nnx.clear_lost_updates(bn)  # go on from the statistics before that call
    >>> bn.mean[...]
    Array([0., 0.], dtype=float32)
  """


class FilterError(NnxError, ValueError):
  """Filters given to ``split``/``partition`` do not cover every leaf."""


class UnknownFilterError(NnxError, TypeError):
  """An object that is not a filter was used as a filter."""


class GraphStructureError(NnxError, ValueError):
  """A State does not fit a GraphDef (missing or extra paths) or a graph
  cannot be walked (e.g. an unsupported object in a node position)."""


class PytreeDepthError(GraphStructureError, RecursionError):
  """A Module graph nests deeper than JAX's pytree functions can go.

  ``jax.tree`` functions (and so ``jax.jit`` over a module, ``eqx.filter_jit``,
  ``eqx.tree_at``) recurse once per level of a nested pytree and overflow near
  1,000 levels, as for an Equinox model; this is raised before they start.

  Fix: use the graph API, which walks any depth: ``nnx.split``/``nnx.merge``,
  ``nnx.state``, and the lifted transforms (``nnx.jit``, ``nnx.grad``, ...).
  """


class SharedReferenceError(GraphStructureError):
  """A graph passed in tree mode (``graph=False`` or ``nnx.set_graph_mode(False)``)
  holds the same Variable or Module twice, or a reference cycle: plain pytrees
  cannot express either. The message names both paths.

  Fix: use graph mode (``graph=True``), or give each path its own object.
  """


class StateMismatchError(GraphStructureError, KeyError):
  """``merge``/``update`` received a State whose paths do not match the graph."""

  def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
    return str(self.args[0]) if self.args else ""


class ShapeDtypeError(NnxError, ValueError):
  """``update`` tried to replace an array with one of another shape or dtype."""


class ImmutableError(NnxError, AttributeError):
  """An attribute of an immutable object (e.g. a frozen ``nnx.Pytree``) was set."""


class UnknownAttributeError(NnxError, AttributeError, ValueError):
  """``set_attributes`` (or ``train``/``eval`` overrides) named an attribute that
  no selected module has."""


class UnknownStreamError(NnxError, AttributeError):
  """An Rngs stream was requested that does not exist and there is no
  ``default`` stream to fall back to."""


class UpdateContextError(NnxError, RuntimeError):
  """An ``update_context`` was used out of order (e.g. exited twice)."""


class GraphModeRequiredError(NnxError, ValueError):
  """A graph-mode-only API (e.g. ``cached_partial``) was called in tree mode or
  with ``graph_updates=False``."""


class JaxVersionError(NnxError, NotImplementedError):
  """A feature needs a JAX API that the installed jax version lacks (e.g. hijax
  Variables need JAX's hi-type primitives, which jax 0.10 and newer have). The
  message names the jax version needed and how to do without."""


class ImmutableVariableError(NnxError, RuntimeError):
  """A hijax Variable without ``ref=True`` was written inside a JAX
  transformation, where JAX traces it as an immutable value (as flax.nnx
  0.12.12's error of the same name).

  Fix: make it a ref-mode Variable (``ref=True``, or
  ``nnx.with_vars(node, ref=True)``), whose writes go into a ``jax.Ref`` that JAX
  carries out of transforms, or write it outside the transformation.
  """


class HijaxGradientError(NnxError, TypeError):
  """``jax.grad`` (or ``nnx.grad``) was asked to differentiate a hijax Variable
  on a jax whose hijax Variables keep their state in JAX's ``Box`` (jax <= 0.11.0,
  flax.nnx 0.12.8's semantics): a Box carries no gradient.

  Fix: differentiate ordinary copies, passing ``nnx.with_vars(state,
  hijax=False)`` to ``jax.grad`` (as flax.nnx 0.12.8 does), or install jax >=
  0.11.1, where hijax Variables are immutable hi-types that JAX differentiates.
  """


class ModeFlagError(NnxError, TypeError):
  """A tracer (or anything but a bool or None) was put where a Module's mode
  (``module.inference``) goes: a mode decides which program is traced, so it
  must be a Python bool."""


class WrongLibraryError(GraphStructureError, TypeError):
  """A module of another library (an ``eqx.Module``, a flax.nnx Module) was passed
  where nnx_eqx takes an NNX module or State: the graph API would find no Variables
  in it (an empty State, an optimizer over nothing). The message names the argument,
  its type and the fix, ``nnx.from_eqx(...)`` (or ``nnx.from_flax(...)``)."""


_EQX_MODULE = equinox.Module


def is_equinox_module(obj: object) -> bool:
  """Whether ``obj`` is an ``equinox.Module`` (recognised by the class itself)."""
  return _EQX_MODULE in type(obj).__mro__


def equinox_note(obj: object, arg: str, api: str) -> str:
  """The message of :class:`WrongLibraryError` for ``obj`` passed as ``arg`` to ``api``."""
  cls = type(obj)
  if arg.startswith("states"):
    expected, fix = "a State", "pass the State of an NNX module (`nnx.state(nnx.from_eqx(model))`)"
  else:
    expected, fix = "an NNX module", f"convert it with `nnx.from_eqx({arg})`"
  return (
    f"{api}: `{arg}` is {public_name(cls)}, an Equinox module, where {expected}"
    " was expected (the two libraries' modules are distinct: nnx_eqx sees no Variables in"
    f" an eqx.Module, so it would get an empty State and train nothing). Fix: {fix}"
    " (`nnx.from_eqx(model, state)` with its eqx.nn.State), or keep it in Equinox and use"
    " Equinox's API on it (eqx.partition, eqx.filter_jit, eqx.filter_grad)."
  )


_NO_NODE = object()


def _flax_module_type() -> type | None:
  """flax.nnx's ``Module`` class if flax.nnx was imported (flax is optional: an object
  of it exists only then), else None."""
  fnnx = sys.modules.get("flax.nnx")
  return getattr(fnnx, "Module", None) if fnnx is not None else None


def _refusal(obj: object, arg: str, api: str) -> str | None:
  mro = type(obj).__mro__
  if _EQX_MODULE in mro:
    return equinox_note(obj, arg, api)
  flax_module = _flax_module_type()
  if flax_module is not None and flax_module in mro:
    return f"{api}: `{arg}`: " + (flax_type_note(obj, "an nnx_eqx Module") or "")
  return None


def refuse_other_library(
  api: str, node: object = _NO_NODE, states: tuple = (), arg: str = "node"
) -> None:
  """Raises if the module argument ``node`` (named ``arg``) or one of the State
  arguments ``states`` of the public function ``api`` is a module of the other
  libraries: an ``eqx.Module``, or (``node`` only) a flax.nnx Module. The one check
  every entry point taking NNX modules or States makes, once, at its top; both are
  recognised by their classes. An ``eqx.Module`` held *inside* an NNX module is a
  pytree like any other, and is not refused.

  Raises:
    WrongLibraryError: naming the argument, the type and the fix (``nnx.from_eqx``,
      or ``nnx.from_flax``).

  Example:
    >>> import equinox as eqx, jax, nnx_eqx as nnx
    >>> from nnx_eqx.graph._errors import refuse_other_library
    >>> refuse_other_library("nnx.state", eqx.nn.Linear(2, 2, key=jax.random.key(0)))
    Traceback (most recent call last):
    ...
    nnx_eqx.WrongLibraryError: nnx.state: `node` is equinox.nn.Linear, an Equinox module, ...
  """
  if node is not _NO_NODE:
    note = _refusal(node, arg, api)
    if note is not None:
      raise WrongLibraryError(note)
  for i, s in enumerate(states):
    if _EQX_MODULE in type(s).__mro__:
      raise WrongLibraryError(equinox_note(s, f"states[{i}]", api))


def fmt_path(path: tuple) -> str:
  """``('a', 0, 'b')`` -> ``'a/0/b'`` (``'<root>'`` for the empty path)."""
  return "/".join(map(str, path)) or "<root>"


def is_private_module(module: str) -> bool:
  """Whether a dotted module path has a private part (one starting with ``_``)."""
  return any(part.startswith("_") for part in module.split("."))


def public_name(cls: type) -> str:
  """The path a user imports ``cls`` from: the shortest public module (no part
  starting with ``_``) on the way to ``cls.__module__`` that exports it under its
  name (``nnx_eqx.Linear``, ``nnx_eqx.bridge.Linear``, ``equinox.nn.Linear``),
  else ``cls.__module__`` and ``cls.__qualname__`` as they are.

  Example:
    >>> import equinox as eqx, nnx_eqx as nnx
    >>> from nnx_eqx.graph._errors import public_name
    >>> public_name(nnx.bridge.Linear), public_name(eqx.nn.Linear)
    ('nnx_eqx.bridge.Linear', 'equinox.nn.Linear')
  """
  module = str(getattr(cls, "__module__", None) or "")
  qualname = str(getattr(cls, "__qualname__", None) or getattr(cls, "__name__", repr(cls)))
  parts = module.split(".")
  for i in range(1, len(parts) + 1):
    prefix = ".".join(parts[:i])
    if is_private_module(prefix):
      break
    found = sys.modules.get(prefix)
    for attr in qualname.split("."):
      found = getattr(found, attr, None)
    if found is cls:
      return f"{prefix}.{qualname}"
  return f"{module}.{qualname}" if module else qualname


def type_names(*types: type) -> list[str]:
  """The names to print for ``types`` compared in one message: each short name
  (``__name__``), or, where two different types share one, the :func:`public_name`
  of each (``a Linear`` against ``a Linear`` would not say what differs).

  Example:
    >>> import nnx_eqx as nnx
    >>> from nnx_eqx.graph._errors import type_names
    >>> type_names(nnx.Linear, nnx.Conv)
    ['Linear', 'Conv']
    >>> type_names(nnx.Linear, nnx.bridge.Linear)
    ['nnx_eqx.Linear', 'nnx_eqx.bridge.Linear']
  """
  short = [getattr(t, "__name__", repr(t)) for t in types]
  clash = {
    s for s, t in zip(short, types) if any(s == s2 and t is not t2 for s2, t2 in zip(short, types))
  }
  return [public_name(t) if s in clash else s for s, t in zip(short, types)]


def flax_type_note(obj: object, ours: str) -> str | None:
  """For an error about ``obj`` where nnx_eqx's ``ours`` was expected: a sentence
  naming both types with their libraries and the converting call, when ``obj`` (or,
  for a class, ``obj`` itself) comes from flax; None otherwise."""
  cls = obj if isinstance(obj, type) else type(obj)
  if not any(c.__module__.split(".")[0] == "flax" for c in cls.__mro__):
    return None
  return (
    f"got {cls.__module__}.{cls.__qualname__}, a type of flax, where {ours} was"
    " expected (the two libraries' types are distinct). Fix: convert with"
    " `nnx.from_flax(...)` (it takes a flax Module, State or Variable), or use"
    " nnx_eqx's own type of the same name."
  )

"""The public conversions: ``nnx.from_eqx``, ``nnx.to_eqx``, ``nnx.to_eqx_with_state``."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

import equinox as eqx

from ...graph.api._functional import is_graph_node
from ...module._containers import Dict, List
from ...module._rngs import Rngs, RngStream
from ...nn._common import RngsTypeError
from .._errors import StatefulModuleError, UnconvertibleFieldError
from ..flax_nnx import from_flax, is_flax_object
from ..walk._context import FromEqxContext
from ..walk._eqx_state import finalize, fmt_path
from ..walk._to_eqx import ToEqxContext
from ._shared import tie_root


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
  """Pauses Python's cyclic garbage collector while a conversion allocates many
  objects (its passes over live objects would make large conversions superlinear)."""
  was_enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was_enabled:
      gc.enable()


def from_eqx(
  eqx_module: Any,
  state: Any = None,
  *,
  native: bool = False,
  rngs: Rngs | RngStream | None = None,
) -> Any:
  """Converts an Equinox module into an NNX module running the same program.

  Registered layers (``eqx.nn.Linear``, ``Conv1d/2d/3d``, ``Embedding``,
  ``LayerNorm``, ``RMSNorm``, ``BatchNorm``, ``Dropout``, ``MultiheadAttention``,
  ``GRUCell``, ``LSTMCell``, ``MLP``, ``Sequential``, ``Lambda``, ``Identity``,
  pooling, ``Shared``) become the ``nnx.bridge`` layers of the same names: NNX
  modules that keep Equinox's parameter layout (``weight`` of shape
  ``(out, in)``), calling convention (unbatched, channels-first inputs) and
  equations, wherever the layer sits. The result's forward pass and gradients
  are the source's bit for bit (the same StableHLO). Any other ``eqx.Module``
  becomes an :class:`nnx.bridge.EqxModule` with the same fields and methods.
  Inexact arrays become ``Param``, other arrays ``Variable``; values held in
  ``eqx.nn.State`` become ``BatchStat`` (BatchNorm) or
  :class:`nnx.bridge.EqxState` Variables; nodes tied by ``eqx.nn.Shared`` become
  one shared Variable. ``nnx.to_eqx`` (or ``to_eqx_with_state``) inverts it
  exactly.

  Models of any depth convert under the default recursion limit, without
  ``jax.tree`` walks over the whole model (JAX's own limit is about 900
  levels): see the bridge guide.

  Args:
    eqx_module: an ``eqx.Module`` (or a list/tuple/dict of them; a root list or
      dict becomes ``nnx.List``/``nnx.Dict``).
    state: the ``eqx.nn.State`` of a stateful model (as returned by
      ``eqx.nn.make_with_state``); without it, each ``StateIndex`` must still
      hold its initial value.
    native: give NNX's own layer where one exists: ``eqx.nn.Linear`` becomes
      ``nnx.Linear`` with ``kernel = weight.T`` (of shape ``(in, out)``), which
      computes ``x @ kernel``: equal values, but another program (results may
      differ in the last bit). ``nnx.to_eqx(..., native=True)`` inverts it.
    rngs: an ``nnx.Rngs`` (or ``nnx.RngStream``): every converted
      ``eqx.nn.Dropout`` (``MultiheadAttention``'s included) keeps a stream
      forked from its ``"dropout"`` stream (``default`` if there is none), as
      ``nnx.Dropout(rate, rngs=rngs)`` does, and draws its key from it when
      called without ``key=``. An explicit ``key=`` still wins and gives
      Equinox's result bit for bit. ``nnx.to_eqx`` drops the streams (an
      Equinox model takes keys per call), so ``to_eqx(from_eqx(m, rngs=...))``
      is still ``m``.

  Returns:
    The NNX module (new objects; the Equinox module is untouched).

  Raises:
    UnconvertibleFieldError: a field holds arrays inside something other than
      an ``eqx.Module``, tuple, list or dict (its path is named).
    MissingStateError: a ``StateIndex`` has no value in ``state`` (or no state
      was given and its initial value was deleted).
    SharedConversionError: an ``eqx.nn.Shared`` whose ``get``/``where`` compute
      new arrays instead of selecting nodes.
    RngsTypeError: ``rngs`` is not an ``nnx.Rngs``, an ``nnx.RngStream`` or None.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> e = eqx.nn.Linear(3, 2, key=jax.random.key(0))
    >>> m = nnx.from_eqx(e)
    >>> type(m) is nnx.bridge.Linear, m.weight.value.shape
    (True, (2, 3))
    >>> bool((m(jnp.ones(3)) == e(jnp.ones(3))).all())
    True
    >>> type(nnx.from_eqx(e, native=True)) is nnx.Linear
    True
    >>> d = nnx.from_eqx(eqx.nn.Dropout(0.5), rngs=nnx.Rngs(dropout=0))
    >>> type(d.rngs).__name__, bool((d(jnp.ones(8)) != d(jnp.ones(8))).any())
    ('RngStream', True)
  """
  if not isinstance(eqx_module, (eqx.Module, list, tuple, dict)):
    raise UnconvertibleFieldError(
      f"nnx.from_eqx expects an eqx.Module, got {type(eqx_module).__name__}. Fix: pass"
      " the Equinox model (and its eqx.nn.State as `state=`)."
    )
  if rngs is not None and not isinstance(rngs, (Rngs, RngStream)):
    raise RngsTypeError(
      f"nnx.from_eqx: `rngs` must be an nnx.Rngs, an nnx.RngStream or None, got"
      f" {type(rngs).__name__}. Fix: pass e.g. rngs=nnx.Rngs(dropout=0)."
    )
  with gc_paused():
    out = FromEqxContext(state, native, rngs).convert(eqx_module, ())
  if type(out) is list:  # a root list/dict of modules: the NNX containers
    return List(out)
  if type(out) is dict:
    return Dict(out)
  return out


def to_eqx_parts(
  module: Any, native: bool = False, view: bool = False
) -> tuple[Any, Any, list, ToEqxContext]:
  """``(eqx_model, state or None, links, ctx)`` for an NNX module (see to_eqx);
  ``view``: the Equinox view a generic module's methods run on (see ToEqxContext)."""
  if is_flax_object(module):  # a flax.nnx model: through its nnx_eqx form
    module = from_flax(module)
  if not is_graph_node(module):
    raise UnconvertibleFieldError(
      f"nnx.to_eqx expects an nnx.Module, got {type(module).__name__}. Fix: pass the"
      " NNX model (a Module, or an nnx.List/nnx.Dict of them)."
    )
  ctx = ToEqxContext(native, view)
  with gc_paused():
    tree = ctx.convert(module, ())
    ctx.check_layouts()
    tree = ctx.tree = tie_root(tree, ctx, module)
    model, state, links = finalize(tree, ctx.links)
  return model, state, links, ctx


def to_eqx(module: Any, *, native: bool = False) -> Any:
  """Converts an NNX module into an ``eqx.Module`` running the same program.

  The ``nnx.bridge`` layers become their Equinox layers, an ``nnx.Linear``
  becomes an :class:`nnx.bridge.KernelLinear` (its ``kernel`` of shape
  ``(in, out)`` kept), and any other module (``nnx.Conv``, ... and your own)
  becomes an :class:`nnx.bridge.NnxModule` with one field per attribute, in the
  module's own layout, and the same methods. They run the NNX code on the
  fields: forward pass and gradients are the source's bit for bit (the same
  StableHLO). Variables or
  Modules reachable from several paths are tied with ``eqx.nn.Shared`` (the
  root is then a :class:`nnx.bridge.SharedRoot`). ``nnx.from_eqx`` inverts it
  exactly.

  Any depth converts under the default recursion limit (modules are converted
  bottom-up by a walk with its own stack), but ``jax.tree`` functions recurse
  through the result and fail on one nested deeper than about 900 levels.

  Args:
    module: an NNX module without non-Param state, or a flax.nnx Module (converted
      with ``nnx.from_flax`` first: ``nnx.to_eqx(flax_model)`` is
      ``nnx.to_eqx(nnx.from_flax(flax_model))``).
    native: give Equinox's own layer where one exists: ``nnx.Linear`` becomes
      ``eqx.nn.Linear`` with ``weight = kernel.T``, which computes
      ``weight @ x``: equal values, but another program. ``nnx.from_eqx(...,
      native=True)`` inverts it.

  Returns:
    The Equinox module (arrays are shared with ``module``, not copied).

  Raises:
    StatefulModuleError: the module has non-Param Variables (BatchStat, Cache,
      counters, Rngs); use :func:`to_eqx_with_state`. The paths are named.
    CycleError: the graph has a reference cycle (both paths are named).
    SharedConversionError: a shared Variable is stored in different layouts by
      the layers using it.
    UnconvertibleFieldError: ``module`` is not an NNX module, or a module
      converted from Equinox gained attributes its class has no field for.

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    >>> e = nnx.to_eqx(m)
    >>> type(e).__name__, e.kernel.shape
    ('KernelLinear', (3, 2))
    >>> bool((e(jnp.ones(3)) == m(jnp.ones(3))).all())
    True
    >>> nnx.to_eqx(m, native=True).weight.shape   # an eqx.nn.Linear
    (2, 3)
  """
  model, state, _, ctx = to_eqx_parts(module, native)
  if state is not None:
    paths = ", ".join(fmt_path(p) for p in ctx.state_paths[:6])
    raise StatefulModuleError(
      f"nnx.to_eqx: the module has state that Equinox keeps in an eqx.nn.State (at"
      f" {paths}). Fix: use `eqx_model, state = nnx.to_eqx_with_state(module)` and"
      " call the Equinox model as `out, state = eqx_model(x, state)`."
    )
  return model


def to_eqx_with_state(module: Any, *, native: bool = False) -> tuple[Any, eqx.nn.State]:
  """Converts an NNX module with state into ``(eqx_model, eqx.nn.State)``.

  The pair is what ``eqx.nn.make_with_state`` returns: non-Param Variables
  become ``eqx.nn.StateIndex`` fields with markers ``<RootClass><keypath>`` and
  initial values deleted, and their values are in the State. Stateless modules
  give an empty State.

  Args:
    module: an NNX module, or a flax.nnx Module (as in :func:`to_eqx`).
    native: as in :func:`to_eqx`.

  Returns:
    ``(eqx_model, state)``.

  Raises:
    CycleError, SharedConversionError, UnconvertibleFieldError: as :func:`to_eqx`.

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> model, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
    >>> m = nnx.from_eqx(model, state)
    >>> sorted(nnx.state(m, nnx.BatchStat))
    ['counter', 'mean', 'var']
    >>> model2, state2 = nnx.to_eqx_with_state(m)
    >>> bool(eqx.tree_equal((model, state), (model2, state2)))
    True
  """
  model, state, _, _ = to_eqx_parts(module, native)
  if state is None:  # no StateIndex anywhere (and the model may be too deep for jax.tree)
    state = eqx.nn.State(())
  return model, state

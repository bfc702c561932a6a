"""Seed-era scan: ``nnx.Scan``, ``scan_init``/``scan_apply`` and the decorator
form (``variable_axes``, ``variable_broadcast``, ``variable_carry``,
``split_rngs``), built on :func:`nnx.vmap` and :func:`nnx.scan`.

* ``scan_init`` builds ``length`` copies of a module with ``nnx.vmap``: the
  ``split_rngs`` streams are split so each copy gets its own keys, state
  matching ``variable_axes`` is stacked on its axis, the rest is shared.
* ``scan_apply`` runs ``f(module, carry, x, *args)`` → ``(carry, y)`` with
  ``nnx.scan``: ``variable_axes`` state is scanned, ``variable_carry`` state
  carried, ``variable_broadcast`` state broadcast (its updates propagate
  too), ``axes_arg`` scanned with ``in_axes`` and outputs stacked with
  ``out_axes``.

The seeds' ``ctx`` argument is ``rngs`` here; ``data_transform`` is accepted
and unused, as in the seeds.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax

from ..graph.api._functional import node_impl, state
from ..graph.state._filters import Filter
from ..module._module import Module
from ..transforms._errors import ScanLengthError
from ..transforms.axes._specs import Carry, StateAxes, broadcast_prefix
from ..transforms.lifted._scan import ScanWrapped
from ..transforms.lifted._vmap import vmap
from ..transforms.rngs._split import split_rngs
from ._wrappers import CallProxy


def _items(m: Any) -> tuple:
  return tuple(m.items()) if isinstance(m, Mapping) else tuple(m or ())


@dataclasses.dataclass(frozen=True)
class ScanOptions:
  """Options of the seed-era scan (the seeds' ``ScanOptions``); mappings are
  stored as tuples of pairs so that the options are hashable.

  Example:
    >>> import nnx_eqx as nnx
    >>> opts = nnx.ScanOptions.make(variable_axes={nnx.Param: 0}, length=3)
    >>> same = nnx.ScanOptions.make(variable_axes={nnx.Param: 0}, length=3)
    >>> opts.variable_axes[0][1], opts == same, hash(opts) == hash(same)
    (0, True, True)
  """

  variable_axes: tuple = ()
  """``(filter, axis)`` pairs: the state stacked along ``axis`` (``make`` takes a mapping)."""
  variable_broadcast: Filter = None
  """The state shared by every step, unchanged by the scan."""
  variable_carry: Filter = ...
  """The state carried from step to step (default: the state no other option takes)."""
  split_rngs: Filter = None
  """The RNG streams split per layer and step (a filter of stream names)."""
  in_axes: Any = 0
  """The axis of the scanned inputs."""
  out_axes: Any = 0
  """The axis of the stacked outputs."""
  length: int | None = None
  """The number of steps (needed with ``variable_axes``)."""
  reverse: bool = False
  """Scan from the last step to the first, as ``jax.lax.scan``."""
  unroll: int = 1
  """Steps unrolled per loop iteration, as ``jax.lax.scan``."""
  data_transform: Callable[..., Any] | None = None
  """Accepted for compatibility with the seeds; unused."""
  metadata_params: tuple = ()
  """``(key, value)`` pairs; ``(nnx.PARTITION_NAME, name)`` adds ``name`` to the stacked
  axis of ``sharding`` metadata."""

  @classmethod
  def make(cls, **kw: Any) -> ScanOptions:
    kw["variable_axes"] = _items(kw.get("variable_axes"))
    kw["metadata_params"] = _items(kw.get("metadata_params"))
    return cls(**kw)

  def state_axes(self, carry_axis: Any) -> StateAxes:
    return StateAxes(
      (*self.variable_axes, (self.variable_broadcast, None), (self.variable_carry, carry_axis))
    )


def scan_init(options: ScanOptions, module_constructor: Callable, args: tuple, kwargs: dict) -> Any:
  """Builds ``options.length`` stacked copies of ``module_constructor(*args, **kwargs)``.

  Raises:
    ScanLengthError: ``variable_axes`` or ``split_rngs`` without ``length``.

  Example:
    >>> import nnx_eqx as nnx
    >>> opts = nnx.ScanOptions.make(variable_axes={nnx.Param: 0}, split_rngs="params", length=4)
    >>> stack = nnx.legacy.scan_init(opts, nnx.Linear, (2, 3), {"rngs": nnx.Rngs(params=0)})
    >>> stack.kernel.value.shape
    (4, 2, 3)
  """
  kwargs = dict(kwargs)
  rngs = kwargs.pop("rngs", None)
  if options.variable_axes and options.length is None:
    raise ScanLengthError(
      "nnx.Scan: variable_axes stacks state over `length` copies, but length is None."
      " Fix: pass length=n."
    )
  if rngs is None and not options.variable_axes:
    return module_constructor(*args, **kwargs)
  if options.length is None:
    raise ScanLengthError(
      "nnx.Scan: splitting Rngs for each step needs the number of steps. Fix: pass length=n."
    )

  make = _init_for(options, module_constructor)
  if rngs is None:
    return make(None, args, kwargs)
  with split_rngs(rngs, splits=options.length, only=options.split_rngs):
    return make(rngs, args, kwargs)


def _construct(module_constructor, rngs, args, kwargs):
  if rngs is not None:
    kwargs = {**kwargs, "rngs": rngs}
  return module_constructor(*args, **kwargs)


@functools.lru_cache(maxsize=256)
def _init_for(options: ScanOptions, module_constructor: Callable):
  return vmap(
    functools.partial(_construct, module_constructor),
    in_axes=(StateAxes({options.split_rngs: 0, ...: None}), None, None),
    out_axes=options.state_axes(None),
    axis_size=options.length,
    transform_metadata=dict(options.metadata_params),
  )


def _scan_body(f, module, carry, axes_arg, rngs, kwargs, bargs):
  if rngs is not None:
    kwargs = {**kwargs, "rngs": rngs}
  return f(module, carry, axes_arg, *bargs, **kwargs)


@functools.lru_cache(maxsize=256)
def _scan_for(options: ScanOptions, f: Callable) -> ScanWrapped:
  in_axes = (
    options.state_axes(Carry),
    Carry,
    options.in_axes,
    StateAxes({options.split_rngs: 0, ...: None}),
    None,
    None,
  )
  return ScanWrapped(
    functools.partial(_scan_body, f),
    options.length,
    options.reverse,
    options.unroll,
    in_axes,
    (Carry, options.out_axes),
    dict(options.metadata_params),
  )


def _infer_length(options: ScanOptions, module, axes_arg) -> int | None:
  if options.length is not None:
    return options.length
  for flt, axis in options.variable_axes:
    for leaf in jax.tree_util.tree_leaves(state(module, flt)):
      return leaf.shape[axis]
  leaves = jax.tree_util.tree_leaves(axes_arg)
  specs = broadcast_prefix(options.in_axes, axes_arg, "in_axes") if leaves else []
  for x, a in zip(leaves, specs):
    if isinstance(a, int):
      return x.shape[a]
  return None


def scan_apply(
  options: ScanOptions,
  f: Callable,
  module: Module,
  carry_arg: Any,
  axes_arg: Any,
  broadcast_args: tuple,
  broadcast_kwargs: dict,
) -> tuple[Any, Any]:
  """Runs ``f(module, carry, x, *args, **kwargs) -> (carry, y)`` over the
  stacked ``module`` (the seeds' ``scan_apply``); returns ``(carry, ys)``.

  Raises:
    ScanLengthError: Rngs to split but no length can be inferred.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> opts = nnx.ScanOptions.make(variable_axes={nnx.Param: 0}, split_rngs="params", length=2)
    >>> stack = nnx.legacy.scan_init(opts, nnx.Linear, (3, 3), {"rngs": nnx.Rngs(params=0)})
    >>> body = lambda m, c, x: (m(c), None)
    >>> nnx.legacy.scan_apply(opts, body, stack, jnp.ones((1, 3)), None, (), {})[0].shape
    (1, 3)
  """
  kwargs = dict(broadcast_kwargs)
  rngs = kwargs.pop("rngs", None)
  run = _scan_for(options, f)
  if rngs is None or options.split_rngs is None:
    return run(module, carry_arg, axes_arg, rngs, kwargs, tuple(broadcast_args))
  length = _infer_length(options, module, axes_arg)
  if length is None:
    raise ScanLengthError(
      "nnx.Scan: cannot infer the number of steps to split Rngs for. Fix: pass length=n."
    )
  with split_rngs(rngs, splits=length, only=options.split_rngs):
    return run(module, carry_arg, axes_arg, rngs, kwargs, tuple(broadcast_args))


def seed_scan(f: Callable | None = None, *, is_init: bool | None = None, **options: Any):
  """The seeds' ``nnx.scan``: decorates ``__init__`` (stacked construction,
  see :func:`scan_init`) or ``__call__``-like methods (see
  :func:`scan_apply`); given a Module class, returns ``nnx.Scan(cls, ...)``."""
  if f is None:
    return functools.partial(seed_scan, is_init=is_init, **options)
  if isinstance(f, type) and issubclass(f, Module):
    return Scan(f, **options)
  opts = ScanOptions.make(**options)
  init = is_init if is_init is not None else getattr(f, "__name__", "") == "__init__"
  if init:

    @functools.wraps(f)
    def init_wrapper(module, *args, **kwargs):
      cls = type(module)
      lifted = scan_init(opts, _InitBody(cls, f), args, kwargs)
      for k, v in node_impl(cls).children(lifted):
        setattr(module, k, v)

    return init_wrapper

  @functools.wraps(f)
  def apply_wrapper(module, carry_arg, axes_arg, *args, **kwargs):
    return scan_apply(opts, f, module, carry_arg, axes_arg, args, kwargs)

  return apply_wrapper


class _InitBody:
  """Runs a decorated ``__init__`` on a fresh instance (hashable, for caching)."""

  __slots__ = ("cls", "init")

  def __init__(self, cls: type, init: Callable):
    self.cls, self.init = cls, init

  def __call__(self, *args, **kwargs):
    inner = Module.__new__(self.cls)
    self.init(inner, *args, **kwargs)
    return inner

  def __eq__(self, other):
    return isinstance(other, _InitBody) and (other.cls, other.init) == (self.cls, self.init)

  def __hash__(self):
    return hash((self.cls, self.init))


class Scan(Module):
  """Seed-era wrapper: ``nnx.Scan(Block, variable_axes={nnx.Param: 0},
  split_rngs="params", length=L)(*args, rngs=...)`` builds ``L`` stacked
  ``Block``s (``scan_module``); calling it scans them:
  ``carry, ys = scan(carry, xs, *broadcast_args, rngs=...)`` where
  ``Block.__call__(carry, x, ...)`` returns ``(carry, y)``. ``scan.call.method``
  scans another method.

  Args (of ``nnx.Scan(...)``):
    module_constructor: builds one layer (e.g. a Module class).
    variable_axes: ``{filter: axis}`` of stacked state (needs ``length``).
    variable_broadcast: filter of state shared by all steps.
    variable_carry: filter of state carried across steps (default: the rest).
    split_rngs: stream names (a filter) split per layer/step.
    in_axes, out_axes: axes of the scanned input and the stacked output.
    length, reverse, unroll: as ``jax.lax.scan``.
    data_transform: accepted for compatibility, unused.
    metadata_params: ``{nnx.PARTITION_NAME: name}`` adds ``name`` to the
      stacked axis of ``sharding`` metadata.

  Returns:
    A constructor; its arguments go to ``module_constructor`` per layer.

  Raises:
    ScanLengthError: missing or inconsistent length.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Block(nnx.Module):
    ...   def __init__(self, *, rngs):
    ...     self.linear = nnx.Linear(3, 3, rngs=rngs)
    ...   def __call__(self, x, _):
    ...     return self.linear(x), None
    >>> scan = nnx.Scan(Block, variable_axes={nnx.Param: 0}, split_rngs="params", length=4)(
    ...   rngs=nnx.Rngs(params=0))
    >>> y, _ = scan(jnp.ones((2, 3)), None)
    >>> y.shape, scan.scan_module.linear.kernel.value.shape
    ((2, 3), (4, 3, 3))
  """

  module_constructor: Callable
  options: ScanOptions
  scan_module: Any

  def __new__(cls, module_constructor: Callable, /, **options: Any):  # type: ignore[misc]
    opts = ScanOptions.make(**options)

    def create(*args, **kwargs) -> Scan:
      obj = Module.__new__(cls)
      obj.module_constructor = module_constructor
      obj.options = opts
      obj.scan_module = scan_init(opts, module_constructor, args, kwargs)
      return obj

    return create  # type: ignore[return-value]

  def __call__(self, carry_arg: Any, axes_arg: Any, *broadcast_args: Any, **broadcast_kwargs: Any):
    return self.call(carry_arg, axes_arg, *broadcast_args, **broadcast_kwargs)

  @property
  def call(self) -> Any:
    """Proxy to the stacked module's methods: ``scan.call.method(carry, xs, ...)``."""

    def apply(f, carry_arg, axes_arg, *args, **kwargs):
      return scan_apply(self.options, f, self.scan_module, carry_arg, axes_arg, args, kwargs)

    return CallProxy(apply)

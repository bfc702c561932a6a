"""``nnx.pmap``: ``jax.pmap`` lifted over Modules (as flax.nnx.pmap).

The axes of Module state, broadcast updates and Modules created inside are
handled exactly as by :func:`nnx.vmap` (the same wrapper); only the JAX
mapping differs: the body runs once per device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax

from ..lifting import _lift
from ._vmap import VmapWrapped


class PmapWrapped(VmapWrapped):
  """The callable returned by :func:`pmap`."""

  name = "nnx.pmap"

  def __init__(self, fn, in_axes, out_axes, axis_name, axis_size, devices, backend, tm):
    super().__init__(fn, in_axes, out_axes, axis_name, axis_size, None, tm)
    self.devices, self.backend = devices, backend

  def _map(self, mapped: Callable, in_axes: tuple, holder: list) -> Callable:
    # jax.pmap needs its out axes before tracing, while they are known only
    # after the body ran (which leaves changed, which Modules came out): an
    # abstract vmap trace finds them first. Both traces happen once per
    # compilation, as the call runs under the dispatcher's cached jit.
    vmapped = super()._map(mapped, in_axes, holder)

    def run(*args):
      jax.eval_shape(vmapped, *args)
      return jax.pmap(
        mapped,
        axis_name=self.axis_name,
        in_axes=in_axes,
        out_axes=list(holder),
        axis_size=self.axis_size,
        devices=self.devices,
        backend=self.backend,
      )(*args)

    return run


def pmap(
  f: Callable | None = None,
  *,
  axis_name: Any = None,
  in_axes: Any = 0,
  out_axes: Any = 0,
  axis_size: int | None = None,
  devices: Any = None,
  backend: str | None = None,
  transform_metadata: Mapping[str, Any] | None = None,
):
  """``jax.pmap`` lifted over Modules (as flax.nnx.pmap).

  Module arguments are mapped over their state as with :func:`nnx.vmap`
  (``int``, ``None`` or ``nnx.StateAxes`` in ``in_axes``), updates are
  written back, and Modules created inside come out stacked on ``out_axes``;
  the mapped axis is spread over devices (its size must not exceed the
  device count).

  Args:
    f: the function; may decorate methods.
    axis_name: name of the mapped axis for collectives.
    in_axes, out_axes: as :func:`nnx.vmap`.
    axis_size: size of the mapped axis when no argument is mapped.
    devices, backend: as ``jax.pmap``.
    transform_metadata: as :func:`nnx.vmap`.

  Returns:
    The parallel-mapped function (a second call with the same graph and
    shapes does not retrace).

  Raises:
    BoundMethodError: ``f`` is a Module's bound method.
    AxisSpecError, AxisSizeError, AxisRankError, BroadcastUpdateError: as
      :func:`nnx.vmap`.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> @nnx.split_rngs(splits=1)
    ... @nnx.pmap(axis_size=1)
    ... def make(rngs):
    ...   return nnx.Linear(2, 3, rngs=rngs)
    >>> stack = make(nnx.Rngs(0))
    >>> stack.kernel.value.shape
    (1, 2, 3)
    >>> nnx.pmap(lambda m, x: m(x), in_axes=(0, None))(stack, jnp.ones((4, 2))).shape
    (1, 4, 3)
  """

  def wrap(fn: Callable) -> PmapWrapped:
    _lift.reject_bound_method(fn, "nnx.pmap")
    return PmapWrapped(
      fn, in_axes, out_axes, axis_name, axis_size, devices, backend, transform_metadata
    )

  return wrap if f is None else wrap(f)


__all__ = ["pmap", "PmapWrapped"]

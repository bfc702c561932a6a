"""``RNN`` (a cell scanned over time) and ``Bidirectional`` (as flax.nnx)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array

from ..graph.api._functional import iter_graph
from ..graph.state._filters import to_predicate
from ..module._module import Module
from ..module._rngs import Rngs, RngStream
from ..transforms import Carry, StateAxes, scan, split_rngs
from ._common import RngsTypeError


def _carry_stream(rngs: Any, layer: str) -> RngStream | None:
  """The stream a layer keeps for ``initialize_carry``.

  Raises:
    RngsTypeError: for anything but a bool, ``Rngs`` or ``RngStream``.
  """
  if rngs is True:
    return RngStream(0, tag="carry")
  if rngs is False or rngs is None:
    return None
  if isinstance(rngs, Rngs):
    return rngs["carry"].fork()
  if isinstance(rngs, RngStream):
    return rngs
  raise RngsTypeError(
    f"{layer}: `rngs` must be a bool, an nnx.Rngs or an nnx.RngStream, got {type(rngs).__name__}."
  )


def flip_sequences(
  inputs: Array, seq_lengths: Array | None, num_batch_dims: int, time_major: bool
) -> Array:
  """Reverses each sequence along the time axis, keeping padding at the end.

  Sequence ``b`` of length ``seq_lengths[b]`` has its first ``seq_lengths[b]``
  steps reversed; the steps after it stay where they are (up to rotation of
  padding). Without ``seq_lengths`` the whole time axis is reversed.

  Args:
    inputs: ``(*batch, time, *features)`` or, with ``time_major``, ``(time, *batch, ...)``.
    seq_lengths: ``(*batch,)`` integer lengths, or None.
    num_batch_dims: number of batch axes.
    time_major: whether time is the first axis.

  Example:
    >>> import jax.numpy as jnp
    >>> from nnx_eqx.nn import flip_sequences
    >>> x = jnp.array([[1, 0, 0], [2, 3, 0], [4, 5, 6]])
    >>> flip_sequences(x, jnp.array([1, 2, 3]), 1, False).tolist()
    [[1, 0, 0], [3, 2, 0], [6, 5, 4]]
  """
  time_axis = 0 if time_major else num_batch_dims
  steps = inputs.shape[time_axis]
  if seq_lengths is None:
    return jnp.flip(inputs, axis=time_axis)
  lengths = jnp.expand_dims(seq_lengths, axis=time_axis)
  idx_shape = [steps] + [1] * num_batch_dims if time_major else [1] * num_batch_dims + [steps]
  idx = (jnp.arange(steps - 1, -1, -1).reshape(idx_shape) + lengths) % steps
  idx = idx.reshape(idx.shape + (1,) * (inputs.ndim - idx.ndim))
  return jnp.take_along_axis(inputs, idx, axis=time_axis)


def _last_valid(carries: Any, seq_lengths: Array) -> Any:
  """From carries stacked over time (axis 0), each batch entry's carry at its last step."""
  last = seq_lengths - 1
  return jax.tree.map(lambda c: c[last, jnp.arange(c.shape[1])], carries)


class RNN(Module):
  """Applies a recurrent cell over the time axis with ``nnx.scan`` (as flax.nnx.RNN).

  The input is ``(*batch, time, *features)`` (``(time, *batch, *features)`` with
  ``time_major``); the output stacks the cell's per-step outputs on the same
  time axis. The cell's state is carried through the scan (in-place updates,
  e.g. of Rngs counts, come back), except the Rngs streams selected by
  ``broadcast_rngs``: those draw one key per call and every step sees the same
  key (e.g. a recurrent dropout mask shared over time).

  Args:
    cell: an :class:`RNNCellBase` (or any Module with ``__call__(carry, x) ->
      (carry, y)``, ``initialize_carry(input_shape, rngs)`` and ``num_feature_axes``).
    time_major: time is the first axis.
    return_carry: also return the final carry: ``(carry, outputs)``.
    reverse: process the sequence backwards (respecting ``seq_lengths``).
    keep_order: with ``reverse``, flip the outputs back to input order.
    unroll: steps per scan iteration (``jax.lax.scan``'s ``unroll``).
    state_axes: ``{filter: axis}`` for the cell's state (default: all carried).
    broadcast_rngs: filter of Rngs streams to broadcast over time: they are split
      once per call (``nnx.split_rngs(splits=1, squeeze=True)``) and every step
      restarts them, so each step draws the same keys.
    rngs: ``True`` (a stream seeded 0), ``False``, an ``Rngs`` (its ``carry``
      stream is forked) or an ``RngStream``: keys for ``initialize_carry``.

  The call takes ``initial_carry`` (default: ``cell.initialize_carry``),
  ``seq_lengths`` ``(batch,)`` (with ``return_carry`` the carry of each
  sequence's last valid step is returned), and overrides of ``return_carry``,
  ``time_major``, ``reverse``, ``keep_order`` and ``rngs``.

  Raises:
    RngsTypeError: if ``rngs`` has an unsupported type.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> rnn = nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(0)), return_carry=True)
    >>> carry, y = rnn(jnp.ones((2, 5, 3)))
    >>> carry.shape, y.shape
    ((2, 4), (2, 5, 4))
  """

  def __init__(
    self,
    cell: Any,
    *,
    time_major: bool = False,
    return_carry: bool = False,
    reverse: bool = False,
    keep_order: bool = False,
    unroll: int = 1,
    state_axes: Mapping[Any, Any] | None = None,
    broadcast_rngs: Any = None,
    rngs: Any = True,
  ):
    self.cell = cell
    self.time_major = time_major
    self.return_carry = return_carry
    self.reverse = reverse
    self.keep_order = keep_order
    self.unroll = unroll
    self.state_axes = dict(state_axes) if state_axes is not None else {...: Carry}
    self.broadcast_rngs = broadcast_rngs
    self.rngs = _carry_stream(rngs, type(self).__name__)

  def __call__(
    self,
    inputs: Array,
    *,
    initial_carry: Any = None,
    seq_lengths: Array | None = None,
    return_carry: bool | None = None,
    time_major: bool | None = None,
    reverse: bool | None = None,
    keep_order: bool | None = None,
    rngs: Rngs | RngStream | None = None,
  ) -> Any:
    return_carry = self.return_carry if return_carry is None else return_carry
    time_major = self.time_major if time_major is None else time_major
    reverse = self.reverse if reverse is None else reverse
    keep_order = self.keep_order if keep_order is None else keep_order
    n_features = self.cell.num_feature_axes
    time_axis = 0 if time_major else inputs.ndim - (n_features + 1)
    n_batch = inputs.ndim - n_features - 1
    if reverse:
      inputs = flip_sequences(inputs, seq_lengths, n_batch, time_major)
    rngs = self.rngs if rngs is None else rngs
    if isinstance(rngs, Rngs):
      rngs = rngs["carry"].fork()
    if initial_carry is None:
      step_shape = inputs.shape[:time_axis] + inputs.shape[time_axis + 1 :]
      initial_carry = self.cell.initialize_carry(step_shape, rngs)
    keep_carries = seq_lengths is not None and return_carry
    carry, outputs = self._scan(time_axis, keep_carries)(self.cell, initial_carry, inputs)
    if keep_carries:
      assert seq_lengths is not None
      carries, outputs = outputs
      carry = _last_valid(carries, seq_lengths)
    if reverse and keep_order:
      outputs = flip_sequences(outputs, seq_lengths, n_batch, time_major)
    return (carry, outputs) if return_carry else outputs

  def _scan(self, time_axis: int, keep_carries: bool) -> Callable[..., Any]:
    """``(cell, carry, inputs) -> (carry, outputs)`` scanned over ``time_axis``; the
    outputs are ``(carries, ys)`` when ``keep_carries``. Built once per configuration
    (when it is hashable), so eager calls reuse the scan's compilation cache."""
    config = (
      tuple(self.state_axes.items()),
      time_axis,
      keep_carries,
      self.unroll,
      self.broadcast_rngs,
    )
    try:
      return _cached_scanner(*config)
    except TypeError:  # an unhashable filter
      return _scanner(*config)


def _scanner(
  state_axes: tuple, time_axis: int, keep_carries: bool, unroll: int, broadcast_rngs: Any
) -> Callable[..., Any]:
  out_axes = (Carry, (0, time_axis)) if keep_carries else (Carry, time_axis)
  shared = to_predicate(broadcast_rngs) if broadcast_rngs is not None else None

  @scan(in_axes=(StateAxes(dict(state_axes)), Carry, time_axis), out_axes=out_axes, unroll=unroll)
  def step(cell: Any, carry: Any, x: Array) -> tuple[Any, Any]:
    if shared is not None:  # every step starts the shared streams from the same count
      for stream in _streams(cell, shared):
        stream.count.value = jnp.zeros_like(stream.count.value)
    carry, y = cell(carry, x)
    return carry, ((carry, y) if keep_carries else y)

  if broadcast_rngs is None:
    return step
  return split_rngs(splits=1, only=broadcast_rngs, squeeze=True)(step)


_cached_scanner = functools.lru_cache(maxsize=64)(_scanner)


def _streams(node: Any, predicate: Callable[..., bool]) -> list[RngStream]:
  """The RngStreams in ``node`` selected as ``split_rngs`` selects them."""
  return [
    s
    for path, s in iter_graph(node)
    if isinstance(s, RngStream) and predicate((*path, "key"), s.key)
  ]


def _concatenate(a: Array, b: Array) -> Array:
  return jnp.concatenate([a, b], axis=-1)


class Bidirectional(Module):
  """Runs one RNN forwards and one backwards over the sequence and merges their
  outputs (as flax.nnx.Bidirectional).

  Args:
    forward_rnn, backward_rnn: :class:`RNN`-like Modules (the backward one is
      called with ``reverse=True, keep_order=True``).
    merge_fn: ``(forward, backward) -> output`` (default: concatenate features).
    time_major, return_carry: defaults of the call's arguments.
    rngs: as for :class:`RNN`; passed to both RNNs' calls.

  The call returns ``merge_fn(forward_outputs, backward_outputs)``, or with
  ``return_carry`` ``((forward_carry, backward_carry), outputs)``.

  Raises:
    RngsTypeError: if ``rngs`` has an unsupported type.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> fwd = nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(0)))
    >>> bwd = nnx.RNN(nnx.GRUCell(3, 4, rngs=nnx.Rngs(1)))
    >>> nnx.Bidirectional(fwd, bwd)(jnp.ones((2, 5, 3))).shape
    (2, 5, 8)
  """

  def __init__(
    self,
    forward_rnn: Any,
    backward_rnn: Any,
    *,
    merge_fn: Callable[[Array, Array], Array] = _concatenate,
    time_major: bool = False,
    return_carry: bool = False,
    rngs: Any = True,
  ):
    self.forward_rnn = forward_rnn
    self.backward_rnn = backward_rnn
    self.merge_fn = merge_fn
    self.time_major = time_major
    self.return_carry = return_carry
    self.rngs = _carry_stream(rngs, type(self).__name__)

  def __call__(
    self,
    inputs: Array,
    *,
    initial_carry: tuple[Any, Any] | None = None,
    rngs: Rngs | RngStream | None = None,
    seq_lengths: Array | None = None,
    return_carry: bool | None = None,
    time_major: bool | None = None,
    reverse: bool | None = None,
    keep_order: bool | None = None,
  ) -> Any:
    """``reverse`` and ``keep_order`` are accepted for signature compatibility and ignored."""
    del reverse, keep_order
    time_major = self.time_major if time_major is None else time_major
    return_carry = self.return_carry if return_carry is None else return_carry
    rngs = self.rngs if rngs is None else rngs
    if isinstance(rngs, Rngs):
      rngs = rngs["carry"]
    carry_f, carry_b = initial_carry if initial_carry is not None else (None, None)
    common = dict(rngs=rngs, seq_lengths=seq_lengths, return_carry=True, time_major=time_major)
    carry_f, out_f = self.forward_rnn(inputs, initial_carry=carry_f, reverse=False, **common)
    carry_b, out_b = self.backward_rnn(
      inputs, initial_carry=carry_b, reverse=True, keep_order=True, **common
    )
    outputs = jax.tree.map(self.merge_fn, out_f, out_b)
    return ((carry_f, carry_b), outputs) if return_carry else outputs

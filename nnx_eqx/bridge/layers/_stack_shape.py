"""Stacked layers: the leading axes that ``eqx.filter_vmap`` (or ``nnx.vmap``) adds.

A model that runs ``lax.scan`` over its layers builds them with
``eqx.filter_vmap(make_layer)(keys)``: every array of the layer gains the same
leading axes (one per vmap level) while its static fields describe one layer.
The built-in converters map arrays with layouts that act on the trailing axes
(see ``_converters.Layout``), so they convert such stacks as they are; each
first asks :func:`stack_shape` whether the arrays it reads agree on their
leading axes, and declines (``NotImplemented``: generic conversion, which keeps
every field as it is) when they do not. Converters registered by users should
do the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph.variables._variables import Variable


def stack_shape(*arrays: tuple[Any, int]) -> tuple[int, ...] | None:
  """The stack axes shared by a layer's arrays, or None if they disagree.

  Args:
    *arrays: ``(array, ndim)`` pairs: an array (or Variable, or None for an
      absent optional parameter, which is skipped) and the number of axes it has
      in one unstacked layer (e.g. ``(linear.weight, 2)``, ``(linear.bias, 1)``).

  Returns:
    The leading shape the arrays share beyond their one-layer axes: ``()`` for
    an unstacked layer, ``(n,)`` for ``n`` layers stacked by one vmap, ``(m, n)``
    for two levels. None if some array has fewer axes than one layer has, or the
    arrays' leading shapes differ (e.g. only the weights were vmapped).

  Raises:
    Nothing: a layer it cannot read as a stack gives None.

  Example:
    >>> import equinox as eqx, jax, nnx_eqx as nnx
    >>> keys = jax.random.split(jax.random.key(0), 3)
    >>> lin = eqx.filter_vmap(lambda k: eqx.nn.Linear(2, 4, key=k))(keys)
    >>> nnx.bridge.stack_shape((lin.weight, 2), (lin.bias, 1))
    (3,)
    >>> nnx.bridge.stack_shape((lin.weight, 2), (lin.bias[0], 1)) is None
    True
  """
  lead: tuple[int, ...] | None = None
  for x, ndim in arrays:
    if isinstance(x, Variable):
      x = x.value
    if x is None:
      continue
    shape = np.shape(x)
    if len(shape) < ndim:
      return None
    here = tuple(shape[: len(shape) - ndim])
    if lead is None:
      lead = here
    elif here != lead:
      return None
  return () if lead is None else lead

"""Equinox modules given to a lifted transform as plain pytrees.

A lifted transform takes an ``eqx.Module`` argument as a pytree of data, as
flax.nnx's transforms take any non-graph pytree (an ``eqx.nn.Linear`` of arrays is
traced like a tuple of its arrays). Where JAX cannot take one of its leaves (an
activation function of ``eqx.nn.MLP`` under ``nnx.jit``, ``nnx.grad`` or an
``nnx.scan`` carry), JAX's ``TypeError`` names neither the argument nor a fix;
:func:`explain_argument_error`, called only once that error is raised, replaces it
with one that does. Nothing is checked on the calls that succeed.
"""

from __future__ import annotations

import jax
import numpy as np

from ...graph._errors import WrongLibraryError, is_equinox_module, public_name

_TRACEABLE = (jax.Array, np.ndarray, np.generic, bool, int, float, complex)


def explain_argument_error(args: tuple, transform: str, error: TypeError) -> None:
  """Raises :class:`WrongLibraryError` in place of ``error`` (JAX's, from calling
  ``transform`` with ``args``) when an ``eqx.Module`` argument holds a leaf JAX cannot
  trace and ``error`` names that leaf's type; returns otherwise (the caller re-raises).

  Raises:
    WrongLibraryError: naming the argument, the leaf's path and type, and the fixes
      (``nnx.from_eqx``, or Equinox's filtered transforms).
  """
  message = str(error)
  for i, arg in enumerate(args):
    if not is_equinox_module(arg):
      continue
    for path, leaf in jax.tree_util.tree_leaves_with_path(arg):
      if isinstance(leaf, _TRACEABLE) or type(leaf).__name__ not in message:
        continue
      raise WrongLibraryError(
        f"{transform}: argument {i} is {public_name(type(arg))}, an Equinox module, which"
        f" {transform} takes as a plain pytree of data (as flax.nnx does); its leaf at"
        f" {jax.tree_util.keystr(path)} is a {type(leaf).__name__}, not an array, so JAX"
        " cannot trace it. Fix: to use it as a model, convert it with `nnx.from_eqx(...)`"
        " (its arrays become Params, everything else static) and pass that; or keep it in"
        " Equinox and use eqx.filter_jit / eqx.filter_grad, which keep non-array leaves"
        " static."
      ) from None

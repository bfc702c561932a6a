"""``assert_same_program``: an Equinox model and an NNX module run one program.

Both sides are written as functions of one list of arrays in the Equinox
``(model, state)`` leaf order (the NNX side rebuilds its module from them with
``nnx.merge``), so the two programs take and return the same arguments in the
same order and their stripped StableHLO can be compared as text. The arrays of
a conversion are the source's own objects, which is how the orders are matched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..graph.api._functional import merge, split
from ._helpers import stablehlo_text
from ._tolerance import assert_trees_equal


def _inexact(x: Any) -> bool:
  return bool(jnp.issubdtype(jnp.result_type(x), jnp.inexact))


def _eqx_parts(tree: Any) -> tuple[list, Callable[[list], Any]]:
  params, static = eqx.partition(tree, eqx.is_array)
  leaves, treedef = jax.tree.flatten(params)
  return leaves, lambda ls: eqx.combine(jax.tree.unflatten(treedef, ls), static)


def _nnx_parts(module: Any) -> tuple[list, Callable[[list], Any]]:
  graphdef, state = split(module)
  leaves, treedef = jax.tree.flatten(state)
  return leaves, lambda ls: merge(graphdef, jax.tree.unflatten(treedef, ls))


def _order(ref: list, other: list) -> list:
  """``perm`` with ``other[perm[i]] is ref[i]``."""
  where = {id(x): j for j, x in enumerate(other)}
  missing = [i for i, x in enumerate(ref) if id(x) not in where]
  if missing or len(ref) != len(other):
    raise AssertionError(
      f"assert_same_program: the two sides do not hold the same arrays (Equinox leaves"
      f" {missing[:5]} are not in the NNX module; {len(ref)} vs {len(other)} leaves)."
      " Pass a module and its conversion, which share their arrays."
    )
  return [where[id(x)] for x in ref]


def _program(leaves: list, rebuild: Callable, call: Callable, after: Callable):
  """``f(diff, rest, x, ct) -> (y, state after the call, vjp(ct))`` and its leaves."""
  diff = [i for i, x in enumerate(leaves) if _inexact(x)]
  rest = [i for i, x in enumerate(leaves) if not _inexact(x)]

  def merged(d: list, r: list) -> list:
    ls: list = [None] * len(leaves)
    for i, x in zip(diff, d):
      ls[i] = x
    for i, x in zip(rest, r):
      ls[i] = x
    return ls

  def f(d, r, x, ct):
    def g(d, x):
      obj = rebuild(merged(d, r))
      y, extra = call(obj, x)
      return y, after(obj, extra)

    if _inexact(x):
      y, vjp, new = jax.vjp(g, d, x, has_aux=True)
    else:
      y, vjp, new = jax.vjp(lambda d: g(d, x), d, has_aux=True)
    return y, new, vjp(ct)

  return f, [leaves[i] for i in diff], [leaves[i] for i in rest]


def assert_same_program(
  eqx_pair: tuple[Any, Any],
  module: Any,
  eqx_call: Callable[[Any, Any, Any], tuple[Any, Any]],
  nnx_call: Callable[[Any, Any], Any],
  x: Any,
) -> None:
  """Asserts that an Equinox model and an NNX module (one converted from the
  other) are one program: ``jax.jit`` lowers a forward pass with its
  vector-Jacobian product (gradients with respect to every inexact parameter
  and to ``x``) and the updated state to the same stripped StableHLO on both
  sides, and the compiled programs return the same bits.

  Args:
    eqx_pair: ``(model, state)``, the Equinox side (``state`` an
      ``eqx.nn.State`` or None).
    module: the NNX side; it must hold the very arrays of ``eqx_pair`` (as
      ``nnx.from_eqx``/``nnx.to_eqx_with_state`` leave them).
    eqx_call: ``(model, state, x) -> (y, new_state)``.
    nnx_call: ``(module, x) -> y``; state updates go to the module's Variables.
    x: the input (an array; no gradient is taken for an integer one).

  Raises:
    AssertionError: the arrays differ between the sides, or the StableHLO or
      the results differ.

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.testing import assert_same_program
    >>> e = eqx.nn.Linear(3, 2, key=jax.random.key(0))
    >>> assert_same_program((e, None), nnx.from_eqx(e),
    ...                     lambda m, s, x: (m(x), s), lambda m, x: m(x), jnp.ones(3))
  """
  e_leaves, e_rebuild = _eqx_parts(eqx_pair)
  n_leaves, n_rebuild = _nnx_parts(module)
  perm = _order(e_leaves, n_leaves)
  n_model = len(_eqx_parts(eqx_pair[0])[0])

  def n_rebuild_eqx_order(ls: list) -> Any:
    arranged: list = [None] * len(ls)
    for i, j in enumerate(perm):
      arranged[j] = ls[i]
    return n_rebuild(arranged)

  def e_after(pair: Any, new_state: Any) -> list:  # an Equinox model cannot change
    return _eqx_parts(new_state)[0]

  def n_after(m: Any, _: Any) -> list:  # the Variables holding the same state
    ls = _nnx_parts(m)[0]
    return [ls[j] for j in perm[n_model:]]

  def e_call(pair: Any, x: Any) -> Any:
    return eqx_call(pair[0], pair[1], x)

  def n_call(m: Any, x: Any) -> Any:
    return nnx_call(m, x), None

  fe, d, r = _program(e_leaves, e_rebuild, e_call, e_after)
  fn, _, _ = _program(e_leaves, n_rebuild_eqx_order, n_call, n_after)
  shapes = jax.eval_shape(lambda: e_call(e_rebuild(e_leaves), x)[0])  # on a fresh State
  ct = jax.tree.map(lambda s: jnp.ones(s.shape, s.dtype), shapes)
  args = (d, r, x, ct)
  le, ln = jax.jit(fe).lower(*args), jax.jit(fn).lower(*args)
  te, tn = stablehlo_text(le), stablehlo_text(ln)
  if te != tn:
    raise AssertionError(
      f"assert_same_program: the StableHLO differs.\n--- Equinox\n{te}\n--- NNX\n{tn}"
    )
  assert_trees_equal(le.compile()(*args), ln.compile()(*args))

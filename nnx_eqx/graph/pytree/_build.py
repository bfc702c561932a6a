"""Rebuilding plain Module nodes from their pytree children, with generated code.

JAX calls a node's unflatten once per Module each time it rebuilds a tree that
holds it (every ``eqx.filter_jit`` call, ``eqx.partition``, ``apply_updates``,
``jax.tree.map``), so this is the hottest path of the pytree view. As Equinox
does for its modules, the function that fills a new node's ``__dict__`` is
generated once per tuple of child names: item assignments by constant key are
about three times faster than ``dict.update(zip(keys, children))``.

A *plain* node is a Module whose subtree shares nothing with the rest of the
tree (see :class:`~._pytree_view.NodeDef`); its new ``__dict__`` is the node
definition's ``base`` (static attributes, the trace token and the record) with
the children put in.
"""

from __future__ import annotations

import functools
from typing import Any

from .. import _version
from ..tracing import _traces as _tracing
from . import _flags as _pytree_flags

RECORD = "_nnx_pv"
"""The attribute holding a node's ``(epoch, NodeDef)`` record."""

_EPOCH = _version._epoch
_MAX_GENERATED = 256  # more children (a long ``nnx.List``): the loop, not a long function


def rebase(nd: Any, ref: Any) -> None:
  """Sets ``nd.base`` for nodes rebuilt in the trace ``ref`` names, this epoch."""
  epoch = _EPOCH[0]
  base = nd.statics.copy()
  base["_nnx_trace"] = _tracing.entry(ref)[1]
  base[RECORD] = (epoch, nd)
  nd.base, nd.base_key = base, (ref, epoch)


_TEMPLATE = """
def build(nd, c):
  ref = READ_REF()
  key = nd.base_key
  if key[0] is not ref or key[1] is not EPOCH[0]:
    rebase(nd, ref)
  d = nd.base.copy()
{fill}
  obj = new(nd.cls)
  nd.set_dict(obj, d)
  if nd.flag is not None:
    m = c[-1]
    if m.__class__ is MODE:  # (the common case, inline: kept as ``obj.inference``)
      d[OVERRIDE] = m
    elif not apply_flag(obj, nd.flag, m):
      del d[RECORD]  # rebuilt in another mode: its record is computed again
  return obj
"""


def _generate(fill: str) -> Any:
  namespace = {
    "READ_REF": _tracing.READ_REF,
    "EPOCH": _EPOCH,
    "rebase": rebase,
    "new": object.__new__,
    "apply_flag": _pytree_flags.apply,
    "MODE": _pytree_flags.Mode,
    "OVERRIDE": _pytree_flags.OVERRIDE,
    "RECORD": RECORD,
  }
  exec(compile(_TEMPLATE.format(fill=fill), "<nnx_eqx node builder>", "exec"), namespace)  # noqa: S102
  return namespace["build"]


_BUILD_BY_LOOP = _generate("  for k, v in zip(nd.keys, c):\n    d[k] = v")


@functools.lru_cache(maxsize=1024)
def builder(keys: tuple) -> Any:
  """``build(nd, children)``: a new plain node of ``nd`` whose attributes
  ``keys`` are ``children`` (in order; a mode child, if any, last)."""
  if len(keys) > _MAX_GENERATED or not all(type(k) in (str, int) for k in keys):
    return _BUILD_BY_LOOP  # (no code is made of unusual names)
  return _generate("\n".join(f"  d[{k!r}] = c[{i}]" for i, k in enumerate(keys)) or "  pass")

"""The JAX hi-type API that hijax Variables are built on, chosen once at import.

Hijax Variables (``nnx_eqx.graph.variables._hijax``) need four things from JAX: ``HiType``
(a user-defined abstract value), a hi-type primitive base class with reverse-mode
rules (``HiPrim`` in jax >= 0.11.1, ``VJPHiPrimitive`` before), ``register_hitype``
and ``instantiate_zeros``. They are looked up by feature, not by version: first in
the public ``jax.experimental.hijax``, then in the private ``jax._src.hijax`` (and
``instantiate_zeros`` in ``jax._src.interpreters.ad``, where the public module
lacks it, as in jax 0.8). The primitive class must take ``vjp_fwd(nzs_in, *args)``
and have a ``transpose`` rule (jax 0.10 on; 0.8.x lacks both). Where nothing fits
(jax 0.7.2, the lowest jax nnx_eqx imports with), :data:`API` is None and
:data:`UNAVAILABLE` says which jax is needed.

The storage policy is chosen here too, by feature: :data:`BOX` is JAX's private
mutable hi-type ``jax._src.hijax.Box`` where jax has it (jax <= 0.11.0; it was
removed in 0.11.1) and the hi-type API above is usable, None otherwise. Where it
is set, hijax Variables keep their state in a Box and are *mutable* inside
transforms, as in flax.nnx 0.12.8 (the flax release for those jax versions, which
builds on the Box); where it is None they are immutable hi-type cells, as in
flax.nnx 0.12.12 (which requires jax >= 0.11.1, where the Box is gone).
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import Any, NamedTuple

import jax

#: The oldest jax release on which hijax Variables are tested.
OLDEST_JAX = "0.10.2"


class HijaxApi(NamedTuple):
  """The names hijax Variables use, and the module they came from."""

  HiType: type
  HiPrim: type
  register_hitype: Any
  instantiate_zeros: Any
  source: str


def _has_rules(prim: type) -> bool:
  """Whether ``prim`` takes the reverse-mode rules ``_hijax`` defines."""
  try:
    params = list(inspect.signature(prim.vjp_fwd).parameters)  # type: ignore[attr-defined]
  except (AttributeError, TypeError, ValueError):
    return False
  return params[1:2] == ["nzs_in"] and callable(getattr(prim, "transpose", None))


def resolve(
  public: ModuleType | None, private: ModuleType | None, ad: ModuleType | None
) -> HijaxApi | None:
  """The first of ``public`` (``jax.experimental.hijax``) and ``private``
  (``jax._src.hijax``) that has everything hijax Variables need; ``ad``
  (``jax._src.interpreters.ad``) supplies ``instantiate_zeros`` where they lack it.
  None where neither fits. Any of the three may be None (not importable)."""
  for source, mod in (("jax.experimental.hijax", public), ("jax._src.hijax", private)):
    if mod is None:
      continue
    prim = getattr(mod, "HiPrim", None) or getattr(mod, "VJPHiPrimitive", None)
    hitype = getattr(mod, "HiType", None)
    register = getattr(mod, "register_hitype", None)
    zeros = getattr(mod, "instantiate_zeros", None) or getattr(ad, "instantiate_zeros", None)
    if prim is None or hitype is None or register is None or zeros is None:
      continue
    if _has_rules(prim):
      return HijaxApi(hitype, prim, register, zeros, source)
  return None


def _optional_import(name: str) -> ModuleType | None:
  try:
    return importlib.import_module(name)
  except ImportError:
    return None


_PRIVATE = _optional_import("jax._src.hijax")
_AD = _optional_import("jax._src.interpreters.ad")

API: HijaxApi | None = resolve(
  _optional_import("jax.experimental.hijax"),
  _PRIVATE,
  _AD,
)


def find_box(private: ModuleType | None, api: HijaxApi | None) -> type | None:
  """JAX's mutable ``Box`` hi-type from ``private`` (``jax._src.hijax``), or None
  where it lacks one (jax >= 0.11.1) or hijax Variables are unavailable (``api``
  None). Where a class is returned, hijax Variables store their state in Boxes
  (flax.nnx 0.12.8's mutable semantics); where None, in immutable cells
  (flax.nnx 0.12.12's)."""
  box = getattr(private, "Box", None)
  return box if api is not None and isinstance(box, type) else None


#: JAX's ``Box`` class where hijax Variables store their state in one, else None
#: (typed Any: its ``get``/``set`` are JAX's, untyped).
BOX: Any = find_box(_PRIVATE, API)

#: The tracer classes of JAX's forward-mode and linearize traces (a Box read
#: through one of them is being differentiated; JAX cannot transpose that).
DIFF_TRACERS: tuple[type, ...] = tuple(
  c for c in (getattr(_AD, "JVPTracer", None), getattr(_AD, "LinearizeTracer", None)) if c
)

#: Why hijax Variables are unavailable where :data:`API` is None.
UNAVAILABLE = (
  f"hijax Variables (hijax=True) are JAX hi-types and need jax >= {OLDEST_JAX}"
  f" (jax.experimental.hijax with hi-type primitives that have transpose rules);"
  f" jax {jax.__version__} lacks them. Fix: install jax>={OLDEST_JAX} (and a matching"
  " jaxlib), or create the Variable with hijax=False (the default;"
  " `nnx.var_defaults(hijax=False)` for a block)."
)

"""What each part of an NNX module's pytree rebuild costs, against Equinox.

Rebuilds (``jax.tree.unflatten``) 500 ``Linear``-shaped layers (1,000
Variables) built from stand-in classes, adding one feature of nnx_eqx's
Modules and Variables at a time, each side by side with the same number of
``eqx.nn.Linear`` layers in this process:

1. a module node and two Variable nodes whose unflatten does the least work
   (``__slots__``, plain attribute stores): the cost of the nested structure
   itself (Variables as pytree nodes, as ``is_leaf`` needs);
2. + a trace token per Variable, read as nnx_eqx reads it (what
   ``TraceContextError`` checks);
3. + a Variable class with a ``__setattr__`` of its own (metadata as
   attributes, as in flax.nnx), so a rebuilt one gets its ``__dict__`` assigned;
4. + Modules holding a ``__dict__`` of 11 static attributes and a trace token.

The stand-ins read the trace token through nnx_eqx's own functions; the library
inlines that read. ``main`` returns one row per step and implementation:

    python benchmarks/pytree_floor.py            # full run
    python benchmarks/pytree_floor.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import timeit

import equinox as eqx
import jax
import jax.numpy as jnp

from nnx_eqx.graph.tracing._traces import CURRENT, READ_REF, entry

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import print_table  # noqa: E402

_new = object.__new__
_LAYERS = 500


def _best_us(fn, n: int, repeat: int) -> float:
  fn()
  return min(timeit.repeat(fn, number=n, repeat=repeat)) / n * 1e6


def _stand_ins(token: bool, own_setattr: bool, module_dict: bool) -> list:
  """500 stand-in layers whose classes are registered as pytrees as described."""

  def tok():  # the current trace's token, as nnx_eqx's unflatten reads it (inlined there)
    ref = READ_REF()
    e = CURRENT[0]
    return e[1] if e[0] is ref else entry(ref)[1]

  if own_setattr:

    class V:
      def __setattr__(self, k, v):
        raise AttributeError(k)

    set_dict = V.__dict__["__dict__"].__set__

    def vunf(aux, ch):
      v = _new(V)
      set_dict(v, {"_value": ch[0], "_trace": tok()})
      return v

    def vflat(v):
      return (v.__dict__["_value"],), None
  else:

    class V:  # type: ignore[no-redef]
      __slots__ = ("_value", "_trace")

    def vunf(aux, ch):
      v = _new(V)
      v._value = ch[0]
      if token:
        v._trace = tok()
      return v

    def vflat(v):
      return (v._value,), None

  jax.tree_util.register_pytree_node(V, vflat, vunf)
  if module_dict:

    class M:
      pass

    base = {f"static{i}": i for i in range(11)}

    def munf(aux, ch):
      d = base.copy()
      d["bias"], d["kernel"], d["_trace"] = ch[0], ch[1], tok()
      o = _new(M)
      object.__setattr__(o, "__dict__", d)
      return o
  else:

    class M:  # type: ignore[no-redef]
      __slots__ = ("bias", "kernel")

    def munf(aux, ch):
      o = _new(M)
      o.bias, o.kernel = ch[0], ch[1]
      return o

  jax.tree_util.register_pytree_node(M, lambda o: ((o.bias, o.kernel), None), munf)
  return [
    munf(None, (vunf(None, (jnp.ones(4),)), vunf(None, (jnp.ones((4, 4)),))))
    for _ in range(_LAYERS)
  ]


def rows(n: int, repeat: int) -> list[dict]:
  keys = jax.random.split(jax.random.key(0), _LAYERS)
  leaves_e, tree_e = jax.tree.flatten([eqx.nn.Linear(4, 4, key=k) for k in keys])
  steps = [
    ("module + 2 Variable nodes, least work", (False, False, False)),
    ("+ a trace token per Variable", (True, False, False)),
    ("+ Variables with a __setattr__ of their own", (True, True, False)),
    ("+ Modules with a __dict__ of 11 statics and a token", (True, True, True)),
  ]
  out = []
  for label, flags in steps:
    leaves, tree = jax.tree.flatten(_stand_ins(*flags))
    case = f"unflatten 1000 Variables: {label}"
    stand_in = _best_us(lambda: jax.tree.unflatten(tree, leaves), n, repeat)  # noqa: B023
    theirs = _best_us(lambda: jax.tree.unflatten(tree_e, leaves_e), n, repeat)
    out.append({"case": case, "impl": "equinox model", "us": theirs, "baseline": True})
    out.append({"case": case, "impl": "stand-in", "us": stand_in})
  return out


def main(argv: list[str] | None = None) -> list[dict]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats")
  args = p.parse_args(argv)
  out = rows(*((50, 3) if args.quick else (200, 9)))
  print_table("Parts of a module's pytree rebuild, with stand-in classes (ratios vs Equinox)", out)
  return out


if __name__ == "__main__":
  main()

"""NNX modules as JAX pytrees: ``jax.tree.flatten`` and ``jax.tree.unflatten`` of
an NNX module against the equivalent Equinox model, side by side in one process.

Models: ``n/2`` ``Linear(4, 4)`` layers (``n`` Variables), as

* a native NNX module (``nnx.List`` of ``nnx.Linear``) vs an ``eqx.Module``
  holding a list of ``eqx.nn.Linear`` (the same layers written in Equinox);
* ``nnx.from_eqx`` of that Equinox model vs the Equinox model itself;
* with flax installed (the ``bench`` extra), a ``flax.nnx`` column on the native
  rows: the same module written with ``flax.nnx`` (flax 0.12 modules are nested
  pytrees too).

Rows: flatten of the model as built, flatten of a model rebuilt by a pytree map
(what ``eqx.filter_jit`` and ``eqx.apply_updates`` hand back), and unflatten,
at 10 and 1,000 Variables (target: ratio <= 1.10 against the Equinox model).

    python benchmarks/pytree.py            # full run
    python benchmarks/pytree.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable

import equinox as eqx
import jax

import nnx_eqx as nnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import flax_nnx, interleaved, print_table  # noqa: E402

fnnx = flax_nnx()


class EqxLayers(eqx.Module):
  layers: list


class NnxLayers(nnx.Module):
  def __init__(self, n_layers: int, rngs: nnx.Rngs):
    self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(n_layers)])


def models(n_vars: int) -> dict[str, tuple]:
  """``{comparison: (equinox model, nnx model, flax.nnx model or None)}`` with
  ``n_vars`` Variables each."""
  n_layers = max(1, n_vars // 2)
  keys = jax.random.split(jax.random.key(0), n_layers)
  e = EqxLayers([eqx.nn.Linear(4, 4, key=k) for k in keys])
  f = None
  if fnnx is not None:
    f = fnnx.Module()
    f.layers = fnnx.List([fnnx.Linear(4, 4, rngs=fnnx.Rngs(0)) for _ in range(n_layers)])
  return {
    "native": (e, NnxLayers(n_layers, nnx.Rngs(0)), f),
    "from_eqx": (e, nnx.from_eqx(e), None),
  }


def _cases(m: object) -> dict[str, Callable[[], None]]:
  """``{operation: timed function}`` of one model."""
  rebuilt = jax.tree.map(lambda x: x, m)
  leaves, treedef = jax.tree.flatten(m)
  return {
    "flatten": lambda: _none(jax.tree.flatten(m)),
    "flatten (rebuilt)": lambda: _none(jax.tree.flatten(rebuilt)),
    "unflatten": lambda: _none(jax.tree.unflatten(treedef, leaves)),
  }


def _none(_: object) -> None:
  return None


def rows(sizes, n, rounds) -> list[dict]:
  out = []
  for size in sizes:
    for label, (e, m, f) in models(size).items():
      assert len(jax.tree.leaves(e)) == len(jax.tree.leaves(m))
      impls = {"equinox model": _cases(e), "nnx_eqx module": _cases(m)}
      if f is not None:
        impls["flax.nnx module"] = _cases(f)
      for op in impls["equinox model"]:
        case = f"{op}, {size} Variables ({label})"
        times = interleaved(
          {impl: fns[op] for impl, fns in impls.items()},
          n=max(1, n // max(1, size // 10)),
          rounds=rounds,
          warmup=2,
        )
        for impl, t in times.items():
          out.append(
            {"case": case, "impl": impl, "us": t * 1e6, "baseline": impl == "equinox model"}
          )
  return out


def main(argv: list[str] | None = None) -> list[dict]:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--quick", action="store_true", help="fewer repeats")
  args = p.parse_args(argv)
  n, rounds = (200, 3) if args.quick else (2000, 7)
  out = rows((10, 1000), n, rounds)
  print_table("jax.tree flatten / unflatten (target: nnx_eqx <= 1.10x the Equinox model)", out)
  return out


if __name__ == "__main__":
  main()

"""A converted Equinox transformer, unrolled (Equinox's list of blocks) vs stacked and
scanned (``nnx.stack`` + ``nnx.scan``, with and without ``nnx.remat``): compile time
and step time of a train step by depth, and compiled temporary memory.

Used by ``scan_depth.py``. Every train step is value_and_grad of a squared error
plus SGD, jitted: ``eqx.filter_jit`` for the Equinox model (the unrolled loop its
``__call__`` runs, and Equinox's own scan idiom, ``jax.lax.scan`` over
``eqx.partition`` of the ``eqx.filter_vmap``-stacked blocks, under ``jax.jit`` as every
input is an array), ``nnx.jit`` for the converted one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from _common import compile_seconds, interleaved, temp_bytes

import nnx_eqx as nnx

LR = 0.01
HEADS = 4


class Block(eqx.Module):
  """Pre-norm attention + MLP (4x hidden), residual, on one ``(seq, d)`` sequence."""

  norm1: eqx.nn.LayerNorm
  attn: eqx.nn.MultiheadAttention
  norm2: eqx.nn.LayerNorm
  mlp: eqx.nn.MLP

  def __init__(self, d: int, key: Any):
    k1, k2 = jax.random.split(key)
    self.norm1, self.norm2 = eqx.nn.LayerNorm(d), eqx.nn.LayerNorm(d)
    self.attn = eqx.nn.MultiheadAttention(HEADS, d, key=k1)
    self.mlp = eqx.nn.MLP(d, d, 4 * d, 1, activation=jax.nn.gelu, key=k2)

  def __call__(self, x):
    h = jax.vmap(self.norm1)(x)
    x = x + self.attn(h, h, h)
    return x + jax.vmap(self.mlp)(jax.vmap(self.norm2)(x))


class Transformer(eqx.Module):
  blocks: list

  def __init__(self, depth: int, d: int, key: Any):
    self.blocks = [Block(d, k) for k in jax.random.split(key, depth)]

  def __call__(self, x):
    for block in self.blocks:
      x = block(x)
    return x


def _sq(pred, y):
  return ((pred - y) ** 2).mean()


def eqx_unrolled_step() -> Callable:
  """Equinox's train step over the unrolled model (``eqx.filter_jit``)."""

  @eqx.filter_jit
  def step(model, x, y):
    loss, grads = eqx.filter_value_and_grad(lambda m: _sq(jax.vmap(m)(x), y))(model)
    return loss, eqx.apply_updates(model, jax.tree.map(lambda g: -LR * g, grads))

  return step


def eqx_unrolled_jax_step(static: Any) -> Callable:
  """The same step under ``jax.jit`` over ``eqx.partition``'s arrays: the program
  ``eqx.filter_jit`` compiles, with jax's ``memory_analysis`` reachable."""

  @jax.jit
  def step(dynamic, x, y):
    def loss_fn(p):
      return _sq(jax.vmap(eqx.combine(p, static))(x), y)

    loss, grads = jax.value_and_grad(loss_fn)(dynamic)
    return loss, jax.tree.map(lambda p, g: p - LR * g, dynamic, grads)

  return step


def eqx_scan_step(static: Any) -> Callable:
  """Equinox's scan-over-layers idiom: ``lax.scan`` over the stacked blocks' arrays."""

  def forward(dynamic, x):
    def body(h, layer):
      return eqx.combine(layer, static)(h), None

    return jax.lax.scan(body, x, dynamic)[0]

  @jax.jit  # every input is an array
  def step(dynamic, x, y):
    loss, grads = jax.value_and_grad(lambda p: _sq(jax.vmap(lambda s: forward(p, s))(x), y))(
      dynamic
    )
    return loss, jax.tree.map(lambda p, g: p - LR * g, dynamic, grads)

  return step


def nnx_scan_step(policy: Any = None, remat: bool = False) -> Callable:
  """``nnx.scan`` over ``nnx.stack`` of the converted blocks (``nnx.remat`` optional)."""

  def body(x, block):
    return block(x)

  if remat:
    body = nnx.remat(body, policy=policy)
  run = nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)

  @nnx.jit
  def step(blocks, x, y):
    def loss_fn(blocks):
      return _sq(jax.vmap(lambda s: run(s, blocks))(x), y)

    loss, grads = nnx.value_and_grad(loss_fn)(blocks)
    params = nnx.state(blocks, nnx.Param)
    nnx.update(blocks, jax.tree.map(lambda p, g: p - LR * g, params, grads))
    return loss

  return step


def _models(depth: int, d: int):
  eqx_model = Transformer(depth, d, jax.random.key(0))
  blocks = nnx.stack(nnx.from_eqx(eqx_model).blocks)
  stacked = nnx.to_eqx(blocks)  # Equinox's stacked layout (eqx.filter_vmap's)
  return eqx_model, blocks, eqx.partition(stacked, eqx.is_array)


def _data(d: int, batch: int, seq: int):
  x = jax.random.normal(jax.random.key(1), (batch, seq, d))
  return x, jnp.roll(x, 1, axis=-1)


IMPLS = {
  "eqx": "Equinox, unrolled (eqx.filter_jit)",
  "eqx_scan": "Equinox, lax.scan over stacked blocks",
  "nnx": "nnx.stack + nnx.scan (nnx.jit)",
}


def depth_rows(depths, d, batch, seq, n, rounds, repeats) -> tuple[list[dict], list[dict]]:
  """Compile-time and step-time rows, one case per depth."""
  x, y = _data(d, batch, seq)
  compile_rows, step_rows = [], []
  for depth in depths:
    eqx_model, blocks, (dynamic, static) = _models(depth, d)
    case = f"{depth} blocks, d={d}"
    secs = {
      "eqx": compile_seconds(eqx_unrolled_step, eqx_model, x, y, repeats=repeats),
      "eqx_scan": compile_seconds(lambda: eqx_scan_step(static), dynamic, x, y, repeats=repeats),
      "nnx": compile_seconds(nnx_scan_step, blocks, x, y, repeats=repeats),
    }
    eqx_step, scan_step, nnx_step = eqx_unrolled_step(), eqx_scan_step(static), nnx_scan_step()
    # the Equinox steps return the updated model, not fed back: every call times one update
    times = interleaved(
      {
        "eqx": lambda: eqx_step(eqx_model, x, y)[0],
        "eqx_scan": lambda: scan_step(dynamic, x, y)[0],
        "nnx": lambda: nnx_step(blocks, x, y),
      },
      n,
      rounds,
      warmup=2,
    )
    for k, impl in IMPLS.items():
      base = {"case": case, "impl": impl, "baseline": k == "eqx"}
      compile_rows.append({**base, "s": secs[k]})
      step_rows.append({**base, "ms": times[k] * 1e3})
    print(f"  measured {depth} converted Equinox blocks", flush=True)
  return compile_rows, step_rows


def memory_rows(depth, d, batch, seq) -> list[dict]:
  """Compiled temporary memory of the train step, with and without remat."""
  x, y = _data(d, batch, seq)
  eqx_model, blocks, (dyn, st) = _models(depth, d)
  dynamic, static = eqx.partition(eqx_model, eqx.is_array)
  case = f"{depth} blocks, d={d}, batch {batch}x{seq}"
  policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
  measured = {
    "Equinox, unrolled": temp_bytes(eqx_unrolled_jax_step(static), dynamic, x, y),
    "Equinox, lax.scan over stacked blocks": temp_bytes(eqx_scan_step(st), dyn, x, y),
    "nnx.scan, no remat": temp_bytes(nnx_scan_step(), blocks, x, y),
    "nnx.scan + nnx.remat (save dots without batch dims)": temp_bytes(
      nnx_scan_step(policy, remat=True), blocks, x, y
    ),
    "nnx.scan + nnx.remat (save nothing)": temp_bytes(
      nnx_scan_step(jax.checkpoint_policies.nothing_saveable, remat=True), blocks, x, y
    ),
  }
  return [
    {"case": case, "impl": k, "MiB": v / 2**20, "baseline": i == 0}
    for i, (k, v) in enumerate(measured.items())
  ]


def summary(compile_rows: list[dict]) -> None:
  """Prints the depth growth of each implementation's compile time."""
  by_impl: dict[str, list[dict]] = {}
  for r in compile_rows:
    by_impl.setdefault(r["impl"], []).append(r)
  for impl, rows in by_impl.items():
    first, last = rows[0], rows[-1]
    target = " (target <= 1.5x)" if impl == IMPLS["nnx"] else ""
    print(
      f"  {impl}: compile {last['case']} / {first['case']}: {last['s'] / first['s']:.2f}x{target}"
    )

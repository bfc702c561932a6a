"""Random Equinox models built from the bridge's layers: their architectures and cases.

An architecture is a hashable tuple of layer configurations; ``_template`` builds
its model once (abstractly) and ``_randomize`` redraws the weights with NumPy.
:class:`EqxCase` is a model with how to call it, and :data:`EQX_ARCHITECTURES`
a fixed set of architectures using every built-in layer pair. None of this needs
hypothesis; the strategies that draw cases are in ``_eqx_strategies``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}


# --------------------------------------------------------------------------
# User-style modules (converted generically, holding registered layers)
# --------------------------------------------------------------------------
class Residual(eqx.Module):
  """``x + layer(x)``."""

  layer: eqx.Module

  def __call__(self, x, *, key=None):
    return x + self.layer(x)


class CellStep(eqx.Module):
  """One recurrent step from a learnt initial hidden state; returns the new hidden."""

  cell: eqx.Module
  h0: jax.Array

  def __call__(self, x, *, key=None):
    if isinstance(self.cell, eqx.nn.LSTMCell):
      return self.cell(x, (self.h0, jnp.zeros_like(self.h0)))[0]
    return self.cell(x, self.h0)


class ScanCell(eqx.Module):
  """Runs a cell over a ``(time, features)`` sequence with ``lax.scan``."""

  cell: eqx.Module
  h0: jax.Array

  def __call__(self, xs, *, key=None):
    def step(h, x):
      if isinstance(self.cell, eqx.nn.LSTMCell):
        h = self.cell(x, h)
        return h, h[0]
      h = self.cell(x, h)
      return h, h

    h0 = (self.h0, jnp.zeros_like(self.h0)) if isinstance(self.cell, eqx.nn.LSTMCell) else self.h0
    return jax.lax.scan(step, h0, xs)[1]


class SelfAttention(eqx.Module):
  """``mha(x, x, x)`` on a ``(time, features)`` sequence."""

  mha: eqx.nn.MultiheadAttention

  def __call__(self, x, *, key=None):
    return self.mha(x, x, x)


class PerStep(eqx.Module):
  """Applies a per-vector layer at every step of a sequence (``jax.vmap``)."""

  layer: eqx.Module

  def __call__(self, x, *, key=None):
    return jax.vmap(self.layer)(x)


class TiedLM(eqx.Module):
  """Token ids -> logits, with the output projection tied to the embedding."""

  shared: eqx.nn.Shared
  body: eqx.nn.Sequential

  def __call__(self, tokens, *, key=None):
    emb, out = self.shared()
    return jax.vmap(out)(self.body(jax.vmap(emb)(tokens)))


# --------------------------------------------------------------------------
# Architectures (hashable configs) and their cached templates
# --------------------------------------------------------------------------
def _key(i: int) -> jax.Array:
  return jax.random.fold_in(jax.random.key(0), i)


def _layer(cfg: tuple, i: int) -> Any:
  kind, *a = cfg
  k = _key(i)
  if kind == "linear":
    return eqx.nn.Linear(a[0], a[1], use_bias=a[2], key=k)
  if kind == "mlp":
    return eqx.nn.MLP(a[0], a[1], a[2], a[3], activation=ACTIVATIONS[a[4]], key=k)
  if kind == "layernorm":
    return eqx.nn.LayerNorm(a[0], use_weight=a[1], use_bias=a[2])
  if kind == "rmsnorm":
    return eqx.nn.RMSNorm(a[0], use_bias=a[1])
  if kind == "identity":
    return eqx.nn.Identity()
  if kind == "lambda":
    return eqx.nn.Lambda(ACTIVATIONS[a[0]])
  if kind == "dropout":
    return eqx.nn.Dropout(a[0], inference=True)
  if kind in ("gru", "lstm", "scan_gru", "scan_lstm"):
    cell_t = eqx.nn.GRUCell if kind.endswith("gru") else eqx.nn.LSTMCell
    cell = cell_t(a[0], a[1], use_bias=a[2], key=k)
    wrap = ScanCell if kind.startswith("scan") else CellStep
    return wrap(cell, jnp.zeros(a[1]))
  if kind == "residual":
    return Residual(eqx.nn.Linear(a[0], a[0], key=k))
  if kind == "conv":
    n, cin, cout, ks, stride, pad, dil, groups, mode = a
    conv_t = {1: eqx.nn.Conv1d, 2: eqx.nn.Conv2d, 3: eqx.nn.Conv3d}[n]
    return conv_t(cin, cout, ks, stride, pad, dil, groups=groups, padding_mode=mode, key=k)
  if kind == "pool":
    avg, n, ks, stride, ceil = a
    name = ("AvgPool" if avg else "MaxPool") + f"{n}d"
    return getattr(eqx.nn, name)(ks, stride, use_ceil=ceil)
  if kind == "batchnorm":
    return eqx.nn.BatchNorm(a[0], "batch", mode=a[1], momentum=0.9, inference=a[2])
  if kind == "flatten":
    return eqx.nn.Lambda(jnp.ravel)
  if kind == "attention":
    d, heads, qb, ob = a
    mha = eqx.nn.MultiheadAttention(heads, d, use_query_bias=qb, use_output_bias=ob, key=k)
    return SelfAttention(mha)
  if kind == "per_step":
    return PerStep(_layer(a[0], i + 1000))
  raise ValueError(cfg)


def _tie_where(t):
  return t[1].weight


def _tie_get(t):
  return t[0].weight


def _build(arch: tuple) -> tuple[Any, Any]:
  kind, _, layers, extra = arch
  seq = eqx.nn.Sequential([_layer(c, i) for i, c in enumerate(layers)])
  if kind == "tokens":
    vocab, d = extra
    emb = eqx.nn.Embedding(vocab, d, key=_key(5000))
    out = eqx.nn.Linear(d, vocab, key=_key(5001))
    return TiedLM(eqx.nn.Shared((emb, out), _tie_where, _tie_get), seq), None
  if any(c[0] == "batchnorm" for c in layers):
    return eqx.nn.make_with_state(lambda: seq)()
  return seq, None


@functools.lru_cache(maxsize=1024)
def _template(arch: tuple) -> tuple[Any, Any]:
  # Built abstractly (no computation, so no compilation per new shape); the
  # weights are drawn with NumPy by `_randomize`.
  return eqx.filter_eval_shape(_build, arch)


@dataclasses.dataclass(frozen=True)
class EqxCase:
  """A random Equinox model and how to call it.

  Attributes:
    model: the ``eqx.Module``.
    state: its ``eqx.nn.State`` (models with BatchNorm), else None.
    kind: ``"vector"``, ``"image"``, ``"sequence"`` or ``"tokens"``.
    input_shape: shape of one input (stateful models take a batch of them).
    batch: batch size (3) for stateful models (called under ``jax.vmap`` with
      ``axis_name="batch"``), else None.
    vocab: number of token ids for ``"tokens"`` models.
    arch: the hashable architecture the model was built from.
  """

  model: Any
  state: Any
  kind: str
  input_shape: tuple
  batch: int | None
  vocab: int | None
  arch: tuple

  def apply(self, model: Any, x: jax.Array, state: Any = None) -> Any:
    """Calls an Equinox model of this case: ``y``, or ``(y, state)`` when stateful.

    Example:
      >>> import jax.numpy as jnp
      >>> from hypothesis import find
      >>> from nnx_eqx.testing import EQX_ARCHITECTURES, eqx_models
      >>> case = find(eqx_models(architectures=EQX_ARCHITECTURES[:1]), lambda c: True)
      >>> case.apply(case.model, jnp.ones(3)).shape
      (2,)
    """
    if state is None:
      return model(x)
    return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def _randomize(tree: Any, seed: int, positive: bool = False) -> Any:
  rng = np.random.default_rng(seed)

  def draw(x):
    if isinstance(x, (jax.Array, np.ndarray, jax.ShapeDtypeStruct)):
      if jnp.issubdtype(x.dtype, jnp.floating):
        v = rng.standard_normal(x.shape) * 0.5
        return jnp.asarray(np.abs(v) + 0.1 if positive else v, x.dtype)
      if jnp.issubdtype(x.dtype, jnp.integer):
        v = rng.integers(0, 4, x.shape)
        if getattr(x, "weak_type", False) and not x.shape:  # e.g. BatchNorm's counter
          return jnp.asarray(int(v))
        return jnp.asarray(v, x.dtype)
      if x.dtype == jnp.bool_:
        return jnp.asarray(rng.integers(0, 2, x.shape).astype(bool))
    return x

  return jtu.tree_map(draw, tree)


#: A fixed set of architectures that together use every built-in layer pair
#: (each Conv and pooling dimension, BatchNorm in both modes, attention, both
#: cells, the tied embedding); pass it as ``eqx_models(architectures=...)``.
EQX_ARCHITECTURES: tuple = (
  (
    "vector",
    (3,),
    (
      ("linear", 3, 4, True),
      ("lambda", "relu"),
      ("mlp", 4, 2, 3, 2, "tanh"),
      ("layernorm", 2, True, True),
      ("rmsnorm", 2, True),
      ("dropout", 0.5),
      ("identity",),
    ),
    None,
  ),
  (
    "vector",
    (2,),
    (("gru", 2, 3, True), ("lstm", 3, 2, False), ("residual", 2), ("mlp", 2, 1, 2, 0, "relu")),
    None,
  ),
  (
    "image",
    (2, 6, 6),
    (
      ("conv", 2, 2, 3, 3, 1, 1, 1, 1, "ZEROS"),
      ("pool", False, 2, 2, 2, False),
      ("lambda", "relu"),
      ("conv", 2, 3, 3, 1, 1, "SAME", 1, 3, "REPLICATE"),
      ("pool", True, 2, 2, 1, True),
      ("flatten",),
      ("linear", 12, 2, True),
    ),
    None,
  ),
  (
    "image",
    (1, 7),
    (
      ("conv", 1, 1, 2, 3, 2, "SAME", 1, 1, "CIRCULAR"),
      ("pool", True, 1, 2, 1, False),
      ("conv", 1, 2, 2, 2, 1, 0, 2, 2, "ZEROS"),
      ("pool", False, 1, 1, 1, False),
    ),
    None,
  ),
  (
    "image",
    (1, 4, 4, 4),
    (
      ("conv", 3, 1, 2, 2, 1, 1, 1, 1, "ZEROS"),
      ("pool", False, 3, 2, 2, True),
      ("pool", True, 3, 1, 1, False),
    ),
    None,
  ),
  (
    "image",
    (2, 5, 5),
    (
      ("conv", 2, 2, 3, 3, 1, 0, 1, 1, "ZEROS"),
      ("batchnorm", 3, "batch", False),
      ("lambda", "relu"),
      ("batchnorm", 3, "ema", False),
      ("flatten",),
      ("linear", 27, 2, True),
    ),
    None,
  ),
  ("image", (2, 4), (("batchnorm", 2, "batch", True), ("batchnorm", 2, "ema", True)), None),
  (
    "sequence",
    (3, 4),
    (
      ("attention", 4, 2, True, True),
      ("per_step", ("layernorm", 4, True, True)),
      ("scan_gru", 4, 4, True),
      ("scan_lstm", 4, 4, False),
      ("per_step", ("mlp", 4, 4, 3, 1, "tanh")),
    ),
    None,
  ),
  (
    "tokens",
    (4,),
    (("attention", 4, 1, False, True), ("per_step", ("rmsnorm", 4, True))),
    (5, 4),
  ),
)

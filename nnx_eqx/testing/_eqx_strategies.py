"""Hypothesis strategies for random Equinox models built from the bridge's layers.

``eqx_models()`` draws an :class:`EqxCase`: an ``eqx.nn.Sequential`` (or a tied
language model) of small, shape-compatible layers from ``eqx.nn`` — Linear,
MLP, Conv1d/2d/3d, pooling, Embedding, LayerNorm, RMSNorm, BatchNorm (with its
``eqx.nn.State``), Dropout, MultiheadAttention, GRUCell, LSTMCell, Lambda,
Identity, Shared — plus user-style modules that hold them (``Residual``,
``SelfAttention``, ``ScanCell``, ...). ``eqx_inputs(case)`` draws a matching input.
Models are built once per architecture and their weights redrawn with NumPy,
so drawing is cheap.

>>> import equinox as eqx, nnx_eqx as nnx
>>> from hypothesis import given, settings
>>> from nnx_eqx.testing import eqx_models
>>> @settings(max_examples=5, database=None)
... @given(eqx_models(stateful=False))
... def law(case):
...   assert bool(eqx.tree_equal(nnx.to_eqx(nnx.from_eqx(case.model)), case.model))
>>> law()
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from ._eqx import ACTIVATIONS, EqxCase, _randomize, _template


@st.composite
def _vector_layers(draw, d: int, n: int) -> tuple[tuple, int]:
  cfgs: list[tuple] = []
  for _ in range(n):
    kind = draw(
      st.sampled_from(
        ["linear", "mlp", "layernorm", "rmsnorm", "identity", "lambda", "dropout"]
        + ["gru", "lstm", "residual"]
      )
    )
    out = draw(st.integers(1, 4))
    if kind == "linear":
      cfgs.append(("linear", d, out, draw(st.booleans())))
      d = out
    elif kind == "mlp":
      width, depth = draw(st.integers(1, 4)), draw(st.integers(0, 2))
      cfgs.append(("mlp", d, out, width, depth, draw(st.sampled_from(sorted(ACTIVATIONS)))))
      d = out
    elif kind == "layernorm":
      cfgs.append(("layernorm", d, draw(st.booleans()), draw(st.booleans())))
    elif kind == "rmsnorm":
      cfgs.append(("rmsnorm", d, draw(st.booleans())))
    elif kind == "lambda":
      cfgs.append(("lambda", draw(st.sampled_from(sorted(ACTIVATIONS)))))
    elif kind == "dropout":
      cfgs.append(("dropout", draw(st.sampled_from([0.0, 0.5]))))
    elif kind in ("gru", "lstm"):
      cfgs.append((kind, d, out, draw(st.booleans())))
      d = out
    elif kind == "residual":
      cfgs.append(("residual", d))
    else:
      cfgs.append(("identity",))
  return tuple(cfgs), d


def _conv_out(size: int, k: int, stride: int, pad: Any, dil: int) -> int:
  if pad == "SAME":
    return -(-size // stride)
  lo = 0 if pad == "VALID" else pad
  return (size + 2 * lo - dil * (k - 1) - 1) // stride + 1


@st.composite
def _image_layers(draw, n: int, c: int, size: int, stateful: bool, max_layers: int):
  cfgs: list[tuple] = []
  for _ in range(draw(st.integers(1, max_layers))):
    options = ["conv", "pool", "lambda"] + (["batchnorm"] if stateful else [])
    kind = draw(st.sampled_from(options))
    if kind == "conv":
      cout = draw(st.integers(1, 3))
      k, stride, dil = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
      pad = draw(st.sampled_from([0, 1, "SAME", "VALID"]))
      mode = draw(st.sampled_from(["ZEROS", "ZEROS", "CIRCULAR", "REPLICATE"]))
      if mode != "ZEROS" and pad == 1 and size < 2:
        mode = "ZEROS"
      groups = c if (c > 1 and cout % c == 0 and draw(st.booleans())) else 1
      new = _conv_out(size, k, stride, pad, dil)
      if new < 1:
        continue
      cfgs.append(("conv", n, c, cout, k, stride, pad, dil, groups, mode))
      c, size = cout, new
    elif kind == "pool":
      k, stride = draw(st.integers(1, 2)), draw(st.integers(1, 2))
      ceil = draw(st.booleans()) and stride <= k  # Equinox rejects a larger ceil padding
      if size < k:
        continue
      cfgs.append(("pool", draw(st.booleans()), n, k, stride, ceil))
      size = (size - k) // stride + 1 + (1 if ceil and (size - k) % stride else 0)
    elif kind == "batchnorm":
      cfgs.append(("batchnorm", c, draw(st.sampled_from(["batch", "ema"])), draw(st.booleans())))
    else:
      cfgs.append(("lambda", draw(st.sampled_from(sorted(ACTIVATIONS)))))
  if draw(st.booleans()):
    cfgs.append(("flatten",))
    cfgs.append(("linear", c * size**n, draw(st.integers(1, 3)), True))
  return tuple(cfgs)


@st.composite
def _sequence_layers(draw, d: int, max_layers: int) -> tuple:
  cfgs: list[tuple] = []
  for _ in range(draw(st.integers(1, max_layers))):
    kind = draw(st.sampled_from(["attention", "per_step", "scan_gru", "scan_lstm"]))
    if kind == "attention":
      heads = draw(st.sampled_from([h for h in (1, 2) if d % h == 0]))
      cfgs.append(("attention", d, heads, draw(st.booleans()), draw(st.booleans())))
    elif kind == "per_step":
      inner = draw(st.sampled_from(["linear", "layernorm", "rmsnorm", "mlp"]))
      cfg = {
        "linear": ("linear", d, d, True),
        "layernorm": ("layernorm", d, True, True),
        "rmsnorm": ("rmsnorm", d, True),
        "mlp": ("mlp", d, d, 3, 1, "tanh"),
      }[inner]
      cfgs.append(("per_step", cfg))
    else:
      cfgs.append((kind, d, d, draw(st.booleans())))
  return tuple(cfgs)


@st.composite
def eqx_models(
  draw,
  kinds: tuple[str, ...] = ("vector", "image", "sequence", "tokens"),
  stateful: bool | None = None,
  max_layers: int = 3,
  architectures: tuple | None = None,
) -> EqxCase:
  """A random small Equinox model (an :class:`EqxCase`) built from ``eqx.nn`` layers.

  Args:
    kinds: input kinds to draw from: ``"vector"`` ``(d,)``, ``"image"``
      ``(channels, *spatial)`` with 1-3 spatial dims, ``"sequence"``
      ``(time, features)``, ``"tokens"`` ``(time,)`` int ids (tied embedding).
    stateful: True: image models with BatchNorm; False: never; None: either.
    max_layers: most layers in the model's ``eqx.nn.Sequential``.
    architectures: draw the architecture from these (e.g.
      :data:`EQX_ARCHITECTURES`) instead of at random; only weights and inputs
      then vary, so a test can compile one function per architecture.

  Returns:
    A strategy of :class:`EqxCase`.

  Example:
    >>> from hypothesis import find
    >>> from nnx_eqx.testing import EQX_ARCHITECTURES, eqx_models
    >>> case = find(eqx_models(architectures=EQX_ARCHITECTURES[:1]), lambda c: True)
    >>> case.kind, case.input_shape, case.state is None
    ('vector', (3,), True)
  """
  if stateful:
    kinds = ("image",)
  if architectures is not None:
    return draw(_case(draw(st.sampled_from(architectures))))
  kind = draw(st.sampled_from(kinds))
  if kind == "vector":
    d = draw(st.integers(1, 4))
    layers, _ = draw(_vector_layers(d, draw(st.integers(1, max_layers))))
    shape: tuple = (d,)
    extra: Any = None
  elif kind == "image":
    n = draw(st.sampled_from([1, 2, 2, 3]))
    c = draw(st.integers(1, 3))
    size = draw(st.integers(3, 5) if n == 3 else st.integers(3, 7))
    with_bn = bool(stateful) or (stateful is None and draw(st.booleans()))
    layers = draw(_image_layers(n, c, size, with_bn, max_layers))
    if with_bn and not any(cfg[0] == "batchnorm" for cfg in layers):
      layers = (("batchnorm", c, draw(st.sampled_from(["batch", "ema"])), False), *layers)
    shape, extra = (c,) + (size,) * n, None
  elif kind == "sequence":
    d, t = draw(st.sampled_from([2, 4])), draw(st.integers(1, 4))
    layers, shape, extra = draw(_sequence_layers(d, max_layers)), (t, d), None
  else:
    d, t, vocab = draw(st.sampled_from([2, 4])), draw(st.integers(1, 4)), draw(st.integers(3, 6))
    layers = draw(_sequence_layers(d, max(1, max_layers - 1)))
    shape, extra = (t,), (vocab, d)
  return draw(_case((kind, shape, layers, extra)))


@st.composite
def _case(draw, arch: tuple) -> EqxCase:
  kind, shape, _, extra = arch
  model, state = _template(arch)
  seed = draw(st.integers(0, 2**31 - 1))
  model = _randomize(model, seed)
  if state is not None:
    state = _randomize(state, seed + 1, positive=True)
  batch = 3 if state is not None else None
  vocab = extra[0] if kind == "tokens" else None
  return EqxCase(model, state, kind, shape, batch, vocab, arch)


@st.composite
def eqx_inputs(draw, case: EqxCase) -> jax.Array:
  """An input for ``case`` (a batch of ``case.batch`` inputs for stateful models).

  Floats are standard normal; token ids are uniform in ``[0, vocab)``.

  Example:
    >>> from hypothesis import find
    >>> from nnx_eqx.testing import EQX_ARCHITECTURES, eqx_inputs, eqx_models
    >>> case = find(eqx_models(architectures=EQX_ARCHITECTURES[:1]), lambda c: True)
    >>> find(eqx_inputs(case), lambda x: True).shape
    (3,)
  """
  shape = case.input_shape if case.batch is None else (case.batch, *case.input_shape)
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
  if case.kind == "tokens":
    return jnp.asarray(rng.integers(0, case.vocab, shape), jnp.int32)
  return jnp.asarray(rng.standard_normal(shape), jnp.float32)

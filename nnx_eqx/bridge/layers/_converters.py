"""Built-in converter pairs for ``eqx.nn`` layers (registered at import).

Every pair keeps Equinox's parameter layout and equations, so a converted
layer is its source's program. The one layout change, ``nnx.Linear``'s
``kernel = weight.T``, happens only when asked for (``native=True``); it is a
named :class:`Layout`: layouts compare equal by name, which is how a weight tied
by ``eqx.nn.Shared`` is recognised as one Variable. A converter returns
``NotImplemented`` for instances it cannot map exactly (e.g.
``MLP(scan=True)``); those convert generically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.tree_util as jtu

from ...graph.variables._variables import BatchStat, Param
from ...nn import Linear as NnxLinear
from ..convert._random import StreamAttention, StreamDropout, StreamRef, fork_stream
from ..walk._context import FromEqxContext, build_eqx, impl_of, is_array
from ..walk._eqx_state import Spec, state_value
from ..walk._registry import register
from ..walk._to_eqx import ToEqxContext
from . import _attention, _layers, _norms, _recurrent
from ._eqx_layers import KernelLinear, build_nnx_linear, nnx_linear_defaults, param_dtype
from ._stack_shape import stack_shape

enn = eqx.nn


class Layout:
  """A named, hashable array layout change, e.g. ``Layout("T")`` (transpose).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.bridge.Layout("T")(jnp.ones((2, 3))).shape
    (3, 2)
  """

  __slots__ = ("name", "args")

  def __init__(self, name: str, *args: Any):
    self.name, self.args = name, args

  def __call__(self, x: Any) -> Any:
    return _LAYOUTS[self.name](x, *self.args)

  def __eq__(self, other):
    return isinstance(other, Layout) and (self.name, self.args) == (other.name, other.args)

  def __hash__(self):
    return hash((self.name, self.args))

  def __repr__(self):
    return f"Layout({self.name!r}{''.join(f', {a!r}' for a in self.args)})"


# Each layout acts on the trailing axes of one layer's array, so the leading axes
# of layers stacked by ``eqx.filter_vmap`` (or ``nnx.vmap``) pass through.
_LAYOUTS: dict[str, Callable[..., Any]] = {
  "T": lambda x: x.swapaxes(-1, -2),
}
T = Layout("T")


def _new(cls: type, **attrs: Any) -> Any:
  obj = cls()
  for k, v in attrs.items():
    setattr(obj, k, v)
  return obj


def _statics(obj: Any, names: tuple) -> dict:
  return {n: getattr(obj, n) for n in names}


def _attrs(m: Any) -> dict:
  return dict(impl_of(type(m)).children(m))


def _plain_params(*vars_: Any) -> bool:
  return all(v is None or (type(v) is Param and not v.metadata) for v in vars_)


# -- Linear -----------------------------------------------------------------
_LINEAR_STATICS = ("in_features", "out_features", "use_bias")


def linear_to_nnx(e: enn.Linear, ctx: FromEqxContext) -> Any:
  if not is_array(e.weight) or stack_shape((e.weight, 2), (e.bias, 1)) is None:
    return NotImplemented  # arrays that are no stack of layers: generic conversion
  statics = _statics(e, _LINEAR_STATICS)
  if "scalar" in (e.in_features, e.out_features) or ctx.keep_layout("weight"):
    w, b = ctx.variable("weight", type=Param), ctx.variable("bias", type=Param)
    return _new(_layers.Linear, weight=w, bias=b, **statics)
  kernel = ctx.variable("weight", type=Param, fn=T)  # asked for: from_eqx(..., native=True)
  statics["param_dtype"] = param_dtype(e.weight.dtype)
  return build_nnx_linear(kernel, ctx.variable("bias", type=Param), statics)


def kernel_linear_to_nnx(e: KernelLinear, ctx: FromEqxContext) -> Any:
  if not is_array(e.kernel) or stack_shape((e.kernel, 2), (e.bias, 1)) is None:
    return NotImplemented
  statics = _statics(e, _LINEAR_STATICS)
  statics["param_dtype"] = param_dtype(e.kernel.dtype)
  kernel, bias = ctx.variable("kernel", type=Param), ctx.variable("bias", type=Param)
  return build_nnx_linear(kernel, bias, statics)


def nnx_linear_to_eqx(m: Any, ctx: ToEqxContext) -> Any:
  """``nnx.Linear`` -> :class:`nnx.bridge.KernelLinear` (its kernel and program
  kept), or ``eqx.nn.Linear`` (``weight = kernel.T``) when asked for with
  ``to_eqx(..., native=True)``; generic conversion for non-default settings."""
  attrs = _attrs(m)
  defaults = nnx_linear_defaults()
  same = set(attrs) == {*defaults, "kernel", "bias"} and all(
    attrs[k] == v for k, v in defaults.items() if k not in (*_LINEAR_STATICS, "param_dtype")
  )
  kernel = attrs.get("kernel")
  if kernel is None or not same or not _plain_params(kernel, attrs["bias"]):
    return NotImplemented
  if stack_shape((kernel, 2), (attrs["bias"], 1)) is None:
    return NotImplemented
  pd, expected = attrs["param_dtype"], param_dtype(kernel.dtype)
  if (
    type(pd) is not type(expected) or pd != expected or (attrs["bias"] is None) == attrs["use_bias"]
  ):
    return NotImplemented  # from_eqx could not rebuild these attributes exactly
  if not ctx.native:
    k, b = ctx.leaf("kernel"), ctx.leaf("bias")
    return build_eqx(KernelLinear, kernel=k, bias=b, **_statics(m, _LINEAR_STATICS))
  w, b = ctx.leaf("kernel", fn=T), ctx.leaf("bias")
  out = build_eqx(enn.Linear, weight=w, bias=b, **_statics(m, _LINEAR_STATICS))
  ctx.native_made.add(id(out))
  return out


def bridge_linear_to_eqx(m: _layers.Linear, ctx: ToEqxContext) -> Any:
  if stack_shape((m.weight, 2), (m.bias, 1)) is None:
    return NotImplemented
  w, b = ctx.leaf("weight"), ctx.leaf("bias")
  return build_eqx(enn.Linear, weight=w, bias=b, **_statics(m, _LINEAR_STATICS))


# -- Conv -------------------------------------------------------------------
_CONV_STATICS = (
  "num_spatial_dims",
  "in_channels",
  "out_channels",
  "kernel_size",
  "stride",
  "padding",
  "dilation",
  "groups",
  "use_bias",
  "padding_mode",
)
_CONV_TYPES = {1: enn.Conv1d, 2: enn.Conv2d, 3: enn.Conv3d}


def _conv_stack(weight: Any, bias: Any, n: int) -> tuple | None:
  return stack_shape((weight, n + 2), (bias, n + 1))


def conv_to_nnx(e: enn.Conv, ctx: FromEqxContext) -> Any:
  if not is_array(e.weight) or _conv_stack(e.weight, e.bias, e.num_spatial_dims) is None:
    return NotImplemented
  w, b = ctx.variable("weight", type=Param), ctx.variable("bias", type=Param)
  return _new(_layers.Conv, weight=w, bias=b, **_statics(e, _CONV_STATICS))


def conv_to_eqx(m: _layers.Conv, ctx: ToEqxContext) -> Any:
  if _conv_stack(m.weight, m.bias, m.num_spatial_dims) is None:
    return NotImplemented
  w, b = ctx.leaf("weight"), ctx.leaf("bias")
  return build_eqx(_CONV_TYPES[m.num_spatial_dims], weight=w, bias=b, **_statics(m, _CONV_STATICS))


# -- Embedding, norms, dropout ------------------------------------------------
def embedding_to_nnx(e: enn.Embedding, ctx: FromEqxContext) -> Any:
  if stack_shape((e.weight, 2)) is None:
    return NotImplemented
  statics = _statics(e, ("num_embeddings", "embedding_size"))
  return _new(_layers.Embedding, embedding=ctx.variable("weight", type=Param), **statics)


def embedding_to_eqx(m: _layers.Embedding, ctx: ToEqxContext) -> Any:
  if stack_shape((m.embedding, 2)) is None:
    return NotImplemented
  statics = _statics(m, ("num_embeddings", "embedding_size"))
  return build_eqx(enn.Embedding, weight=ctx.leaf("embedding"), **statics)


_NORM_STATICS = ("shape", "eps", "use_weight", "use_bias")


def _norm_stack(m: Any, weight: Any, bias: Any) -> tuple | None:
  n = 1 if isinstance(m.shape, int) else len(m.shape)
  return stack_shape((weight, n), (bias, n))


def _norm_pair(eqx_type: type, nnx_type: type) -> None:
  def to_nnx(e, ctx):
    if _norm_stack(e, e.weight, e.bias) is None:
      return NotImplemented
    w, b = ctx.variable("weight", type=Param), ctx.variable("bias", type=Param)
    return _new(nnx_type, scale=w, bias=b, **_statics(e, _NORM_STATICS))

  def to_eqx(m, ctx):
    if _norm_stack(m, m.scale, m.bias) is None:
      return NotImplemented
    w, b = ctx.leaf("scale"), ctx.leaf("bias")
    return build_eqx(eqx_type, weight=w, bias=b, **_statics(m, _NORM_STATICS))

  register(eqx_type, nnx_type, to_nnx=to_nnx, to_eqx=to_eqx)


_BN_STATICS = ("axis_name", "input_size", "eps", "channelwise_affine", "momentum", "mode")


def _bn_stack(*params: Any, counter: Any, stats: Any) -> tuple | None:
  """Stack axes of a BatchNorm: ``params`` (scale, bias) and ``stats`` (mean, var)
  have one axis per layer, ``counter`` (or ``first_time``) none."""
  return stack_shape(*((p, 1) for p in (*params, *stats)), (counter, 0))


def batchnorm_to_nnx(e: enn.BatchNorm, ctx: FromEqxContext) -> Any:
  if not isinstance(e.inference, bool) or any(is_array(a) for a in jtu.tree_leaves(e.axis_name)):
    return NotImplemented
  counter, stats = (
    ("batch_counter", "batch_state_index")
    if e.mode == "batch"
    else ("ema_first_time_index", "ema_state_index")
  )
  # the statistics are shaped as the scale (stacked layers too), in its dtype; the
  # counter has the stack axes only
  expected: dict[str, Any] = dict.fromkeys((counter, stats))
  if e.weight is not None:
    stat = Spec(e.weight.shape, e.weight.dtype)
    expected = {counter: Spec(e.weight.shape[:-1]), stats: (stat, stat)}
  read = [
    state_value(getattr(e, k), ctx.state, ctx.path + (k,), expected[k]) for k in (counter, stats)
  ]
  if _bn_stack(e.weight, e.bias, counter=read[0], stats=read[1]) is None:
    return NotImplemented
  m = _new(
    _norms.BatchNorm,
    scale=ctx.variable("weight", type=Param),
    bias=ctx.variable("bias", type=Param),
    use_running_average=e.inference,
    **_statics(e, _BN_STATICS),
  )
  if e.mode == "batch":
    m.counter = ctx.variable("batch_counter", type=BatchStat)
    m.mean, m.var = ctx.state_variables("batch_state_index", type=BatchStat)
  else:
    m.first_time = ctx.variable("ema_first_time_index", type=BatchStat)
    m.mean, m.var = ctx.state_variables("ema_state_index", type=BatchStat)
  return m


def batchnorm_to_eqx(m: _norms.BatchNorm, ctx: ToEqxContext) -> Any:
  counter = m.counter if m.mode == "batch" else m.first_time
  if _bn_stack(m.scale, m.bias, counter=counter, stats=(m.mean, m.var)) is None:
    return NotImplemented
  idx: dict[str, Any] = dict.fromkeys(
    ("ema_first_time_index", "ema_state_index", "batch_counter", "batch_state_index")
  )
  if m.mode == "batch":
    idx["batch_counter"] = ctx.state_index("counter")
    idx["batch_state_index"] = ctx.state_index("mean", "var")
  else:
    idx["ema_first_time_index"] = ctx.state_index("first_time")
    idx["ema_state_index"] = ctx.state_index("mean", "var")
  return build_eqx(
    enn.BatchNorm,
    weight=ctx.leaf("scale"),
    bias=ctx.leaf("bias"),
    **idx,
    inference=m.use_running_average,
    **_statics(m, _BN_STATICS),
  )


def dropout_to_nnx(e: enn.Dropout, ctx: FromEqxContext) -> Any:
  if is_array(e.p) or not isinstance(e.inference, bool):
    return NotImplemented
  m = _new(_layers.Dropout, rate=e.p, deterministic=e.inference)
  if ctx.rngs is not None:  # nnx.from_eqx(..., rngs=...): the layer keeps a stream
    m.rngs = fork_stream(ctx.rngs, "nnx.from_eqx")
  return m


def dropout_to_eqx(m: _layers.Dropout, ctx: ToEqxContext) -> Any:
  """``eqx.nn.Dropout``: its stream is not carried (Equinox takes keys per call),
  except in the Equinox view a generic module's methods run on."""
  if ctx.view:
    ref = None if m.rngs is None else StreamRef(m.rngs)
    return build_eqx(StreamDropout, p=m.rate, inference=m.deterministic, ref=ref, path=ctx.path)
  return build_eqx(enn.Dropout, p=m.rate, inference=m.deterministic)


# -- Containers -----------------------------------------------------------------
def sequential_to_nnx(e, ctx):
  return _new(_layers.Sequential, layers=ctx.child("layers"))


def sequential_to_eqx(m, ctx):
  return build_eqx(enn.Sequential, layers=ctx.child("layers"))


def lambda_to_nnx(e, ctx):
  return _new(_layers.Lambda, fn=ctx.child("fn"))


def lambda_to_eqx(m, ctx):
  return build_eqx(enn.Lambda, fn=ctx.child("fn"))


_MLP_STATICS = (
  "activation",
  "final_activation",
  "use_bias",
  "use_final_bias",
  "in_size",
  "out_size",
  "width_size",
  "depth",
)


def mlp_to_nnx(e: enn.MLP, ctx: FromEqxContext) -> Any:
  acts = jtu.tree_leaves((e.activation, e.final_activation))
  if e.scan or any(is_array(a) for a in acts):
    return NotImplemented  # stacked layers or learnt activations: generic conversion
  return _new(_layers.MLP, layers=ctx.child("layers"), **_statics(e, _MLP_STATICS))


def mlp_to_eqx(m: _layers.MLP, ctx: ToEqxContext) -> Any:
  return build_eqx(enn.MLP, layers=ctx.child("layers"), scan=False, **_statics(m, _MLP_STATICS))


# -- Pooling ------------------------------------------------------------------
_POOL_STATICS = (
  "init",
  "operation",
  "num_spatial_dims",
  "kernel_size",
  "stride",
  "padding",
  "use_ceil",
)
_POOLS = {
  (True, 1): enn.AvgPool1d,
  (True, 2): enn.AvgPool2d,
  (True, 3): enn.AvgPool3d,
  (False, 1): enn.MaxPool1d,
  (False, 2): enn.MaxPool2d,
  (False, 3): enn.MaxPool3d,
}


def pool_to_nnx(e, ctx):
  if is_array(e.init):
    return NotImplemented
  average = type(e) in (enn.AvgPool1d, enn.AvgPool2d, enn.AvgPool3d)
  return _new(_layers.Pool, average=average, **_statics(e, _POOL_STATICS))


def pool_to_eqx(m, ctx):
  return build_eqx(_POOLS[(m.average, m.num_spatial_dims)], **_statics(m, _POOL_STATICS))


# -- Attention and cells -----------------------------------------------------------
_MHA_STATICS = (
  "num_heads",
  "query_size",
  "key_size",
  "value_size",
  "output_size",
  "qk_size",
  "vo_size",
  "use_query_bias",
  "use_key_bias",
  "use_value_bias",
  "use_output_bias",
)
_MHA_CHILDREN = ("query_proj", "key_proj", "value_proj", "output_proj", "dropout")


def mha_to_nnx(e: enn.MultiheadAttention, ctx: FromEqxContext) -> Any:
  children = {k: ctx.child(k) for k in _MHA_CHILDREN}
  return _new(_attention.MultiheadAttention, **children, **_statics(e, _MHA_STATICS))


def mha_to_eqx(m: _attention.MultiheadAttention, ctx: ToEqxContext) -> Any:
  children = {k: ctx.child(k) for k in _MHA_CHILDREN}
  view = isinstance(children["dropout"], StreamDropout)
  cls = StreamAttention if view else enn.MultiheadAttention
  return build_eqx(cls, **children, **_statics(m, _MHA_STATICS))


_CELL_STATICS = ("input_size", "hidden_size", "use_bias")


def _cell_stack(m: Any) -> tuple | None:
  arrays = ((m.weight_ih, 2), (m.weight_hh, 2), (m.bias, 1), (getattr(m, "bias_n", None), 1))
  return stack_shape(*arrays)


def _cell_pair(eqx_type: type, nnx_type: type, has_bias_n: bool) -> None:
  def to_nnx(e, ctx):
    if _cell_stack(e) is None:
      return NotImplemented
    m = _new(
      nnx_type,
      weight_ih=ctx.variable("weight_ih", type=Param),
      weight_hh=ctx.variable("weight_hh", type=Param),
      bias=ctx.variable("bias", type=Param),
      **_statics(e, _CELL_STATICS),
    )
    if has_bias_n:
      m.bias_n = ctx.variable("bias_n", type=Param)
    return m

  def to_eqx(m, ctx):
    if _cell_stack(m) is None:
      return NotImplemented
    fields = dict(
      weight_ih=ctx.leaf("weight_ih"),
      weight_hh=ctx.leaf("weight_hh"),
      bias=ctx.leaf("bias"),
      **_statics(m, _CELL_STATICS),
    )
    if has_bias_n:
      fields["bias_n"] = ctx.leaf("bias_n")
    return build_eqx(eqx_type, **fields)

  register(eqx_type, nnx_type, to_nnx=to_nnx, to_eqx=to_eqx)


# -- Registration ---------------------------------------------------------------
register(enn.Linear, _layers.Linear, to_nnx=linear_to_nnx, to_eqx=bridge_linear_to_eqx)
register(KernelLinear, NnxLinear, to_nnx=kernel_linear_to_nnx, to_eqx=nnx_linear_to_eqx)
for _t in _CONV_TYPES.values():
  register(_t, _layers.Conv, to_nnx=conv_to_nnx, to_eqx=conv_to_eqx, override=True)
register(enn.Embedding, _layers.Embedding, to_nnx=embedding_to_nnx, to_eqx=embedding_to_eqx)
_norm_pair(enn.LayerNorm, _norms.LayerNorm)
_norm_pair(enn.RMSNorm, _norms.RMSNorm)
register(enn.BatchNorm, _norms.BatchNorm, to_nnx=batchnorm_to_nnx, to_eqx=batchnorm_to_eqx)
register(enn.Dropout, _layers.Dropout, to_nnx=dropout_to_nnx, to_eqx=dropout_to_eqx)
register(enn.Sequential, _layers.Sequential, to_nnx=sequential_to_nnx, to_eqx=sequential_to_eqx)
register(enn.Lambda, _layers.Lambda, to_nnx=lambda_to_nnx, to_eqx=lambda_to_eqx)
register(
  enn.Identity,
  _layers.Identity,
  to_nnx=lambda e, ctx: _layers.Identity(),
  to_eqx=lambda m, ctx: build_eqx(enn.Identity),
)
register(enn.MLP, _layers.MLP, to_nnx=mlp_to_nnx, to_eqx=mlp_to_eqx)
for _pool in _POOLS.values():
  register(_pool, _layers.Pool, to_nnx=pool_to_nnx, to_eqx=pool_to_eqx, override=True)
register(
  enn.MultiheadAttention, _attention.MultiheadAttention, to_nnx=mha_to_nnx, to_eqx=mha_to_eqx
)
_cell_pair(enn.GRUCell, _recurrent.GRUCell, has_bias_n=True)
_cell_pair(enn.LSTMCell, _recurrent.LSTMCell, has_bias_n=False)

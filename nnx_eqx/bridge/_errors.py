"""Errors raised by the Equinox bridge.

Every class derives from :class:`nnx.NnxError` (so ``except nnx.NnxError``
catches them) and from the builtin a caller would expect. Messages name the
offending path, what was expected and found, and the fix.
"""

from __future__ import annotations

from typing import Any

import jax.tree_util as jtu

from ..graph._errors import NnxError
from ..nn._common import InputShapeError, MissingRngsError
from ..spmd import ShardingError


def fmt_path(path: tuple) -> str:
  """A path of attribute names, indices or ``jax.tree_util`` keys as ``root.a[0]``."""
  parts = []
  for k in path:
    if isinstance(k, str):
      parts.append("." + k)
    elif isinstance(k, int):
      parts.append(f"[{k}]")
    else:
      parts.append(jtu.keystr((k,)))
  return "root" + "".join(parts)


class _LayerPathError(Exception):
  """An error raised by a layer inside a converted model, naming the layer's
  ``path`` below the module that was called: bridge containers (``Sequential``,
  ``MLP``) add their part with :meth:`add_parent` as it passes through them."""

  path: tuple

  def add_parent(self, *keys: Any) -> None:
    """Prefixes ``path`` with the keys of the container the error passed through."""
    self.path = (*keys, *self.path)
    self.args = (self._message(),)

  def _message(self) -> str:
    raise NotImplementedError


class BridgeError(NnxError):
  """Base class of the errors raised by the bridges (``nnx.to_eqx`` / ``nnx.from_eqx``,
  ``nnx.to_flax`` / ``nnx.from_flax``)."""


class UnconvertibleFieldError(BridgeError, TypeError):
  """A field or attribute holds something the bridge cannot represent on the
  other side (e.g. arrays inside a custom pytree that is not a Module)."""


class ConverterClashError(BridgeError, ValueError):
  """``nnx.bridge.register`` was called for a type that already has a converter."""


class StatefulModuleError(BridgeError, TypeError):
  """``nnx.to_eqx`` was called on a module whose state Equinox keeps in
  ``eqx.nn.State``; use ``nnx.to_eqx_with_state``."""


class MissingStateError(BridgeError, KeyError):
  """An ``eqx.nn.StateIndex`` has no value: the ``eqx.nn.State`` lacks its
  marker, or no State was given for a model whose initial state was deleted."""

  def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
    return str(self.args[0]) if self.args else ""


class SharedConversionError(BridgeError, ValueError):
  """An ``eqx.nn.Shared`` cannot be mapped onto shared Variables (its ``get``
  computes new arrays instead of selecting nodes), or shared Variables cannot be
  expressed as an ``eqx.nn.Shared`` (they are used in different layouts)."""


class CycleError(BridgeError, ValueError):
  """The NNX graph has a reference cycle, which no Equinox pytree can hold."""


class FlaxConversionError(BridgeError, TypeError):
  """``nnx.from_flax`` / ``nnx.to_flax`` (or a call given a flax.nnx object where an
  nnx_eqx one is expected) met an object it cannot convert: one of another library,
  a flax Linen module, or a node whose state has no counterpart on the other side.
  The message names the path, the reason and the fix; neither side is changed."""


class FlaxNotInstalledError(BridgeError, ImportError):
  """``nnx.from_flax`` / ``nnx.to_flax`` were called where flax is not installed (the
  message names the extra to install: ``pip install 'nnx_eqx[flax]'``)."""


class MissingKeyError(_LayerPathError, BridgeError, MissingRngsError, RuntimeError):
  """A converted random layer (``eqx.nn.Dropout``, or the dropout of an
  ``eqx.nn.MultiheadAttention``) runs in training mode without a key: the call
  got no ``key=``/``rngs=`` and the layer holds no stream. A ``RuntimeError`` as
  Equinox's own error is, and an ``nnx.MissingRngsError`` as native layers'.

  ``path`` holds the layer's position below the converted module that was
  called (bridge containers add their part as the error passes through them).

  Example:
    >>> import equinox as eqx, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.Sequential([eqx.nn.Dropout(0.5)]))
    >>> try:
    ...   m(jnp.ones(3))
    ... except nnx.bridge.MissingKeyError as e:
    ...   print(e)
    Dropout at root.layers[0] requires a key when running in non-deterministic ...
  """

  def __init__(self, layer: str, path: tuple = ()):
    self.layer, self.path = layer, tuple(path)
    super().__init__(self._message())

  def _message(self) -> str:
    where = fmt_path(self.path)
    return (
      f"{self.layer} at {where} requires a key when running in non-deterministic"
      " (training) mode, and has none: the call passed no `key=` or `rngs=` and the"
      " layer holds no RNG stream. Fix: pass a key as in"
      " Equinox (`model(x, key=jax.random.key(0))`), or draw keys from nnx.Rngs:"
      " convert with `nnx.from_eqx(eqx_model, rngs=nnx.Rngs(dropout=0))` (each"
      " Dropout keeps a stream) or call `model(x, rngs=nnx.Rngs(dropout=0))`. For"
      " inference, use `model.eval()` or `eqx.nn.inference_mode(model)`."
    )


class ExampleShapeError(_LayerPathError, BridgeError, InputShapeError):
  """A layer converted from Equinox (``nnx.bridge.Linear``, ``Conv``, ``MLP``,
  ``Embedding``, the norms, ``MultiheadAttention``, the cells) got an input that
  is not one example of the shape it takes. Equinox layers are unbatched: a batch
  goes through ``jax.vmap(model)(x)`` (or ``eqx.filter_vmap``; ``nnx.vmap`` for a
  model that updates state), not ``model(x)``. Raised while tracing, from the
  static shapes, before JAX's own (``dot_general requires contracting dimensions
  to have the same shape``) would be; a call that works compiles to the same program.

  ``path`` holds the layer's position below the converted module that was
  called (bridge containers add their part as the error passes through them).

  Example:
    >>> import equinox as eqx, jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> m = nnx.from_eqx(eqx.nn.MLP(4, 2, 8, depth=2, key=jax.random.key(0)))
    >>> try:
    ...   m(jnp.ones((32, 4)))
    ... except nnx.bridge.ExampleShapeError as e:
    ...   print(str(e).split(":")[0], e.got, e.expected, "`jax.vmap(model)(x)`" in str(e))
    nnx.bridge.MLP (from eqx.nn.MLP) (32, 4) (4,) True
    >>> jax.vmap(m)(jnp.ones((32, 4))).shape
    (32, 2)
  """

  def __init__(
    self, layer: str, arg: str, expected: Any, got: tuple, path: tuple = (), rank: int | None = None
  ):
    self.layer, self.arg, self.expected, self.got = layer, arg, expected, tuple(got)
    self.path = tuple(path)
    # ``expected``: a shape, or its description (then ``rank`` is an example's rank)
    self.rank = len(expected) if isinstance(expected, tuple) else rank
    super().__init__(self._message())

  def _message(self) -> str:
    where = f" at {fmt_path(self.path)}" if self.path else ""
    exp, got, rank = self.expected, self.got, self.rank
    batched = rank is not None and len(got) > rank
    if isinstance(exp, tuple):
      batched = batched and got[len(got) - len(exp) :] == exp
    head = (
      f"{self.layer}{where}: input `{self.arg}` has shape {got}, but the layer takes one"
      f" example of shape {exp}"
    )
    if batched:
      n = "x".join(str(d) for d in got[: len(got) - (rank or 0)])
      return (
        f"{head}; this looks like a batch of {n}. Fix: map the model over the batch:"
        " `jax.vmap(model)(x)` (or `eqx.filter_vmap(model)(x)`; `nnx.vmap` if the model"
        " updates state)."
      )
    return (
      f"{head}. Fix: pass one example of that shape (a batch goes through"
      " `jax.vmap(model)(x)`), or convert a layer built for this shape."
    )


class UnboundAxisError(_LayerPathError, BridgeError, NameError):
  """A layer converted from Equinox that averages over a batch axis (``BatchNorm``,
  whose ``axis_name`` names a ``jax.vmap`` axis) was called in training mode outside
  a map over the batch with that axis name, where JAX's collective raises ``NameError:
  Found an unbound axis name``. The message names the layer, its ``axis_name`` and the
  mapped call: ``nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name=...)`` on the
  NNX side, ``jax.vmap(model, axis_name=..., in_axes=(0, None), out_axes=(0, None))``
  on the Equinox side. In inference mode no axis is needed.
  """

  def __init__(self, layer: str, axis_name: Any, path: tuple = ()):
    self.layer, self.axis_name, self.path = layer, axis_name, tuple(path)
    super().__init__(self._message())

  def _message(self) -> str:
    where = f" at {fmt_path(self.path)}" if self.path else ""
    a = repr(self.axis_name)
    return (
      f"{self.layer}{where}: it averages its batch statistics over the vmap axis"
      f" axis_name={a}, which is not bound here (the layer runs on one example, and the"
      " batch is the axis a map over it names). Fix: call it mapped over the batch with"
      f" that axis name, `nnx.vmap(lambda m, x: m(x), in_axes=(None, 0), axis_name={a})"
      "(model, x)` (the statistics are written back), or, for its Equinox form,"
      f" `jax.vmap(model, axis_name={a}, in_axes=(0, None), out_axes=(0, None))(x, state)`;"
      " in inference mode (model.eval(), eqx.nn.inference_mode) it needs no axis."
    )


class ExplicitShardingError(_LayerPathError, BridgeError, ShardingError):
  """JAX refused to shard the equations of a layer converted from Equinox
  (``jax``'s ``ShardingTypeError``, chained as ``__cause__``), e.g. ``Contracting
  dimensions are sharded and it is ambiguous how the output should be sharded``.

  The mesh has *Explicit* axes (what ``jax.make_mesh`` makes by default since jax
  0.12): a sharding is part of each array's type and every operation must be able
  to name its output's sharding. Equinox's equations (``weight @ x``, a
  convolution) take no ``out_sharding``, so an operation that contracts over a
  sharded axis has none. The message names the layer (its path below the
  converted module that was called) and the mesh's axes.

  Fix: make the mesh with automatic axes, ``jax.make_mesh(shape, names,
  axis_types=(jax.sharding.AxisType.Auto,) * len(names))``, where XLA's
  partitioner decides how each operation is split; or keep Explicit axes and
  reshard the input so that no contracting axis is sharded
  (``jax.sharding.reshard(x, P(...))``), or call a layer that takes
  ``out_sharding``.
  """

  def __init__(self, layer: str, mesh: Any, cause: BaseException, path: tuple = ()):
    self.layer, self.mesh, self.cause, self.path = layer, mesh, cause, tuple(path)
    super().__init__(self._message())

  def _message(self) -> str:
    where = f" at {fmt_path(self.path)}" if self.path else ""
    mesh = self.mesh
    if mesh is not None:
      names = tuple(mesh.axis_names)
      explicit = [n for n, t in zip(names, mesh.axis_types) if t.name == "Explicit"]
      axes = f"the mesh's axes {', '.join(map(repr, explicit))} are Explicit"
      n = str(len(names))
    else:
      axes, n = "the mesh's axes are Explicit", "n"
    cause = str(self.cause).split(". ")[0]
    return (
      f"{self.layer}{where}: JAX cannot shard this layer's equations ({cause}):"
      f" {axes}, jax.make_mesh's default, so every operation must name its output's"
      " sharding, and Equinox's equations take no out_sharding. Fix: make the mesh with"
      " automatic axes, `jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,)"
      f" * {n})`, so that XLA decides how each operation is split; or reshard the input"
      " so that no contracted axis is sharded (`jax.sharding.reshard(x, P(...))`)."
    )

"""``nnx.from_flax``: a live flax.nnx object as an nnx_eqx one."""

from __future__ import annotations

from typing import Any

from ...graph import State, Variable
from ...module import Module, Rngs
from .._errors import FlaxConversionError, fmt_path
from ._counterparts import from_flax_counterpart
from ._import import describe, flax_nnx, flax_side, is_flax_object, is_linen
from ._types import to_nnx_variable


def nnx_leaf(path: tuple, leaf: Any) -> Any:
  """A leaf of a flax ``State`` as nnx_eqx's (a Variable converted, an array as is).

  Raises:
    FlaxConversionError: the leaf is neither a Variable nor an array.
  """
  if isinstance(leaf, flax_nnx().Variable):
    return to_nnx_variable(leaf)
  if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
    return leaf
  raise FlaxConversionError(
    f"The flax state holds a {describe(leaf)} at {fmt_path(path)}, neither a Variable"
    " nor an array, so it has no counterpart in nnx_eqx's state. Fix: keep it in a"
    " flax.nnx.Variable, or make it a static attribute."
  )


def _from_rngs(obj: Any) -> Rngs:
  fnnx = flax_nnx()
  streams: dict = {}
  for p, v in fnnx.to_flat_state(fnnx.state(obj)):
    streams.setdefault(p[0], {})[p[-1]] = v.get_value()
  rngs = Rngs(**{name: s["key"] for name, s in streams.items()})
  for name, s in streams.items():
    getattr(rngs, name).count.value = s["count"]
  return rngs


def from_flax(obj: Any) -> Any:
  """Converts a live flax.nnx object into the nnx_eqx object that runs its program.

  * A flax ``Module`` (any class: nested Modules, ``nnx.List``/``nnx.Dict``, shared
    references, ``BatchNorm``, ``Dropout``, ``Rngs`` inside) becomes a
    :class:`FlaxModule`, and so does each of its submodules: ``m.enc`` is the
    FlaxModule of flax's ``self.enc``, callable (``m.enc(x)`` is bitwise
    ``f.enc(x)``), with flax's methods and static attributes (``m.drop.rate``);
    flax's ``nnx.List``, ``nnx.Dict`` and ``nnx.Sequential`` become nnx_eqx's, of
    such modules. nnx_eqx's state of it is the flax state, path for path, in
    Variables of the paired types with the same metadata, and calling any of them
    runs flax's own code on those values. This wrapping, rather than a rebuild from
    nnx_eqx layers, is the design because it keeps two things a rebuild cannot: a
    method that uses flax's transforms itself (``flax.nnx.scan`` over stacked layers
    in ``__call__``) gets flax objects as it expects, and every result is bitwise
    flax's, since the same flax code traces the same program. Sharing is identity:
    a submodule or Variable flax reaches by several names is one object under all of
    them (``m.tied is m.enc``; cycles stay cycles), so a tied weight's gradient sums
    every use. State updates (batch statistics, RNG counts) are written back as in
    flax, also under ``nnx.jit``, ``nnx.grad`` and the other nnx_eqx transforms,
    whether the parent or a submodule is called: they train one set of Variables.
    This holds in flax's graph and tree modes (``flax.nnx.set_graph_mode``).
  * A flax ``Rngs`` becomes an ``nnx.Rngs`` with the same keys and counts (it draws
    the same keys).
  * A root flax ``nnx.List`` becomes an ``nnx.List`` of its elements, converted
    together (sharing between them kept).
  * A flax ``State`` becomes an ``nnx.State`` with the same paths; a flax
    ``Variable`` an nnx_eqx Variable. Types pair by name (``flax.nnx.Param`` ->
    ``nnx.Param``, ``BatchStat``, ``Cache``, ``RngKey``, ...); a user subclass gets
    an nnx_eqx subclass of the same name, and :func:`to_flax` gives the flax class back.
  * A Module made by :func:`to_flax` gives back the nnx_eqx module it holds.
  * A flax ``Optimizer`` becomes an ``nnx.Optimizer`` with the same ``tx``, step and
    optax state (the same arrays, at the model's paths), so ``opt.update(m, grads)``
    with ``m = nnx.from_flax(flax_model)`` resumes training where flax left it,
    bitwise; flax's ``Average``, ``Welford``, ``Accuracy`` and ``MultiMetric`` become
    nnx_eqx's, with their state.

  The result holds new Variables over the flax object's arrays (of any shape and
  dtype; nothing is copied): training it leaves the flax object as it was, and
  :func:`to_flax` of it gives the trained flax Module.

  Args:
    obj: a flax.nnx ``Module`` (or other flax graph node, e.g. an ``Optimizer``),
      ``Rngs``, ``State`` or ``Variable``.

  Returns:
    A :class:`FlaxModule`, an ``nnx.Rngs``, an ``nnx.State``, an nnx_eqx Variable, an
    ``nnx.Optimizer`` or metric, or (for a :func:`to_flax` Module) the nnx_eqx module
    it holds.

  Raises:
    FlaxConversionError: ``obj`` is a flax Linen module (use flax's own
      ``flax.nnx.bridge``), an object of another library, a flax object whose state
      cannot be held (a Python number marked ``nnx.data``, state under a name a
      FlaxModule has itself), or an optimizer whose ``wrt`` filter has no nnx_eqx
      counterpart (the path and the reason are named).
    FlaxNotInstalledError: flax is not installed (an ``ImportError`` naming
      ``pip install 'nnx_eqx[flax]'``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> f = flax_nnx.Linear(3, 2, rngs=flax_nnx.Rngs(0))
    >>> m = nnx.from_flax(f)
    >>> type(m).__name__, sorted(nnx.state(m, nnx.Param))
    ('FlaxModule', ['bias', 'kernel'])
    >>> bool((m(jnp.ones(3)) == f(jnp.ones(3))).all())
    True
    >>> seq = nnx.from_flax(flax_nnx.Sequential(f, flax_nnx.Dropout(0.5)))
    >>> type(seq).__name__, seq.layers[0].kernel is nnx.state(seq)["layers"][0]["kernel"]
    ('Sequential', True)
    >>> seq.layers[1].rate, bool((seq.layers[0](jnp.ones(3)) == f(jnp.ones(3))).all())
    (0.5, True)
  """
  if is_linen(obj):
    raise FlaxConversionError(
      f"nnx.from_flax converts flax.nnx objects; got the Linen module {describe(obj)}."
      " Fix: make it a flax.nnx Module with flax's own Linen bridge first"
      " (`flax.nnx.bridge.ToNNX(linen_module, rngs=...)` then"
      " `flax.nnx.bridge.lazy_init(...)`), and convert that."
    )
  if not is_flax_object(obj):
    if isinstance(obj, (Module, State, Variable)):
      raise FlaxConversionError(
        f"nnx.from_flax expects a flax.nnx object, got the nnx_eqx {describe(obj)}, which"
        " needs no conversion. Fix: use it as it is (nnx.to_flax makes a flax.nnx Module)."
      )
    raise FlaxConversionError(
      f"nnx.from_flax expects a flax.nnx Module, Rngs, State or Variable, got"
      f" {describe(obj)}. Fix: pass the flax.nnx model (for Equinox models, nnx.from_eqx)."
    )
  fnnx = flax_nnx()
  if isinstance(obj, flax_side().NnxEqxModule):
    return obj.to_nnx()
  if isinstance(obj, fnnx.Variable):
    return to_nnx_variable(obj)
  if isinstance(obj, fnnx.State):
    return State.from_flat_path([(p, nnx_leaf(p, v)) for p, v in fnnx.to_flat_state(obj)])
  if isinstance(obj, fnnx.Rngs):
    return _from_rngs(obj)
  native = from_flax_counterpart(obj, from_flax)  # an Optimizer or metric: nnx_eqx's own class
  if native is not None:
    return native
  if fnnx.graph.is_graph_node(obj):
    return flax_side().from_flax_graph(obj)
  raise FlaxConversionError(
    f"nnx.from_flax cannot convert {describe(obj)} at root: it is neither a flax.nnx"
    " Module (graph node), Rngs, State nor Variable. Fix: pass the Module that holds it."
  )

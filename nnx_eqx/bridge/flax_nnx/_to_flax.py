"""``nnx.to_flax``: an nnx_eqx object as a live flax.nnx one."""

from __future__ import annotations

from typing import Any

from ...graph import State, Variable, is_graph_node
from ...module import Rngs
from .._errors import FlaxConversionError
from ._counterparts import to_flax_counterpart
from ._flax_module import FlaxModule
from ._import import describe, flax_nnx, flax_side, is_flax_object
from ._types import to_flax_variable


def to_flax(module: Any) -> Any:
  """Converts an nnx_eqx object into a live flax.nnx object running its program.

  * A Module (native, from :func:`nnx.from_eqx`, or any other graph node) becomes an
    ``NnxEqxModule``: a real ``flax.nnx.Module`` whose flax state is the module's
    state, path for path, in flax Variables of the paired types with the same
    metadata, and so does each of its submodules (``nnx.to_flax(m).l1(x)`` is
    ``m.l1(x)``); ``nnx.List``/``nnx.Dict``/``nnx.Sequential`` become flax's.
    Calling any of them, or any method of the module's class, runs nnx_eqx's code
    on those values, so ``flax.nnx.jit``/``grad``/``scan``, flax's ``Optimizer``,
    ``nnx.state``/``split``/``merge``, flax's checkpoint recipe (orbax on
    ``nnx.state``) and flax's display treat it as their own, and training it with
    flax's tools gives bitwise the losses of the same steps under nnx_eqx. Sharing
    is identity: a submodule or Variable reached by several names is one flax
    object under all of them (cycles included).
  * A :class:`FlaxModule` (from :func:`from_flax`) gives back a flax Module of the
    class, structure and current values it holds.
  * A root ``nnx.List`` becomes a flax ``nnx.List`` of its elements, converted
    together (sharing between them kept).
  * An ``nnx.Optimizer`` becomes a flax ``Optimizer`` with the same ``tx``, step and
    optax state, nnx_eqx's metrics flax's (the mirror images of :func:`from_flax`).
  * An ``nnx.Rngs`` becomes a flax ``Rngs`` with the same keys and counts; an
    ``nnx.State`` a flax ``State``; a Variable a flax Variable (types pair by name,
    user subclasses get a flax subclass of the same name).

  ``nnx.from_flax(nnx.to_flax(m))`` is ``m``'s structure and values, bitwise, and the
  other way round. The result holds new Variables over the same arrays (nothing is
  copied): training it leaves ``module`` as it was, and ``nnx.from_flax`` of it gives
  the trained module.

  Args:
    module: an nnx_eqx Module (or graph node), ``Rngs``, ``State`` or Variable.

  Returns:
    The flax.nnx object.

  Raises:
    FlaxConversionError: ``module`` is not an nnx_eqx object (a flax object needs no
      conversion; an Equinox model goes through ``nnx.from_eqx`` first), its state
      holds something flax's cannot, or an optimizer's ``wrt`` filter has no flax
      counterpart (the path is named).
    FlaxNotInstalledError: flax is not installed (an ``ImportError`` naming
      ``pip install 'nnx_eqx[flax]'``).

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> m = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    >>> f = nnx.to_flax(m)
    >>> isinstance(f, flax_nnx.Module), sorted(flax_nnx.state(f, flax_nnx.Param))
    (True, ['bias', 'kernel'])
    >>> bool((f(jnp.ones(3)) == m(jnp.ones(3))).all())
    True
    >>> back = nnx.from_flax(f)
    >>> type(back).__name__, bool((back.kernel.value == m.kernel.value).all())
    ('Linear', True)
  """
  if isinstance(module, FlaxModule):
    return module.to_flax_module()
  if is_flax_object(module):
    raise FlaxConversionError(
      f"nnx.to_flax expects an nnx_eqx object, got the flax object {describe(module)},"
      " which needs no conversion. Fix: use it as it is (nnx.from_flax gives nnx_eqx's)."
    )
  if isinstance(module, Variable):
    return to_flax_variable(module)
  if isinstance(module, State):
    fnnx = flax_nnx()
    flat = [
      (p, to_flax_variable(v) if isinstance(v, Variable) else v) for p, v in module.flat_state()
    ]
    return fnnx.from_flat_state(flat)
  if not is_graph_node(module):
    raise FlaxConversionError(
      f"nnx.to_flax expects an nnx_eqx Module, Rngs, State or Variable, got"
      f" {describe(module)}. Fix: pass the nnx_eqx model (an Equinox model converts"
      " with `nnx.to_flax(nnx.from_eqx(eqx_model))`)."
    )
  native = to_flax_counterpart(module, to_flax)  # an Optimizer or metric: flax's own class
  if native is not None:
    return native
  side = flax_side()
  if type(module) is Rngs:
    return side.rngs_to_flax(module)
  return side.to_flax_graph(module)

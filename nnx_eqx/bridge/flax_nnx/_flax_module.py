"""FlaxModule: the nnx_eqx Module holding a flax.nnx Module (``nnx.from_flax``)."""

from __future__ import annotations

import functools
from typing import Any

from ...module import Module
from ...module._views import view_keywords
from . import _copy
from ._import import flax_side
from ._nnx_side import NnxSide


class FlaxModule(Module):
  """An nnx_eqx Module holding one flax.nnx Module: what :func:`from_flax` makes of
  each flax Module.

  Its attributes are the flax Module's: each submodule a ``FlaxModule`` of its own
  (flax's ``nnx.List``/``nnx.Dict``/``nnx.Sequential`` become ``nnx.List``/
  ``nnx.Dict``/``nnx.Sequential`` of them), each Variable an nnx_eqx Variable of
  the paired type (``flax.nnx.Param`` -> ``nnx.Param``, ...) with the same
  metadata, arrays and static attributes as they are (``m.drop.rate``). A
  submodule or Variable that flax reaches by several names is one object under
  all of them (``m.tied is m.enc``), so ``nnx.state``, ``nnx.iter_modules`` and
  the transforms see flax's graph, sharing included.

  Calling it, or any method of the flax class (``m.encode(x)``, ``m.enc(x)``),
  rebuilds the flax Modules below it from the current values, runs flax's own
  method (so flax's transforms used inside it, e.g. ``nnx.scan`` over layers, keep
  working, and the result is flax's bit for bit), and writes back what the method
  changed: new values (batch statistics, RNG counts) and new or replaced
  attributes (``sow``, flags). Calling a submodule or its parent trains the one set
  of Variables. ``train()``, ``eval()`` and ``set_attributes(...)`` run flax's own
  versions (filters are flax's); the mode flags (``deterministic``,
  ``use_running_average``) are attributes of the layers that have them, so
  ``train()``/``eval()`` of an nnx_eqx model holding a FlaxModule reach them too,
  and ``nnx.view`` runs each layer's own flax ``set_view``.

  Attributes:
    flax_type: the class of the flax Module.
    flax_private: flax's bookkeeping of the Module (and any static attribute whose
      name this class uses itself), kept to rebuild it.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> m = nnx.from_flax(flax_nnx.BatchNorm(3, rngs=flax_nnx.Rngs(0)))
    >>> m.flax_type.__name__, type(m.mean).__name__, m.num_features
    ('BatchNorm', 'BatchStat', 3)
    >>> _ = m(jnp.arange(6.0).reshape(2, 3))        # flax's BatchNorm, statistics kept
    >>> moved = m.mean[...]
    >>> bool((moved != 0).all())
    True
    >>> m.eval()                                      # flax's eval: running averages
    >>> _ = m(jnp.ones((2, 3)))
    >>> bool((m.mean[...] == moved).all()), m.use_running_average
    (True, True)
  """

  _nnx_containerize = False  # (lists and dicts stay as flax holds them)

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    """Calls the flax Module's ``__call__`` (see the class docstring)."""
    return self.flax_call("__call__", *args, **kwargs)

  def __getattr__(self, name: str) -> Any:
    cls = self.__dict__.get("flax_type")
    found = getattr(cls, name, None) if cls is not None and not name.startswith("_") else None
    if isinstance(found, property):  # (read on the rebuilt object)
      return self.flax_call("__getattribute__", name)
    if callable(found):
      return functools.partial(self.flax_call, name)
    raise AttributeError(
      f"{type(self).__name__} (of {getattr(cls, '__name__', '?')}) has no attribute {name!r}"
    )

  def flax_call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
    """Runs the flax Module's ``method`` on the current values and keeps its updates.

    Args:
      method: the method's name (``"__call__"`` for a call).
      *args: its positional arguments.
      **kwargs: its keyword arguments.

    Returns:
      What the flax method returns.
    """
    return _copy.call(self, NNX, flax_side().FLAX, method, args, kwargs)

  def to_flax_module(self) -> Any:
    """A flax.nnx Module with this module's structure and current values (new
    Modules and Variables over the same arrays)."""
    return _copy.unwrap(self, NNX, flax_side().FLAX, {}, None)

  def set_attributes(
    self,
    *filters: Any,
    raise_if_not_found: bool = True,
    graph: bool | None = None,
    **attributes: Any,
  ) -> None:
    """flax.nnx's ``set_attributes`` on the held Module (filters are flax's)."""
    del graph
    self.flax_call("set_attributes", *filters, raise_if_not_found=raise_if_not_found, **attributes)

  def _nnx_set_mode(self, value: bool | None) -> None:
    # ``eqx.nn.inference_mode`` on this module or its Equinox form (graph.pytree._flags):
    # flax's own set_attributes of the flags its eval()/train() set, on every layer inside
    flags = dict.fromkeys(("deterministic", "use_running_average"), value)
    self.set_attributes(raise_if_not_found=False, **flags)

  def train(self, **attributes: Any) -> None:
    """flax.nnx's ``train`` on the held Module (``deterministic=False``, ...)."""
    self.flax_call("train", **attributes)

  def eval(self, **attributes: Any) -> None:
    """flax.nnx's ``eval`` on the held Module (``deterministic=True``, ...)."""
    self.flax_call("eval", **attributes)

  def set_view(self, **kwargs: Any) -> None:
    """This layer's step of ``nnx.view``, as flax's ``nnx.view`` takes it: the flax
    class's own ``set_view`` run on the rebuilt Module with the keywords it takes
    (flax's ``Dropout``, ``BatchNorm``, attention layers; None keeps a flag); a class
    without one is left as it is."""
    own = getattr(self.flax_type, "set_view", None)
    if own is not None:
      self.flax_call("set_view", **view_keywords(own, kwargs)[0])


NNX = NnxSide(FlaxModule)
"""nnx_eqx's side of the bridge, whose wrapper is :class:`FlaxModule`."""

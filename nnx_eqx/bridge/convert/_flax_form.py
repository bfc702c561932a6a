"""``EqxFlaxModule``: the Equinox form of a converted flax.nnx model."""

from __future__ import annotations

from ..flax_nnx import FlaxModule
from ._bridged import NnxModule
from ._forms import register_form


class EqxFlaxModule(NnxModule):
  """The Equinox form of a flax.nnx model: ``nnx.to_eqx(flax_model)``, or
  ``nnx.to_eqx``/``nnx.to_eqx_with_state`` of what ``nnx.from_flax`` returns.

  Each attribute layout gets its own subclass of this class, with one field per
  attribute of the flax Module (Params as arrays, other Variables as
  ``eqx.nn.StateIndex``, each flax submodule an ``EqxFlaxModule`` of its own), and
  the flax class and bookkeeping as static fields. Calling it runs flax's own code
  on those values, so its outputs are bitwise the flax model's; with batch
  statistics or RNG state it takes and returns an ``eqx.nn.State``, as stateful
  Equinox layers do. ``nnx.from_eqx`` gives back the
  ``nnx.bridge.FlaxModule`` it came from, and ``nnx.to_flax`` of that the flax model.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from flax import nnx as flax_nnx
    >>> f = flax_nnx.Linear(2, 3, rngs=flax_nnx.Rngs(0))
    >>> e = nnx.to_eqx(f)
    >>> isinstance(e, nnx.bridge.EqxFlaxModule), type(e).__name__
    (True, 'EqxFlaxModule')
    >>> bool((e(jnp.ones(2)) == f(jnp.ones(2))).all())
    True
  """


register_form(FlaxModule, EqxFlaxModule)

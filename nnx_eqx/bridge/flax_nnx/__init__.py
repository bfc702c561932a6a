"""The flax.nnx bridge: ``nnx.from_flax`` and ``nnx.to_flax``.

flax is optional: it is imported only inside these functions (``_import``), and
``_flax_side`` (flax's side of the copy and the flax Module holding an nnx_eqx one,
which imports flax at its top) is loaded from there on first use too. ``_copy`` is
the one mechanism of both directions (an object graph copied into the other
library, each Module a wrapper of its own, sharing kept by identity, and rebuilt to
run a call); ``_nnx_side`` is nnx_eqx's side of it, ``_flax_module`` holds
:class:`FlaxModule` (the nnx_eqx Module holding a flax one), ``_types`` pairs the
Variable classes, ``_from_flax`` and ``_to_flax`` are the two entry points,
``_counterparts`` converts the flax objects nnx_eqx has classes for (``Optimizer``,
metrics) to those classes, and ``_foreign`` is the converter the graph layer calls on
flax States, Variables and Variable classes (registered at import, acting only once
flax is imported). This package imports nnx_eqx's lower layers by their package
names (``_nnx_side`` also two internals ``nnx.merge`` uses: the current trace, the
data test; ``_flax_module`` and ``_flax_side`` the one-Module step of ``nnx.view``)
and the bridge's ``_errors``; nothing else in nnx_eqx imports it but the bridge's
``__init__``, ``_convert`` (which lets ``nnx.to_eqx`` take a flax.nnx Module) and
``_flax_form`` (the Equinox form's class).
"""

from . import _foreign
from ._flax_module import FlaxModule as FlaxModule
from ._from_flax import from_flax as from_flax
from ._import import is_flax_object as is_flax_object
from ._to_flax import to_flax as to_flax

_foreign.install()  # flax States/Variables/types accepted by nnx.update, merge, filters

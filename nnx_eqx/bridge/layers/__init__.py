"""Per-layer converters between ``eqx.nn`` layers and NNX modules.

``_converters`` (the built-in pairs, registered at import), ``_layers``, ``_attention``,
``_norms``, ``_recurrent`` (Equinox's equations as NNX modules), ``_eqx_layers`` (Equinox
layers that keep an NNX layout) and ``_stack_shape`` (the leading axes of stacked
layers). New built-in pairs go here. May import ``bridge.convert`` and below.
"""

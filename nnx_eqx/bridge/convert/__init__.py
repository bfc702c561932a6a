"""The conversions themselves: generic classes, Shared, and the public entry points.

``_convert`` (``from_eqx``, ``to_eqx``, ``to_eqx_with_state``), ``_generic`` (any
``eqx.Module`` as an NNX module), ``_bridged`` (any NNX module as an ``eqx.Module``),
``_shared`` (``eqx.nn.Shared``), ``_static`` (unhashable static fields), ``_random``
(keys for random layers), ``_pickling`` (classes made at conversion time that pickle),
``_forms`` and ``_flax_form`` (``EqxFlaxModule``, the Equinox form of a flax model).
May import ``bridge.walk`` and below.
"""

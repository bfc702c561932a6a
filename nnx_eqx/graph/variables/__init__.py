"""Variables: the typed, mutable boxes around JAX values, and their storage.

``_variables`` (``Variable``, ``Param``, ``BatchStat``, ...), ``_metadata`` (flax.nnx's
metadata accessors), ``_defaults`` (``var_defaults``: the ``hijax``/``ref`` options),
``_names`` (Linen collection names), ``_hijax``/``_hijax_api`` (hijax Variables on JAX's
hi-type API), ``_refs``/``_ref_placeholders`` (``jax.Ref`` storage and flax's update
placeholders). May import ``graph.tracing``, ``graph._errors`` and ``graph._version``.
"""

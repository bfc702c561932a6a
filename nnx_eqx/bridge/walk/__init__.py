"""The conversion walks between NNX graphs and Equinox pytrees.

``_registry`` (the converter registry), ``_context`` (recursion, paths, sharing and state
bookkeeping), ``_to_eqx``/``_deep_to_eqx`` and ``_deep_from_eqx`` (both directions, with
explicit stacks), ``_eqx_state`` (``eqx.nn.State``/``StateIndex`` against Variables),
``_iter`` (walks over nested containers without recursion). May import the graph, module
and nn layers and ``bridge._errors``.
"""

"""Axis specifications of lifted transforms, resolved to one axis per leaf.

``_specs`` (``StateAxes``, ``PathAxes`` and the resolution of ``in_axes``/``out_axes``),
``_carry`` (``Carry`` of scan, cond and loops), ``_leaf_axes`` (per-leaf axes and stacked
metadata), ``_node_outputs`` (Modules created in a scan body and returned stacked),
``_shardings`` (``in_shardings`` of ``nnx.jit``). May import ``transforms.lifting``.
"""

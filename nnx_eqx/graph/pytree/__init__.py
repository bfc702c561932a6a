"""Graph nodes as nested JAX pytrees, sharing kept: the one pytree mechanism.

``_view`` (flatten/unflatten of Modules and Variables as pytrees), ``_build`` (generated
code that rebuilds plain nodes from their children), ``_flags`` (mode flags such as the one
``eqx.nn.inference_mode`` switches). May import ``graph.walk`` and below.
"""

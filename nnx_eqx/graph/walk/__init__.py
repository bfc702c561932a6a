"""The graph walk and GraphDef: from a graph of objects to (GraphDef, leaves) and back.

``_walk`` (the cached walk and the rebuild), ``_graphdef``/``_nodedefs`` (the hashable
structure and its read-only node views), ``_node_types`` (node and leaf registries),
``_pytree_nodes`` (JAX pytrees and ``jax.Ref`` values met on the way), ``_links``/``_paths``
(paths), ``_duplicates`` (shared objects), ``_tree_mode``/``_graph_mode`` (``graph=False``
and the process-wide keyword defaults). May import ``graph.state`` and below.
"""

"""RNG handling across lifted transforms.

``_split`` (``nnx.split_rngs``: per-index keys for vmap and scan) and ``_tools``
(``with_rngs``, ``fork_rngs``, ``reseed``). May import ``transforms.lifting``.
"""

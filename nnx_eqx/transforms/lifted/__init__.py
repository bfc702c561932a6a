"""The lifted transforms themselves, one file each (as flax.nnx names them).

``jit``, ``grad``/``value_and_grad``, ``vjp``/``jvp``, ``custom_vjp``, ``vmap``, ``pmap``,
``scan``, ``remat``, ``cond``/``switch``/loops, ``shard_map``, ``eval_shape``,
``checkify``/``make_jaxpr`` and ``transform_metadata``. May import ``transforms.axes``,
``transforms.rngs`` and ``transforms.lifting``; flax's ``graph=`` keywords and module-path
facades (``transforms/autodiff.py``, ...) sit above them.
"""

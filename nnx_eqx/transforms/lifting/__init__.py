"""The one lifting mechanism that every lifted transform rests on.

``_lift`` (split the arguments, run the pure function, merge inside, write updates back
atomically), ``_dispatch`` (calling a lifted transform), ``_seed_hooks`` (where the
seed-era wrappers plug in), ``_ref_outputs`` (``jax.Ref`` values a jitted function
returns), ``_foreign_args`` (an ``eqx.Module`` argument JAX cannot trace, named). May
import the graph and module layers and ``transforms._errors``.
"""

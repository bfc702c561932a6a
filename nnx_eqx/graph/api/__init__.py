"""The functional graph API built on the walk and the pytree view.

``_functional`` (``split``, ``merge``, ``state``, ``update``, ``pop``, ``clone``,
iteration), ``_flatten`` (flax's ``graphlib.flatten``/``unflatten`` with reference maps),
``_contexts`` (split/merge/update contexts), ``_cached_partial``, ``_map``, ``_prefix``,
``_module_iter``, ``_graph_state``, ``_tree_form`` (``to_tree``/``from_tree``) and
``_repr`` (reprs and treescope hooks). The top room of the engine: may import every other.
"""

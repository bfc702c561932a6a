"""State and the selections over it.

``_state`` (``State``, ``FlatState``), ``_filters`` (filter objects and ``to_predicate``),
``_diff_state`` (``DiffState`` for ``nnx.grad``), ``_state_tools`` (the function forms of
State views flax.nnx exposes at top level), ``_foreign_libraries`` (another library's States and
Variable classes taken at the boundary, through a converter a bridge registers).
May import ``graph.variables`` and below.
"""

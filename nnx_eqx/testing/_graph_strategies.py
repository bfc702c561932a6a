"""Hypothesis strategies for random NNX module graphs.

``graphs()`` draws a root Module whose graph has random nesting (attributes,
``nnx.List`` sequences, tuples), Variables of several types, dtypes and shapes,
raw arrays, static attributes, shared Variables and Modules, and optionally
reference cycles. Use it to property-test code that consumes modules:

>>> from hypothesis import given, settings
>>> import nnx_eqx as nnx
>>> from nnx_eqx.testing import graphs, same_graph
>>> @settings(max_examples=5, database=None)
... @given(graphs())
... def law(m):
...   assert same_graph(nnx.merge(*nnx.split(m)), m)
>>> law()
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from ..graph.variables._variables import Variable
from ..module._containers import List
from ..module._module import Module
from ._graphs import DTYPES, VARIABLE_TYPES, Node


@st.composite
def arrays(draw, dtypes=DTYPES, max_rank: int = 2, max_side: int = 3):
  """A small ``jax.Array`` with a random dtype, shape and contents."""
  dtype = draw(st.sampled_from(dtypes))
  shape = tuple(draw(st.lists(st.integers(0, max_side), max_size=max_rank)))
  seed = draw(st.integers(0, 2**31 - 1))
  rng = np.random.default_rng(seed)
  if dtype == "bool":
    value = rng.integers(0, 2, size=shape).astype(bool)
  elif "int" in dtype:
    value = rng.integers(0, 100, size=shape).astype(dtype)
  else:
    value = rng.standard_normal(size=shape).astype(np.float32)
  return jnp.asarray(value, dtype=dtype)


@st.composite
def graphs(
  draw,
  max_modules: int = 5,
  max_variables: int = 6,
  variable_types: tuple[type, ...] = VARIABLE_TYPES,
  dtypes: tuple[str, ...] = DTYPES,
  sharing: bool = True,
  cycles: bool = True,
  raw_arrays: bool = True,
  containers: bool = True,
):
  """A random Module graph (the root Module is returned).

  Args:
    max_modules: most Modules in the graph (the root included).
    max_variables: most distinct Variables.
    variable_types: Variable classes to draw from.
    dtypes: dtype names of leaf arrays.
    sharing: add extra references to existing Variables/Modules.
    cycles: allow references back to ancestors (reference cycles).
    raw_arrays: allow arrays stored directly as attributes.
    containers: allow ``nnx.List`` and tuple attributes.

  Returns:
    A strategy of root ``Module`` objects.
  """
  n_modules = draw(st.integers(1, max_modules))
  modules: list[Module] = [Node() for _ in range(n_modules)]
  ancestors: list[set[int]] = [set() for _ in range(n_modules)]
  counter = [0]

  def name(prefix: str) -> str:
    counter[0] += 1
    return f"{prefix}{counter[0]}"

  for i in range(1, n_modules):
    parent = draw(st.integers(0, i - 1))
    ancestors[i] = ancestors[parent] | {parent}
    if containers and draw(st.booleans()) and draw(st.booleans()):
      setattr(modules[parent], name("seq"), List([modules[i]]))
    else:
      setattr(modules[parent], name("m"), modules[i])

  variables: list[Variable] = []
  for _ in range(draw(st.integers(0, max_variables))):
    vtype = draw(st.sampled_from(variable_types))
    var = vtype(draw(arrays(dtypes)))
    variables.append(var)
    owner = modules[draw(st.integers(0, n_modules - 1))]
    if containers and draw(st.integers(0, 5)) == 0:
      setattr(owner, name("tup"), (var, draw(st.integers(0, 9))))
    else:
      setattr(owner, name("v"), var)

  if raw_arrays:
    for _ in range(draw(st.integers(0, 2))):
      setattr(modules[draw(st.integers(0, n_modules - 1))], name("a"), draw(arrays(dtypes)))

  for _ in range(draw(st.integers(0, 2))):
    static = draw(st.one_of(st.integers(-5, 5), st.text("abc", max_size=3), st.none()))
    setattr(modules[draw(st.integers(0, n_modules - 1))], name("s"), static)

  if sharing:
    for _ in range(draw(st.integers(0, 3))):
      owner_i = draw(st.integers(0, n_modules - 1))
      if variables and draw(st.booleans()):
        target: Any = variables[draw(st.integers(0, len(variables) - 1))]
      else:
        t = draw(st.integers(0, n_modules - 1))
        is_back_edge = t == owner_i or t in ancestors[owner_i]
        if is_back_edge and not cycles:
          continue
        if t == 0 and not cycles:
          continue
        target = modules[t]
      setattr(modules[owner_i], name("r"), target)
  return modules[0]

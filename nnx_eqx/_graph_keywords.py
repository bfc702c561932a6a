"""The graph API and lifted transforms with flax's ``graph=``/``graph_updates=`` keywords.

flax.nnx 0.12 adds ``graph=`` (graph or tree mode) and ``graph_updates=`` to
its graph functions and transforms. nnx_eqx keeps sharing in every mode, so
for graphs without shared references both modes give the same results; these
wrappers accept the keywords (see :mod:`nnx_eqx._graph_mode`) and call the
engine's functions. ``nnx.split`` and friends are these wrappers.
"""

from __future__ import annotations

from typing import Any

import jax

from . import _graph, transforms
from ._diff_state import accepts_diff_state
from ._graph_mode import accepts_graph_keywords as _kw
from ._graph_state import as_states, unbundle
from ._variables import Variable


def _clone(node: Any) -> Any:
  """``clone`` that also copies plain pytrees of Variables (e.g. States)."""
  if _graph.is_node(node) or isinstance(node, list | dict):
    return _graph.clone(node)
  return jax.tree.map(
    lambda x: x.copy() if isinstance(x, Variable) else x,
    node,
    is_leaf=lambda x: isinstance(x, Variable),
  )


split = _kw(_graph.split)


def _merge(*args: Any) -> Any:
  return _graph.merge(*unbundle(args))


def _update(node: Any, *states: Any) -> None:
  _graph.update(node, *as_states(states))


_merge.__doc__, _update.__doc__ = _graph.merge.__doc__, _graph.update.__doc__
merge = _kw(_merge)
state = _kw(_graph.state)
graphdef = _kw(_graph.graphdef)
update = _kw(_update)
pop = _kw(_graph.pop)
clone = _kw(_clone)
variables = _kw(_graph.variables)
iter_graph = _kw(_graph.iter_graph)
iter_modules = _kw(_graph.iter_modules)
jit = _kw(transforms.jit)
vmap = _kw(transforms.vmap)
scan = _kw(transforms.scan)
grad = _kw(accepts_diff_state(transforms.grad))
value_and_grad = _kw(accepts_diff_state(transforms.value_and_grad))
remat = _kw(transforms.remat)
eval_shape = _kw(transforms.eval_shape)
cond = _kw(transforms.cond)
switch = _kw(transforms.switch)
fori_loop = _kw(transforms.fori_loop)
while_loop = _kw(transforms.while_loop)

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

from ..graph import _graph
from ..graph._diff_state import accepts_diff_state
from ..graph._graph_mode import accepts_graph_keywords as _kw
from ..graph._graph_state import as_states, unbundle
from ..graph._variables import Variable
from ._autodiff import grad as _grad
from ._autodiff import value_and_grad as _value_and_grad
from ._control import cond as _cond
from ._control import fori_loop as _fori_loop
from ._control import switch as _switch
from ._control import while_loop as _while_loop
from ._eval_shape import eval_shape as _eval_shape
from ._jit import jit as _jit
from ._jit import jit_partial as _jit_partial
from ._pmap import pmap as _pmap
from ._prefix import prefix as _prefix
from ._remat import remat as _remat
from ._scan import scan as _scan
from ._shard_map import shard_map as _shard_map
from ._staging import checkify as _checkify
from ._vjp import jvp as _jvp
from ._vjp import vjp as _vjp
from ._vmap import vmap as _vmap


def _clone(node: Any, *, graph: bool = True) -> Any:
  """``clone`` that also copies plain pytrees of Variables (e.g. States)."""
  if _graph.is_node(node) or isinstance(node, list | dict):
    return _graph.clone(node, graph=graph)
  return jax.tree.map(
    lambda x: x.copy() if isinstance(x, Variable) else x,
    node,
    is_leaf=lambda x: isinstance(x, Variable),
  )


split = _kw(_graph.split)


def _merge(*args: Any, copy: bool = False) -> Any:
  return _graph.merge(*unbundle(args), copy=copy)


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
jit = _kw(_jit)
vmap = _kw(_vmap)
scan = _kw(_scan)
grad = _kw(accepts_diff_state(_grad))
value_and_grad = _kw(accepts_diff_state(_value_and_grad))
remat = _kw(_remat)
eval_shape = _kw(_eval_shape)
cond = _kw(_cond)
switch = _kw(_switch)
fori_loop = _kw(_fori_loop)
while_loop = _kw(_while_loop)
vjp = _kw(_vjp)
jvp = _kw(_jvp)
jit_partial = _kw(_jit_partial)
pmap = _kw(_pmap)
shard_map = _kw(_shard_map)
prefix = _kw(_prefix)
checkify = _kw(_checkify)

"""The graph API and lifted transforms with flax's ``graph=``/``graph_updates=`` keywords.

flax.nnx 0.12 adds ``graph=`` (graph or tree mode) and ``graph_updates=`` to
its graph functions and transforms. nnx_eqx keeps sharing in every mode, so
for graphs without shared references both modes give the same results; these
wrappers accept the keywords (see :mod:`nnx_eqx._graph_mode`) and call the
engine's functions. ``nnx.split`` and friends are these wrappers.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax

from ..graph._errors import refuse_other_library
from ..graph.api import _functional as _graph
from ..graph.api import _module_iter
from ..graph.api._graph_state import as_states, unbundle
from ..graph.api._prefix import prefix as _graph_prefix
from ..graph.state._diff_state import accepts_diff_state
from ..graph.variables._variables import Variable
from ..graph.walk._graph_mode import accepts_graph_keywords as _accepts_graph_keywords
from ..graph.walk._graph_mode import get_graph_mode
from .axes._specs import PREFIX_KEYWORDS, check_prefix_keywords
from .lifted._autodiff import grad as _grad
from .lifted._autodiff import value_and_grad as _value_and_grad
from .lifted._control import cond as _cond
from .lifted._control import fori_loop as _fori_loop
from .lifted._control import switch as _switch
from .lifted._control import while_loop as _while_loop
from .lifted._eval_shape import eval_shape as _eval_shape
from .lifted._jit import jit as _jit
from .lifted._jit import jit_partial as _jit_partial
from .lifted._pmap import pmap as _pmap
from .lifted._remat import remat as _remat
from .lifted._scan import scan as _scan
from .lifted._shard_map import shard_map as _shard_map
from .lifted._staging import checkify as _checkify
from .lifted._vjp import jvp as _jvp
from .lifted._vjp import vjp as _vjp
from .lifted._vmap import vmap as _vmap


def _kw(fn: Any, tree_check: str | None = None) -> Any:
  """:func:`accepts_graph_keywords`, and the prefix arguments the transform is
  built with checked for the mode (:func:`check_prefix_keywords`)."""
  inner = _accepts_graph_keywords(fn, tree_check)
  if not _takes_prefixes(fn):
    return inner

  @functools.wraps(inner)
  def wrapper(*args: Any, **kwargs: Any) -> Any:
    graph = kwargs.get("graph")
    check_prefix_keywords(kwargs, get_graph_mode() if graph is None else graph, fn.__name__)
    return inner(*args, **kwargs)

  return wrapper


def _takes_prefixes(fn: Any) -> bool:
  params = inspect.signature(fn).parameters
  return any(k in params for k in PREFIX_KEYWORDS)


def _clone(node: Any, variables: bool = True, *, graph: bool = True, arrays: bool = False) -> Any:
  """``clone`` that also copies plain pytrees of Variables (e.g. States)."""
  refuse_other_library("nnx.clone", node)
  if _graph.is_node(node) or isinstance(node, list | dict):
    return _graph.clone(node, variables, graph=graph, arrays=arrays)
  if not variables:
    return _graph.clone(node, variables, graph=graph, arrays=arrays) if arrays else node
  return jax.tree.map(
    lambda x: (
      (_graph.copy_arrays(x.copy()) if arrays else x.copy()) if isinstance(x, Variable) else x
    ),
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
iter_modules = _kw(_module_iter.iter_modules)
jit = _kw(_jit, "callable")
vmap = _kw(_vmap, "callable")
scan = _kw(_scan, "carry")
grad = _kw(accepts_diff_state(_grad))
value_and_grad = _kw(accepts_diff_state(_value_and_grad))
remat = _kw(_remat, "callable")
eval_shape = _kw(_eval_shape, "call")
cond = _kw(_cond, "call")
switch = _kw(_switch, "call")
fori_loop = _kw(_fori_loop, "call")
while_loop = _kw(_while_loop, "call")
vjp = _kw(_vjp, "call")
jvp = _kw(_jvp, "call")
jit_partial = _kw(_jit_partial, "callable")
pmap = _kw(_pmap, "callable")
shard_map = _kw(_shard_map, "callable")
prefix = _kw(_graph_prefix)
checkify = _kw(_checkify, "callable")

"""``nnx.transforms.transforms`` (flax.nnx's module path): ``cond``, ``switch``,
``eval_shape``, ``checkify``, ``make_jaxpr`` and ``resolve_kwargs``.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from collections.abc import Callable

from ._graph_keywords import checkify as checkify
from ._graph_keywords import cond as cond
from ._graph_keywords import eval_shape as eval_shape
from ._graph_keywords import switch as switch
from .general import resolve_kwargs as resolve_kwargs
from .lifted._control import CondBranches, cond_branches
from .lifted._staging import make_jaxpr as make_jaxpr


def _get_simple_cond_fn(f: Callable, graph: bool) -> CondBranches:
  """flax.nnx 0.12.12's private helper: the cached branch wrapper of ``f`` that
  ``cond``/``switch`` use in mode ``graph`` (the same object for the same
  ``f`` and ``graph`` while ``f`` lives; a fresh one for a callable that cannot
  be weakly referenced).

  Example:
    >>> from nnx_eqx.transforms import transforms
    >>> def f(x):
    ...   return x
    >>> transforms._get_simple_cond_fn(f, True) is transforms._get_simple_cond_fn(f, True)
    True
  """
  return cond_branches(f, graph)

"""``nnx.transforms.general`` (flax.nnx's module path): ``split_inputs`` / ``merge_inputs``.

A pair of decorators that lift a plain JAX transform by hand: ``split_inputs`` (outside
the transform) turns the graph nodes among the arguments into pure pytrees
(``nnx.to_tree``), and ``merge_inputs`` (inside) rebuilds them, runs the function and
hands back the arguments' graph nodes with the output, so ``split_inputs`` writes
their new state into the caller's objects. Same contract as flax.nnx's: the inner
function returns ``(args, out)``, which a transform with output axes must account for
(``out_axes=(in_axes, out_axis)``). Prefer the lifted ``nnx.jit``, ``nnx.vmap``, ….
"""

from __future__ import annotations

import functools
import inspect
from collections import abc
from typing import Any, TypeVar, overload

from ..graph.api._contexts import update_context
from ..graph.api._tree_form import clear_non_graph_nodes, from_tree, to_tree

_F = TypeVar("_F", bound=abc.Callable[..., Any])

_TAG = "split_merge_inputs"


@overload
def split_inputs(*, ctxtag: abc.Hashable = _TAG) -> abc.Callable[[_F], _F]: ...
@overload
def split_inputs(f: _F, *, ctxtag: abc.Hashable = _TAG) -> _F: ...
def split_inputs(f: Any = None, *, ctxtag: abc.Hashable = _TAG) -> Any:
  """Outer half of a hand-lifted transform: graph-node arguments in, pure pytrees down.

  Args:
    f: the transformed function (itself wrapping a ``merge_inputs`` function); omitted,
      returns a decorator.
    ctxtag: the tag shared with the matching ``merge_inputs``.

  Returns:
    A function taking graph nodes among its positional arguments; the Modules and
    Variables passed in carry the inner function's updates afterwards.

  Raises:
    ValueError: if ``f`` does not return the ``(args, out)`` pair ``merge_inputs``
      makes; errors of ``f`` propagate and leave the arguments unchanged.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.transforms.general import merge_inputs, split_inputs
    >>> @split_inputs
    ... @jax.jit
    ... @merge_inputs
    ... def forward_and_zero(model, x):
    ...   y = model(x)
    ...   model.kernel[...] = jnp.zeros_like(model.kernel[...])
    ...   return y
    >>> model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> forward_and_zero(model, jnp.ones((1, 2))).shape, float(model.kernel[...].sum())
    ((1, 2), 0.0)
  """
  if f is None:
    return functools.partial(split_inputs, ctxtag=ctxtag)

  @functools.wraps(f)
  def split_inputs_wrapper(*args: Any) -> Any:
    with update_context(ctxtag):
      result = f(*to_tree(args, ctxtag=ctxtag))
      if not (isinstance(result, tuple) and len(result) == 2):
        raise ValueError(
          f"split_inputs: {getattr(f, '__name__', f)!r} returned {type(result).__name__},"
          " not the (args, out) pair of a merge_inputs function. Fix: decorate the"
          " innermost function with merge_inputs (and give output-axis arguments such as"
          " jax.vmap's out_axes the form (in_axes, out_axis))."
        )
      _, out = from_tree(result, ctxtag=ctxtag, is_inner=False)
      return out

  return split_inputs_wrapper


@overload
def merge_inputs(*, ctxtag: abc.Hashable = _TAG) -> abc.Callable[[_F], _F]: ...
@overload
def merge_inputs(f: _F, *, ctxtag: abc.Hashable = _TAG) -> _F: ...
def merge_inputs(f: Any = None, *, ctxtag: abc.Hashable = _TAG) -> Any:
  """Inner half of a hand-lifted transform: pure pytrees in, graph nodes rebuilt.

  Args:
    f: the user function, taking graph nodes; omitted, returns a decorator.
    ctxtag: the tag shared with the matching ``split_inputs``.

  Returns:
    A function of the pure arguments returning ``(args, out)`` in pure form, where
    ``args`` keeps only the arguments' graph nodes (other leaves become None).

  Raises:
    StateMismatchError: if the pure arguments do not fit their GraphDefs.

  Example:
    >>> import jax, jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.transforms.general import merge_inputs, split_inputs
    >>> model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    >>> y = split_inputs(jax.lax.cond)(
    ...   False, merge_inputs(lambda m, x: m(x)), merge_inputs(lambda m, x: x + 1),
    ...   model, jnp.ones((1, 2)))
    >>> y.tolist()
    [[2.0, 2.0]]
  """
  if f is None:
    return functools.partial(merge_inputs, ctxtag=ctxtag)

  @functools.wraps(f)
  def merge_inputs_wrapper(*pure_args: Any) -> tuple[Any, Any]:
    args = from_tree(pure_args, ctxtag=ctxtag, is_inner=True)
    out = f(*args)
    return to_tree((clear_non_graph_nodes(args), out), ctxtag=ctxtag)

  return merge_inputs_wrapper


@overload
def resolve_kwargs() -> abc.Callable[[_F], _F]: ...
@overload
def resolve_kwargs(fun: abc.Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> tuple: ...
def resolve_kwargs(fun: Any = None, args: Any = None, kwargs: Any = None) -> Any:
  """Turns keyword arguments into positional ones by ``fun``'s signature (defaults
  filled in), for transforms whose prefixes (``in_axes``, ...) are positional.

  Called without arguments it is a decorator that does this before every call (as
  flax.nnx's ``transforms.transforms.resolve_kwargs``).

  Args:
    fun: the function whose signature binds the arguments; a ``functools.partial``
      takes ``args``/``kwargs`` only positionally.
    args: the positional arguments.
    kwargs: the keyword arguments.

  Returns:
    The positional argument tuple (or, without arguments, a decorator).

  Raises:
    TypeError: if the arguments do not bind (the signature's message), or a keyword
      has no position (a keyword-only parameter or ``**kwargs``).
    ValueError: if ``fun`` is given without ``args`` and ``kwargs``.

  Example:
    >>> from nnx_eqx.transforms.general import resolve_kwargs
    >>> resolve_kwargs(lambda x, y=2, z=3: None, (1,), {"z": 4})
    (1, 2, 4)
    >>> @resolve_kwargs()
    ... def f(*args):
    ...   return args
    >>> f(1)
    (1,)
  """
  if fun is None:

    def decorator(f: _F) -> _F:
      @functools.wraps(f)
      def resolve_kwargs_wrapper(*a: Any, **k: Any) -> Any:
        return f(*resolve_kwargs(f, a, k))

      return resolve_kwargs_wrapper  # type: ignore[return-value]

    return decorator
  if args is None or kwargs is None:
    raise ValueError("resolve_kwargs: pass both args and kwargs with fun")
  if isinstance(fun, functools.partial):
    if kwargs:
      raise TypeError(
        "resolve_kwargs: keyword arguments cannot be placed by position for a"
        f" functools.partial ({sorted(kwargs)}). Fix: pass them positionally."
      )
    return tuple(args)
  bound = inspect.signature(fun).bind(*args, **kwargs)
  bound.apply_defaults()
  if bound.kwargs:
    raise TypeError(
      f"resolve_kwargs: keyword arguments {sorted(bound.kwargs)} of"
      f" {getattr(fun, '__name__', fun)!r} have no position (keyword-only or **kwargs)."
      " Fix: make them positional parameters or pass them through a closure."
    )
  return bound.args

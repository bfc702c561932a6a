"""``nnx.deprecations`` (as flax.nnx.deprecations): ``deprecated``, which makes an old
name for a renamed function (``nnx.pure`` for ``nnx.as_pure``, ``nnx.vars_as`` for
``nnx.with_vars``)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def deprecated(new_fn: F) -> F:
  """An alias of ``new_fn`` that emits a ``DeprecationWarning`` naming it on each call.

  Args:
    new_fn: the function that replaces the deprecated name.

  Returns:
    The wrapper (same signature and docstring, with a deprecation note).

  Raises:
    DeprecationWarning: as a warning, on every call.

  Example:
    >>> import warnings
    >>> from nnx_eqx.deprecations import deprecated
    >>> old_abs = deprecated(abs)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...   warnings.simplefilter("always")
    ...   old_abs(-2), str(caught[0].message)
    (2, 'This function is deprecated. Use abs instead.')
  """
  name = getattr(new_fn, "__name__", repr(new_fn))

  @functools.wraps(new_fn)
  def wrapper(*args: Any, **kwargs: Any) -> Any:
    warnings.warn(
      f"This function is deprecated. Use {name} instead.", DeprecationWarning, stacklevel=2
    )
    return new_fn(*args, **kwargs)

  wrapper.__doc__ = f"Deprecated: use ``{name}``.\n\n{new_fn.__doc__ or ''}"
  return wrapper  # type: ignore[return-value]

"""Views of a module graph: ``nnx.view``, ``nnx.with_attributes``, ``nnx.view_info``.

A *view* is a new graph whose Modules are shallow copies of the originals:
Variables (and so parameters) are shared, plain attributes are copied, so
changing a flag such as ``deterministic`` on the view leaves the original
untouched. A Module opts into ``nnx.view`` keywords with a ``set_view``
method that returns the keywords it did not use; Modules without one accept
the *mode flags* they already hold as attributes (``deterministic``,
``use_running_average``, ``decode``, ``inference``).
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from ..graph._errors import GraphStructureError, UnknownAttributeError
from ..graph.api._functional import is_node
from ..graph.pytree._view import PRIVATE_CACHES
from ..graph.state._filters import Filter, to_predicate
from ..graph.state._state import State
from ..graph.variables._variables import Variable
from ._pytree import Pytree

A = TypeVar("A")

MODE_FLAGS: dict[str, str] = {
  "deterministic": "if True, the module runs without randomness (e.g. no dropout masking).",
  "use_running_average": "if True, stored batch statistics are used instead of batch ones.",
  "decode": "if True, the module runs in autoregressive decoding mode.",
  "inference": "if True, the module runs in inference mode (Equinox's flag).",
}
"""Attributes that ``nnx.view`` sets on Modules that define no ``set_view``."""


def _copy_graph(node: Any, visit, memo: dict[int, Any], var=None) -> Any:
  """Copies every Pytree/Module reachable from ``node`` (sharing preserved), calling
  ``visit(path, copy)`` on each copy. Variables are replaced by ``var(path, v)``
  (once per Variable) when given, else kept; arrays are kept."""

  def rec(x: Any, path: tuple) -> Any:
    if isinstance(x, Variable):
      if var is None:
        return x
      if id(x) not in memo:
        memo[id(x)] = var(path, x)
      return memo[id(x)]
    if isinstance(x, Pytree):
      if id(x) in memo:
        return memo[id(x)]
      new = object.__new__(type(x))
      memo[id(x)] = new
      # (without the original's cached records: the copy's flags may change)
      d = {k: v for k, v in x.__dict__.items() if k not in PRIVATE_CACHES}
      new.__dict__.update(d)
      if "_nnx_items" in d:
        new.__dict__["_nnx_items"] = [rec(v, path + (i,)) for i, v in enumerate(d["_nnx_items"])]
      for k, v in d.items():
        if not k.startswith("_nnx_"):
          new.__dict__[k] = rec(v, path + (k,))
      visit(path, new)
      return new
    if type(x) in (list, tuple):
      return type(x)(rec(v, path + (i,)) for i, v in enumerate(x))
    if type(x) is dict:
      return {k: rec(v, path + (k,)) for k, v in x.items()}
    if isinstance(x, State):
      return type(x)._from_dict({k: rec(v, path + (k,)) for k, v in x.items()})
    return x

  return rec(node, ())


def _own_set_view(m: Any):
  fn = getattr(type(m), "set_view", None)
  return fn if callable(fn) else None


def _accepted(fn) -> tuple[set[str], bool]:
  params = inspect.signature(fn).parameters.values()
  named = {
    p.name
    for p in params
    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
  }
  return named, any(p.kind == p.VAR_KEYWORD for p in params)


def view_keywords(fn: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
  """The keywords of ``kwargs`` that the ``set_view`` method ``fn`` takes (all of them
  if it takes ``**kwargs``), and the names it uses."""
  named, var_kw = _accepted(fn)
  if var_kw:
    return kwargs, set(kwargs)
  return {k: v for k, v in kwargs.items() if k in named}, named


def set_mode_flags(m: Any, kwargs: dict[str, Any], write: Any = None) -> set[str]:
  """``nnx.view``'s step for a Module ``m`` with no ``set_view``: the keywords naming a
  mode flag it holds are set (``write(name, value)``, by default into ``__dict__``;
  None keeps the flag, as flax.nnx's built-in ``set_view`` methods do). Returns the
  keywords used."""
  d = vars(m)
  used = {k for k in kwargs if k in MODE_FLAGS and k in d}
  for k in used:
    if kwargs[k] is not None:
      if write is None:
        d[k] = kwargs[k]
      else:
        write(k, kwargs[k])
  return used


def view(
  node: A,
  /,
  *,
  only: Filter = ...,
  raise_if_not_found: bool = True,
  graph: bool | None = None,
  **kwargs: Any,
) -> A:
  """A copy of ``node`` in another mode (e.g. evaluation), sharing its Variables.

  Each selected Module with a ``set_view`` method is called with the keywords
  its signature accepts (all of them if it takes ``**kwargs``); others get the
  keywords that name a mode flag they hold (``deterministic``,
  ``use_running_average``, ``decode``, ``inference``) set as attributes; a flag
  given as ``None`` is left as it is (as flax.nnx's layers do).

  Args:
    node: a Module (or container of Modules).
    only: a filter selecting the Modules to change (default: all).
    raise_if_not_found: raise when a keyword is used by no Module.
    graph: accepted for flax compatibility (graph and tree mode agree here).
    **kwargs: the mode settings, e.g. ``deterministic=True``.

  Returns:
    The new graph; its Variables are the original's (``is``-identical).

  Raises:
    UnknownAttributeError: (a ``ValueError``) if ``raise_if_not_found`` and a
      keyword was used by no Module; the message lists the unused keys.

  Example:
    >>> import nnx_eqx as nnx
    >>> d = nnx.Dropout(0.5, deterministic=False)
    >>> e = nnx.view(d, deterministic=True)
    >>> d.deterministic, e.deterministic
    (False, True)
  """
  del graph
  pred = to_predicate(only)
  remaining = set(kwargs)

  def visit(path: tuple, m: Any) -> None:
    if not pred(path, m):
      return
    fn = _own_set_view(m)
    if fn is None:
      remaining.difference_update(set_mode_flags(m, kwargs))
      return
    taken, used = view_keywords(fn, kwargs)
    fn(m, **taken)
    remaining.difference_update(used)

  out = _copy_graph(node, visit, {})
  if raise_if_not_found and remaining:
    raise UnknownAttributeError(
      f"Unused keys found in nnx.view: {sorted(remaining)}. Fix: check the spelling,"
      " select Modules that accept them, or pass raise_if_not_found=False."
    )
  return out


def with_attributes(
  node: A,
  /,
  *,
  only: Filter = ...,
  raise_if_not_found: bool = True,
  graph: bool | None = None,
  **attributes: Any,
) -> A:
  """A copy of ``node`` with ``attributes`` set on every selected Module that has them.

  Unlike ``Module.set_attributes`` the original is left unchanged; the copy
  shares the original's Variables.

  Args:
    node: a Module (or container of Modules).
    only: a filter selecting the Modules to change (default: all).
    raise_if_not_found: raise when an attribute exists on no selected Module.
    graph: accepted for flax compatibility (graph and tree mode agree here).
    **attributes: attribute values, e.g. ``use_running_average=True``.

  Returns:
    The new graph.

  Raises:
    UnknownAttributeError: (a ``ValueError``) if ``raise_if_not_found`` and an
      attribute is held by no selected Module; the message names it.

  Example:
    >>> import nnx_eqx as nnx
    >>> bn = nnx.BatchNorm(3, use_running_average=False, rngs=nnx.Rngs(0))
    >>> ev = nnx.with_attributes(bn, use_running_average=True)
    >>> bn.use_running_average, ev.use_running_average, ev.mean is bn.mean
    (False, True, True)
  """
  del graph
  pred = to_predicate(only)
  remaining = set(attributes)

  def visit(path: tuple, m: Any) -> None:
    if not pred(path, m):
      return
    for k, v in attributes.items():
      if k in m.__dict__ and not k.startswith("_nnx_"):
        m.__dict__[k] = v
        remaining.discard(k)

  out = _copy_graph(node, visit, {})
  if raise_if_not_found and remaining:
    raise UnknownAttributeError(
      f"with_attributes: Could not find at least one instance of the following attributes:"
      f" {sorted(remaining)}. Fix: check the spelling, or pass raise_if_not_found=False."
    )
  return out


def _parse_args_section(doc: str) -> dict[str, list[str]]:
  """``{arg: description lines}`` from a Google-style docstring's ``Args:`` section."""
  start = doc.find("Args:\n")
  if start < 0:
    return {}
  out: dict[str, list[str]] = {}
  current: list[str] | None = None
  for line in doc[start + 6 :].splitlines():
    if line.strip() and not line.startswith(" "):
      break  # next section (Returns:, Raises:, ...)
    if line.startswith("  ") and not line.startswith("    ") and ":" in line:
      name, _, rest = line.strip().partition(":")
      current = out.setdefault(name.strip(), [])
      current.append(rest.strip())
    elif current is not None and line.strip():
      current.append(line.strip())
  return out


def _annotation(p: inspect.Parameter) -> str:
  a = p.annotation
  return a if isinstance(a, str) else inspect.formatannotation(a)


def _describe(cls: type, fn) -> list[str]:
  lines = [f"{cls.__qualname__}:"]
  doc = inspect.getdoc(fn)
  if not doc:
    return lines + [f"  set_view{inspect.signature(fn)}"]
  described = _parse_args_section(doc)
  for p in inspect.signature(fn).parameters.values():
    if p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
      continue
    head = f"  {p.name}: {_annotation(p)}"
    lines.append(head if p.default is p.empty else f"{head} = {p.default}")
    lines += [f"    {d}" for d in described.get(p.name, [])]
  return lines


def view_info(node: Any, /, *, only: Filter = ..., graph: bool | None = None) -> str:
  """Describes the keywords ``nnx.view`` accepts for each Module class in ``node``.

  Classes are listed in name order. A class with its own ``set_view`` shows
  that method's parameters with their docstring descriptions; other classes
  show the mode flags they hold (``deterministic``, ``use_running_average``,
  ...). Classes that accept nothing are left out.

  Args:
    node: a Module (or container of Modules).
    only: a filter selecting the Modules to describe (default: all).
    graph: accepted for flax compatibility.

  Returns:
    The description (an empty string when nothing is accepted).

  Raises:
    GraphStructureError: if ``node`` is not a graph node.

  Example:
    >>> import nnx_eqx as nnx
    >>> print(nnx.view_info(nnx.Dropout(0.5)))
    Dropout:
      deterministic: bool | None = None
        if True, the module runs without randomness (e.g. no dropout masking).
  """
  del graph
  pred = to_predicate(only)
  classes: dict[type, list[str]] = {}

  def visit(path: tuple, m: Any) -> None:
    if not pred(path, m) or type(m) in classes:
      return
    fn = _own_set_view(m)
    if fn is not None:
      classes[type(m)] = _describe(type(m), fn)
      return
    flags = [k for k in MODE_FLAGS if k in m.__dict__ and not is_node(m.__dict__[k])]
    if flags:
      lines = [f"{type(m).__qualname__}:"]
      for k in flags:  # described as flax.nnx's layers declare them in their ``set_view``
        lines += [f"  {k}: bool | None = None", f"    {MODE_FLAGS[k]}"]
      classes[type(m)] = lines

  _copy_graph(node, visit, {})
  ordered = sorted(classes.items(), key=lambda kv: kv[0].__qualname__)
  return "\n".join(line for _, lines in ordered for line in lines)


def with_vars(
  node: A,
  /,
  *,
  ref: bool | None = None,
  hijax: bool | None = None,
  mutable: bool | None = None,
  only: Filter = ...,
  allow_duplicates: bool = False,
) -> A:
  """A copy of ``node`` whose selected Variables are copies in another storage mode.

  ``ref=True`` stores each selected Variable's value in a ``jax.Ref`` (ref
  mode), ``ref=False`` in a plain array; ``hijax=True`` makes them hijax
  Variables (see ``nnx.variablelib.HijaxVariable``), ``hijax=False`` ordinary
  ones. Modules and Pytrees are copied; Variables already in the asked modes
  (and unselected ones) are shared with the original.

  Args:
    node: a Module, Pytree, Variable, or list/tuple/dict of them.
    ref: the storage mode to switch the selected Variables to.
    hijax: whether the selected Variables become hijax Variables.
    mutable: accepted for flax compatibility.
    only: a filter selecting the Variables to convert (default: all).
    allow_duplicates: allow a selected Variable to be reachable from several
      paths (all of them then see the one copy).

  Returns:
    The new structure.

  Raises:
    GraphStructureError: (a ``ValueError``) if a selected Variable is reachable
      from several paths and ``allow_duplicates`` is False; both paths are named.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
    >>> r = nnx.with_vars(m, ref=True)
    >>> r.kernel.ref, m.kernel.ref, r.kernel.shape
    (True, False, (1, 1))
  """
  del mutable
  pred = to_predicate(only)
  seen: dict[int, tuple] = {}

  def convert(path: tuple, v: Variable) -> Variable:
    ref_ok = ref is None or v.ref == ref
    hijax_ok = hijax is None or v.hijax == hijax
    if (ref_ok and hijax_ok) or not pred(path, v):
      return v
    return v.copy(ref=ref, hijax=v.hijax if hijax is None else hijax)

  def var(path: tuple, v: Variable) -> Variable:
    return convert(path, v)

  def check(path: tuple, v: Variable) -> None:
    if id(v) in seen and not allow_duplicates and convert(path, v) is not v:
      raise GraphStructureError(
        f"with_vars: Found duplicate at paths {_path(seen[id(v)])} and {_path(path)}: the"
        " same Variable is reachable twice. Fix: pass allow_duplicates=True, or give"
        " each path its own Variable."
      )
    seen.setdefault(id(v), path)

  _walk_vars(node, check)
  return _copy_graph(node, lambda path, m: None, {}, var=var)


def _path(path: tuple) -> str:
  return "/".join(map(str, path)) or "<root>"


def _walk_vars(node: Any, fn) -> None:
  """Calls ``fn(path, variable)`` at every path where a Variable is reached."""
  visited: set[int] = set()

  def rec(x: Any, path: tuple) -> None:
    if isinstance(x, Variable):
      fn(path, x)
    elif isinstance(x, Pytree):
      if id(x) in visited:
        return
      visited.add(id(x))
      d = x.__dict__
      for i, v in enumerate(d.get("_nnx_items", ())):
        rec(v, path + (i,))
      for k in sorted(d):
        if not k.startswith("_nnx_"):
          rec(d[k], path + (k,))
    elif type(x) in (list, tuple):
      for i, v in enumerate(x):
        rec(v, path + (i,))
    elif type(x) is dict or isinstance(x, State):
      for k, v in x.items():
        rec(v, path + (k,))

  rec(node, ())


__all__ = ["MODE_FLAGS", "view", "with_attributes", "view_info", "with_vars"]

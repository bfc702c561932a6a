"""``nnx.set_partitioning``: sharding annotations for an existing model, by path.

``nnx.with_partitioning`` annotates what an initializer returns; a model built
elsewhere (``nnx.from_eqx`` of an Equinox model, a checkpoint, a third-party
module) has no initializer to wrap. This sets each Variable's ``out_sharding``
from a table of path patterns instead, in one call.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from jax.sharding import PartitionSpec

from ..graph.state._filters import Filter, to_predicate
from ..graph.variables._variables import Variable
from ..graph.walk._duplicates import variables_with_paths
from ._spmd_rules import Rules, ShardingError

Spec = PartitionSpec | Sequence[Any] | None


class UnmatchedPatternError(ShardingError):
  """A pattern given to ``nnx.set_partitioning`` matched no Variable path (a typo,
  or a layer the model does not have); every such pattern is named, with the
  nearest paths the model has."""


def set_partitioning(
  node: Any,
  partitioning: Mapping[str, Spec] | Sequence[tuple[str, Spec]],
  *,
  rules: Rules | None = None,
  only: Filter = Variable,
  allow_unmatched: bool = False,
) -> dict[str, list[str]]:
  """Sets ``out_sharding`` metadata on ``node``'s Variables by path pattern.

  Each Variable takes the spec of the first pattern (in the order given) that
  matches one of its paths. A path is written with ``/`` between keys, as
  ``nnx.state`` keys read (``blocks/0/attn/query_proj/weight``); a pattern is a
  regular expression that must match the whole path or a whole tail of it that
  starts after a ``/``, so an Equinox or NNX field name alone (``"weight"``,
  ``"query_proj/weight"``) selects that field everywhere, and
  ``r"blocks/\\d+/mlp/.*"`` one subtree. The spec has one entry per dimension of
  the Variable's value: a mesh axis name, a logical axis name (mapped by
  ``rules``, the Variable's own or the context's, as ``nnx.get_partition_spec``
  does), a tuple of names, or ``None`` (replicated); a ``PartitionSpec`` is
  read the same way, and a spec of ``None`` replicates every dimension. A
  Variable no pattern matches keeps its metadata.

  This is the metadata ``nnx.with_partitioning`` gives at initialization (flax.nnx
  0.12's ``out_sharding``, plus ``sharding_rules`` when ``rules`` is given), so
  ``nnx.get_partition_spec``, ``nnx.get_named_sharding``, ``nnx.stack``'s stack axis,
  ``nnx.scan``/``nnx.vmap``'s ``transform_metadata`` and checkpoint restores read it
  as they read flax's. A seed-era ``sharding`` entry is replaced.

  Args:
    node: a Module (any graph node: a converted Equinox model too).
    partitioning: ``{pattern: spec}`` or a sequence of ``(pattern, spec)`` pairs.
    rules: logical→mesh axis rules stored on each annotated Variable as its
      ``sharding_rules`` (as ``nnx.with_logical_partitioning(..., rules=)``).
    only: a filter selecting the Variables that may be annotated (default: all).
    allow_unmatched: if True, a pattern that matches nothing is reported in the
      result only; by default it raises, so a typo does not pass silently.

  Returns:
    ``{pattern: [path, ...]}``: the paths each pattern annotated, in order (empty
    lists only with ``allow_unmatched=True``).

  Raises:
    UnmatchedPatternError: some patterns matched no Variable (each is named, with
      the nearest paths); nothing is changed then.
    ShardingError: a spec has more or fewer entries than its Variable's value has
      dimensions (the path, spec and shape are named); a pattern is not a valid
      regular expression.
    UnknownFilterError: if ``only`` is not a valid filter.

  Example:
    >>> import equinox as eqx, jax, nnx_eqx as nnx
    >>> mlp = nnx.from_eqx(eqx.nn.MLP(4, 2, 8, 1, key=jax.random.key(0)))
    >>> found = nnx.set_partitioning(mlp, {"layers/0/weight": ("model", None),
    ...                                    "layers/1/weight": (None, "model")})
    >>> found["layers/0/weight"], mlp.layers[0].weight.out_sharding
    (['layers/0/weight'], ('model', None))
    >>> nnx.get_partition_spec(nnx.state(mlp))["layers"][1]["weight"].value
    P(None, 'model')
    >>> try:
    ...   nnx.set_partitioning(mlp, {"layers/2/weight": ("model", None)})  # a typo
    ... except nnx.UnmatchedPatternError as e:
    ...   print(str(e)[:70])
    nnx.set_partitioning: 1 pattern matched no Variable: 'layers/2/weight'
  """
  items = list(partitioning.items() if isinstance(partitioning, Mapping) else partitioning)
  compiled = [(pattern, _compile(pattern), spec) for pattern, spec in items]
  pred = to_predicate(only)
  variables = variables_with_paths(node)
  found: dict[str, list[str]] = {pattern: [] for pattern, _, _ in compiled}
  plan: list[tuple[Variable, str, Any]] = []
  for v, paths in variables:
    texts = [_text(p) for p in paths if pred(p, v)]
    for pattern, regex, spec in compiled:
      hit = next((t for t in texts if regex.fullmatch(t)), None)
      if hit is not None:
        found[pattern].append(hit)
        plan.append((v, hit, _names(spec, v, hit)))
        break
  missing = [p for p, hits in found.items() if not hits]
  if missing and not allow_unmatched:
    raise _unmatched(missing, [_text(p) for _, ps in variables for p in ps])
  for v, _, names in plan:
    md = {k: x for k, x in v._metadata.items() if k != "sharding"}
    md["out_sharding"] = names
    if rules is not None:
      md["sharding_rules"] = tuple(tuple(r) for r in rules)
    v.set_metadata(md)
  return found


def _text(path: tuple) -> str:
  return "/".join(map(str, path))


def _compile(pattern: str) -> re.Pattern:
  try:
    return re.compile(rf"(?:.*/)?(?:{pattern})")
  except re.error as e:
    raise ShardingError(
      f"nnx.set_partitioning: the pattern {pattern!r} is not a valid regular expression"
      f" ({e}). Fix: escape special characters (re.escape) or correct the pattern."
    ) from None


def _names(spec: Spec, v: Variable, path: str) -> tuple:
  shape = np.shape(v.get_value()) if hasattr(v.get_value(), "shape") else None
  if spec is None:
    return (None,) * len(shape) if shape is not None else ()
  names = tuple(spec)
  if shape is not None and len(names) != len(shape):
    raise ShardingError(
      f"nnx.set_partitioning: the spec {names} for {path} has {len(names)} entries but the"
      f" value has shape {shape}. Fix: give one entry per dimension (None for a replicated"
      " one); a stacked layer's arrays have the stack axis first."
    )
  return names


def _unmatched(missing: list[str], paths: list[str]) -> UnmatchedPatternError:
  parts = []
  for pattern in missing:
    near = difflib.get_close_matches(pattern, paths, n=3, cutoff=0.4)
    parts.append(f"{pattern!r}" + (f" (nearest paths: {', '.join(near)})" if near else ""))
  n = len(missing)
  return UnmatchedPatternError(
    f"nnx.set_partitioning: {n} pattern{'s' if n > 1 else ''} matched no Variable:"
    f" {'; '.join(parts)}. Fix: correct the pattern (paths read as in nnx.state, e.g."
    " 'blocks/0/attn/query_proj/weight'; a field name alone matches it everywhere), or"
    " pass allow_unmatched=True to share one table between models."
  )

"""Where the seed-era class wrappers plug into ``nnx.scan`` and ``nnx.remat``.

``nnx.scan(Block, ...)`` and ``nnx.remat(Block)`` on a Module *class* build the
seed-era ``nnx.Scan`` and ``nnx.Remat`` wrappers. Those live in
``nnx_eqx.legacy``, which builds on this package, so legacy registers them here
(keys ``"scan"`` and ``"remat"``) when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SEED_HOOKS: dict[str, Callable[..., Any]] = {}

"""One clear error at import where the installed jax is older than nnx_eqx supports.

``nnx_eqx/__init__.py`` imports this module first, so an unsupported jax fails here
with the version needed instead of at some later ``from jax... import`` deep in the
package. The oldest supported version is the lower bound in ``pyproject.toml``, which
CI installs and tests (``.ci/run``).
"""

from __future__ import annotations

import re

import jax

#: The oldest jax (and jaxlib) nnx_eqx supports.
MIN_JAX = (0, 7, 2)


def check_jax_version(version: str) -> None:
  """Raises if ``version`` (a ``jax.__version__`` string) is older than :data:`MIN_JAX`.

  Args:
    version: e.g. ``"0.10.2"``, ``"0.12.0.1"`` or ``"0.8.0.dev20250101"``; only its
      first three numbers count.

  Raises:
    ImportError: naming the installed and the needed version, and the command
      that fixes it.

  Example:
    >>> from nnx_eqx._jax_version import check_jax_version
    >>> check_jax_version("0.12.0.1")
    >>> check_jax_version("0.6.2")
    Traceback (most recent call last):
    ...
    ImportError: nnx_eqx needs jax>=0.7.2 (and a matching jaxlib), but jax 0.6.2 is ...
  """
  found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
  parts = tuple(int(p or 0) for p in found.groups()) if found else ()
  if parts and parts < MIN_JAX:
    need = ".".join(map(str, MIN_JAX))
    raise ImportError(
      f"nnx_eqx needs jax>={need} (and a matching jaxlib), but jax {version} is installed."
      f' Fix: pip install -U "jax>={need}" "jaxlib>={need}"'
    )


check_jax_version(jax.__version__)

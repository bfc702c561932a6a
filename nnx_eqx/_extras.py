"""Optional dependencies, each named by the extra of ``pyproject.toml`` that installs it.

nnx_eqx imports an optional package only where it is used; when it is missing, the
error names what needed it and the install command that adds it:

>>> from nnx_eqx._extras import missing_extra
>>> print(missing_extra("nnx_eqx.demo.load_data", "scikit-learn", "demo"))
nnx_eqx.demo.load_data needs scikit-learn, which is not installed. Fix: pip install
'nnx_eqx[demo]' (from a clone of the repository: pip install -e '.[demo]').
"""

from __future__ import annotations

import importlib
from types import ModuleType

# import name -> (distribution name, extra that installs it)
OPTIONAL: dict[str, tuple[str, str]] = {
  "sklearn": ("scikit-learn", "demo"),
  "tqdm": ("tqdm", "demo"),
  "matplotlib": ("matplotlib", "demo"),
  "hypothesis": ("hypothesis", "testing"),
  "orbax": ("orbax-checkpoint", "checkpoint"),
}


def missing_extra(needed_by: str, package: str, extra: str) -> ImportError:
  """The ImportError that says ``needed_by`` needs ``package`` and which extra adds it."""
  return ImportError(
    f"{needed_by} needs {package}, which is not installed. Fix: pip install"
    f" 'nnx_eqx[{extra}]' (from a clone of the repository: pip install -e '.[{extra}]')."
  )


def require(module: str, needed_by: str) -> ModuleType:
  """Imports ``module`` (a package of :data:`OPTIONAL` or one of its submodules).

  Raises:
    ImportError: the package is not installed; the message names ``needed_by``,
      the package and the extra that installs it. Any other import failure
      (a broken installation) propagates unchanged.
  """
  top = module.partition(".")[0]
  package, extra = OPTIONAL[top]
  try:
    return importlib.import_module(module)
  except ModuleNotFoundError as e:
    if e.name != top:  # the package is there, and something it imports is not
      raise
    raise missing_extra(needed_by, package, extra) from e

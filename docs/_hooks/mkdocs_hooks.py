"""mkdocs hooks: fail the build on an undocumented public name (see api_coverage.py)."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import api_coverage  # noqa: E402


def on_pre_build(config, **kwargs) -> None:
  docs_dir = pathlib.Path(config["docs_dir"])
  missing = api_coverage.missing_from(api_coverage.api_pages(docs_dir))
  undocumented = api_coverage.undocumented()
  if missing or undocumented:
    raise SystemExit(
      "API reference incomplete.\n"
      + "".join(f"  not in docs/api/*.md: {n}\n" for n in missing)
      + "".join(f"  no docstring: {n}\n" for n in undocumented)
    )


def on_config(config, **kwargs):
  # hypothesis' @st.composite strategies (nnx.testing.arrays, graphs, eqx_models,
  # eqx_inputs) wrap a function hypothesis generates in a temporary module, which
  # griffe cannot import; name it after the function the library defines.
  import inspect

  import nnx_eqx.testing

  for name, obj in vars(nnx_eqx.testing).items():
    inner = inspect.unwrap(obj) if callable(obj) else obj
    if inner is not obj and "<locals>" in getattr(inner, "__qualname__", ""):
      inner.__module__, inner.__qualname__ = obj.__module__, name
      inner.__doc__ = inner.__doc__ or obj.__doc__
  return config

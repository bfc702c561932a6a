"""Test configuration: 8 fake CPU devices, strict dtype promotion, jaxtyping
checks of the layers' shape annotations, hypothesis profiles (HYPOTHESIS_PROFILE),
the ``devices(n)`` marker, and doctest examples that need flax skipped where it is
not installed.

The fake devices only exist on the CPU backend (the XLA flag is ignored by GPU
and TPU backends), so on a one-GPU machine ``jax.device_count()`` is 1: a test
marked ``@pytest.mark.devices(n)`` is then skipped, naming the count it needs.
"""

import doctest
import importlib.util
import os
import re

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
# On a GPU every xdist worker is a process of its own: without this each would reserve
# 75 % of the GPU's memory at its first array. No effect on CPU.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_numpy_dtype_promotion", "strict")

# Check the jaxtyping annotations of the layers (``x: Float[Array, "*batch in"]``)
# on every call during the tests, as Equinox does. The hook must be installed
# before nnx_eqx is imported; it decorates ``nnx_eqx.nn`` with beartype.
import jaxtyping  # noqa: E402

jaxtyping.install_import_hook("nnx_eqx.nn", "beartype.beartype")

# Hypothesis profiles: the plain run draws 50 examples per law (derandomized, so
# every run checks the same ones); HYPOTHESIS_PROFILE=thorough draws 500. Tests
# that set their own smaller ``max_examples`` keep it in both.
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("default", max_examples=50, **_COMMON)
settings.register_profile("thorough", max_examples=500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config):
  config.addinivalue_line(
    "markers",
    "devices(n): the test needs n devices of the default backend; skipped with the reason"
    " where there are fewer (e.g. on a one-GPU machine)",
  )


def pytest_runtest_setup(item):
  for mark in item.iter_markers("devices"):
    (needed,) = mark.args
    have = jax.device_count()
    if have < needed:
      pytest.skip(
        f"needs {needed} {jax.default_backend()} devices, this machine has {have} "
        "(CPU runs get 8 fake ones from XLA_FLAGS in conftest.py)"
      )


def _flax_installed() -> bool:
  try:
    return importlib.util.find_spec("flax") is not None
  except ImportError:  # a finder that refuses flax, as tests simulating its absence use
    return False


# The flax.nnx bridge's flax side imports flax at its top (the bridge loads it only
# when called): without flax, --doctest-modules must not import it.
collect_ignore = [] if _flax_installed() else ["nnx_eqx/bridge/flax_nnx/_flax_side.py"]

_HIJAX_EXAMPLES = ("hijax=True", "to_hijax(")


_FLAX_IMPORT = re.compile(r"^\s*(from flax\b|import flax\b)", re.MULTILINE)


def _skip_flax_examples(items) -> None:
  """Where flax is not installed, skips each doctest's examples from the first one that
  imports flax to its end (the flax.nnx bridge's examples, and the sections of the docs
  about it, which come last in their pages)."""
  for item in items:
    test = getattr(item, "dtest", None)
    if test is None:
      continue
    skipping = False
    for example in test.examples:
      skipping = skipping or bool(_FLAX_IMPORT.search(example.source))
      if skipping:
        example.options[doctest.SKIP] = True


def pytest_collection_modifyitems(config, items):
  """Skips the doctests that make hijax Variables where jax lacks the hi-type API
  they need (jax < 0.10), and the examples that need flax where it is missing."""
  from nnx_eqx.graph.variables import _hijax

  if not _flax_installed():
    _skip_flax_examples(items)
  if _hijax.AVAILABLE:
    return
  skip = pytest.mark.skip(reason=_hijax.UNAVAILABLE)
  for item in items:
    test = getattr(item, "dtest", None)  # a doctest item
    if test is not None and any(
      marker in example.source for example in test.examples for marker in _HIJAX_EXAMPLES
    ):
      item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_dropped_state_updates():
  """Fails the test that left a module with a stale value (a state update that a
  JAX transformation dropped, see nnx.LostUpdateError) still held after the test
  without the library ever reporting it, and forgets every record, so nothing of
  one test reaches the next (nor does a test's ``nnx.set_lost_update_watch``)."""
  from nnx_eqx.graph.tracing import _lost_updates

  watching = _lost_updates.WATCHING[0]
  yield
  try:
    lost = _lost_updates.unreported()
    if lost:
      pytest.fail(f"dropped state updates never reported: {lost}")
  finally:
    _lost_updates.reset()
    _lost_updates.WATCHING[0] = watching

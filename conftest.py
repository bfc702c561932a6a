"""Test configuration: 8 fake CPU devices, strict dtype promotion, jaxtyping
checks of the layers' shape annotations, hypothesis profiles (HYPOTHESIS_PROFILE)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
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

"""Trace tokens: equal within one JAX trace, different across traces, on the fast
path (the token reused while its trace is current) and on the plain one."""

import jax
import jax.numpy as jnp
import pytest

from nnx_eqx.graph.tracing import _traces as _tracing


@pytest.mark.parametrize("fast", [True, False])
def test_tokens_follow_the_current_trace(monkeypatch, fast):
  if not fast:  # a jax without a cheap identity of the current trace
    monkeypatch.setattr(_tracing, "TRACE_REF", _tracing._NoRef())
  outer = _tracing.current_trace()
  seen = []

  def inner_fn(x):
    seen.append(_tracing.current_trace())
    seen.append(_tracing.current_trace())
    return x

  jax.jit(inner_fn)(jnp.float32(1.0))
  jax.vmap(inner_fn)(jnp.ones(2))
  jit_a, jit_b, vmap_a, vmap_b = seen
  assert jit_a == jit_b and vmap_a == vmap_b  # one trace, one token
  assert jit_a != outer and vmap_a != outer and jit_a != vmap_a
  assert _tracing.current_trace() == outer

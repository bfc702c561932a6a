"""Trace tokens: equal within one JAX trace, different across traces, on the fast
path (the token reused while its trace is current) and on the plain one."""

import jax
import jax.numpy as jnp
import pytest

from nnx_eqx.graph.tracing import _traces as _tracing


@pytest.mark.parametrize("fast", [True, False])
def test_tokens_follow_the_current_trace(monkeypatch, fast):
  if not fast:  # a jax without a cheap identity of the current trace
    monkeypatch.setattr(_tracing, "READ_REF", _tracing.reader(_tracing._NoRef()))
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


def test_read_ref_names_the_trace_jax_sets():
  # READ_REF reads this thread's own value (JAX sets it as traces start and end):
  # the current trace's weak reference inside a trace, the top level outside
  same = []
  jax.jit(lambda x: same.append(_tracing.READ_REF()() is _tracing.current_trace_object()) or x)(
    jnp.float32(1.0)
  )
  assert same == [True]
  _, token, in_transform = _tracing.entry(_tracing.READ_REF())
  assert token == _tracing._TOP and in_transform is False

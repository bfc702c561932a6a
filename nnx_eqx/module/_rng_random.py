"""Sampling helpers on Rngs and RngStream: ``rngs.normal((2, 3))`` and friends.

Every ``jax.random`` sampler becomes a method that draws the next key from the
stream (``Rngs`` uses its ``default`` stream) and passes the remaining
arguments through. Every key-taking ``jax.nn.initializers`` factory becomes a
method returning a key-less initializer ``init(shape, dtype=float32)`` that
draws its key when called.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

_SAMPLERS = (
  "bits uniform randint permutation choice normal multivariate_normal truncated_normal"
  " bernoulli beta cauchy dirichlet exponential gamma loggamma poisson gumbel categorical"
  " laplace logistic pareto t chisquare f rademacher maxwell double_sided_maxwell"
  " weibull_min orthogonal generalized_normal ball rayleigh wald geometric triangular"
  " lognormal binomial multinomial"
).split()

# ``normal``/``uniform``/``orthogonal``/``truncated_normal`` are samplers above.
_INITIALIZERS = (
  "delta_orthogonal glorot_normal glorot_uniform he_normal he_uniform kaiming_normal"
  " kaiming_uniform lecun_normal lecun_uniform variance_scaling xavier_normal xavier_uniform"
).split()


def _sampler(name: str) -> Callable:
  fn = getattr(jax.random, name)

  @functools.wraps(fn)
  def method(self, *args: Any, **kwargs: Any) -> jax.Array:
    return fn(self._next_key(), *args, **kwargs)

  method.__doc__ = f"``jax.random.{name}`` with the stream's next key as first argument."
  return method


def _initializer(name: str) -> Callable:
  factory = getattr(jax.nn.initializers, name)

  def method(self, *args: Any, **kwargs: Any) -> Callable:
    init = factory(*args, **kwargs)

    def keyless(shape, dtype=jax.numpy.float32):
      return init(self._next_key(), shape, dtype)

    return keyless

  method.__name__ = name
  method.__doc__ = (
    f"``jax.nn.initializers.{name}(...)`` as an initializer ``(shape, dtype)`` that"
    " draws its key from the stream."
  )
  return method


class RandomMethods:
  """Mixin: ``jax.random`` samplers and key-less initializers as methods.

  Subclasses provide ``_next_key()``.

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> rngs = nnx.Rngs(0)
    >>> rngs.normal((2, 3)).shape, rngs.lecun_normal()((4, 5)).shape
    ((2, 3), (4, 5))
    >>> key = jax.random.fold_in(jax.random.key(0), 2)
    >>> bool((rngs.uniform((2,)) == jax.random.uniform(key, (2,))).all())
    True
  """

  def _next_key(self) -> jax.Array:
    raise NotImplementedError


for _name in _SAMPLERS:
  if hasattr(jax.random, _name):
    setattr(RandomMethods, _name, _sampler(_name))
for _name in _INITIALIZERS:
  if hasattr(jax.nn.initializers, _name):
    setattr(RandomMethods, _name, _initializer(_name))

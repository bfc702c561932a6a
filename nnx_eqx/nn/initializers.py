"""Initializers: ``init(key, shape, dtype) -> array`` functions.

These are ``jax.nn.initializers`` re-exported under the names flax.nnx uses.
"""

from jax.nn.initializers import (
    constant as constant,
    glorot_normal as glorot_normal,
    glorot_uniform as glorot_uniform,
    he_normal as he_normal,
    he_uniform as he_uniform,
    lecun_normal as lecun_normal,
    lecun_uniform as lecun_uniform,
    normal as normal,
    ones as ones,
    orthogonal as orthogonal,
    truncated_normal as truncated_normal,
    uniform as uniform,
    variance_scaling as variance_scaling,
    xavier_normal as xavier_normal,
    xavier_uniform as xavier_uniform,
    zeros as zeros,
)

#: flax.nnx's default kernel initializer.
default_kernel_init = lecun_normal()
#: flax.nnx's default bias initializer.
default_bias_init = zeros

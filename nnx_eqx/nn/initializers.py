"""Initializers: ``init(key, shape, dtype) -> array`` functions.

These are ``jax.nn.initializers`` re-exported under the names flax.nnx uses.
"""

from jax.nn.initializers import (
  constant as constant,
)
from jax.nn.initializers import (
  glorot_normal as glorot_normal,
)
from jax.nn.initializers import (
  glorot_uniform as glorot_uniform,
)
from jax.nn.initializers import (
  he_normal as he_normal,
)
from jax.nn.initializers import (
  he_uniform as he_uniform,
)
from jax.nn.initializers import (
  lecun_normal as lecun_normal,
)
from jax.nn.initializers import (
  lecun_uniform as lecun_uniform,
)
from jax.nn.initializers import (
  normal as normal,
)
from jax.nn.initializers import (
  ones as ones,
)
from jax.nn.initializers import (
  orthogonal as orthogonal,
)
from jax.nn.initializers import (
  truncated_normal as truncated_normal,
)
from jax.nn.initializers import (
  uniform as uniform,
)
from jax.nn.initializers import (
  variance_scaling as variance_scaling,
)
from jax.nn.initializers import (
  xavier_normal as xavier_normal,
)
from jax.nn.initializers import (
  xavier_uniform as xavier_uniform,
)
from jax.nn.initializers import (
  zeros as zeros,
)

#: flax.nnx's default kernel initializer.
default_kernel_init = lecun_normal()
#: flax.nnx's default bias initializer.
default_bias_init = zeros

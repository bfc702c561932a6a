"""Initializers: ``init(key, shape, dtype) -> array`` functions.

These are ``jax.nn.initializers`` re-exported under the names flax.nnx uses.
"""

from typing import Any

from jax.nn.initializers import (
  constant as constant,
)
from jax.nn.initializers import (
  delta_orthogonal as delta_orthogonal,
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
  kaiming_normal as kaiming_normal,
)
from jax.nn.initializers import (
  kaiming_uniform as kaiming_uniform,
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


def zeros_init() -> Any:
  """An initializer returning zeros (``jax.nn.initializers.zeros``), as flax.nnx.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.nn import initializers
    >>> initializers.zeros_init()(jax.random.key(0), (2, 3), jnp.float32).tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
  """
  return zeros


def ones_init() -> Any:
  """An initializer returning ones (``jax.nn.initializers.ones``), as flax.nnx.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from nnx_eqx.nn import initializers
    >>> initializers.ones_init()(jax.random.key(0), (2,), jnp.float32).tolist()
    [1.0, 1.0]
  """
  return ones


#: flax.nnx's default kernel initializer.
default_kernel_init = lecun_normal()
#: flax.nnx's default bias initializer.
default_bias_init = zeros

"""Lifted transforms: JAX transforms that accept Modules and propagate state."""

from ._autodiff import grad as grad
from ._autodiff import value_and_grad as value_and_grad
from ._jit import jit as jit

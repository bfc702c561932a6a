"""Layers, initializers and activations."""

from . import initializers as initializers
from ._linear import Linear as Linear

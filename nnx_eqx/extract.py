"""``nnx.extract``: the tree form of graph nodes used for transform prefixes."""

from .graph._prefix import TreeState as TreeState

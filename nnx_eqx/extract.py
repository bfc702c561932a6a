"""``nnx.extract``: the tree form of graph nodes used for transform prefixes."""

from .graph.api._prefix import TreeState as TreeState
from .graph.api._prefix import prefix as prefix
from .graph.api._tree_form import InconsistentAliasingError as InconsistentAliasingError
from .graph.api._tree_form import NodeStates as NodeStates
from .graph.api._tree_form import clear_non_graph_nodes as clear_non_graph_nodes
from .graph.api._tree_form import from_tree as from_tree
from .graph.api._tree_form import to_tree as to_tree

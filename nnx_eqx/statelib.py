"""``nnx.statelib``: State and the functions on States, as flax.nnx exposes them."""

from .graph.state._state import FlatState as FlatState
from .graph.state._state import State as State
from .graph.state._state_tools import create_path_filters as create_path_filters
from .graph.state._state_tools import diff as diff
from .graph.state._state_tools import filter_state as filter_state
from .graph.state._state_tools import from_flat_state as from_flat_state
from .graph.state._state_tools import map_state as map_state
from .graph.state._state_tools import merge_state as merge_state
from .graph.state._state_tools import replace_by_pure_dict as replace_by_pure_dict
from .graph.state._state_tools import restore_int_paths as restore_int_paths
from .graph.state._state_tools import split_state as split_state
from .graph.state._state_tools import to_flat_state as to_flat_state
from .graph.state._state_tools import to_pure_dict as to_pure_dict

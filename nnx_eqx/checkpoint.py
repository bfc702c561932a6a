"""Checkpoints of Modules, States and Optimizers (``nnx.checkpoint.save`` / ``restore``).

The implementation lives in ``nnx_eqx.training.checkpoint``; this module keeps
the public ``nnx_eqx.checkpoint`` path.
"""

from .training.checkpoint import CheckpointCorruptError as CheckpointCorruptError
from .training.checkpoint import CheckpointExistsError as CheckpointExistsError
from .training.checkpoint import CheckpointMismatchError as CheckpointMismatchError
from .training.checkpoint import CheckpointNotFoundError as CheckpointNotFoundError
from .training.checkpoint import CheckpointPathError as CheckpointPathError
from .training.checkpoint import eqx_deserialise_filter_spec as eqx_deserialise_filter_spec
from .training.checkpoint import eqx_serialise_filter_spec as eqx_serialise_filter_spec
from .training.checkpoint import restore as restore
from .training.checkpoint import save as save

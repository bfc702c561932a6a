"""Training utilities over optax (flax.nnx.training): ``Optimizer`` and its state
Variables, ``EMA``, and the streaming metrics."""

from . import ema as ema
from . import metrics as metrics
from . import optimizer as optimizer
from .optimizer import OptArray as OptArray
from .optimizer import Optimizer as Optimizer
from .optimizer import OptState as OptState
from .optimizer import OptVariable as OptVariable

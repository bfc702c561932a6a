"""Training utilities over optax: ``Optimizer`` and its state Variables."""

from ._optimizer import OptArray as OptArray
from ._optimizer import Optimizer as Optimizer
from ._optimizer import OptState as OptState
from ._optimizer import OptVariable as OptVariable

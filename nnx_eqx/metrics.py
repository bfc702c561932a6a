"""``nnx.metrics``: streaming metrics (see :mod:`nnx_eqx._metrics`)."""

from .training.metrics import Accuracy as Accuracy
from .training.metrics import Average as Average
from .training.metrics import Metric as Metric
from .training.metrics import MetricState as MetricState
from .training.metrics import MultiMetric as MultiMetric
from .training.metrics import Statistics as Statistics
from .training.metrics import Welford as Welford

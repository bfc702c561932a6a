"""``nnx.metrics``: streaming metrics (see :mod:`nnx_eqx._metrics`)."""

from .training._metrics import Accuracy as Accuracy
from .training._metrics import Average as Average
from .training._metrics import Metric as Metric
from .training._metrics import MetricState as MetricState
from .training._metrics import MultiMetric as MultiMetric
from .training._metrics import Statistics as Statistics
from .training._metrics import Welford as Welford

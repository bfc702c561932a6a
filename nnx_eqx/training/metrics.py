"""Streaming metrics as Modules: ``Average``, ``Accuracy``, ``Welford``, ``MultiMetric``.

A metric keeps its running sums in ``MetricState`` Variables, so it passes
through ``nnx.split``/``nnx.merge``, ``nnx.jit`` and ``jax.jit`` like any other
module. ``update(**batch)`` accumulates in place, ``compute()`` reads the
result, ``reset()`` starts over. This follows flax.nnx.metrics.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ..graph.api import _functional as _graph
from ..graph.state._filters import Filter
from ..graph.variables._variables import Variable
from ..module._module import Module


class MetricState(Variable):
  """The Variable type holding a metric's running state.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> isinstance(nnx.metrics.Average().total, nnx.metrics.MetricState)
    True
  """


class Metric(Module):
  """Base class of metrics: subclasses implement ``reset``, ``update`` and ``compute``.

  Raises:
    NotImplementedError: from the base methods.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> class Max(nnx.Metric):
    ...   def __init__(self): self.reset()
    ...   def reset(self): self.value = nnx.metrics.MetricState(jnp.array(-jnp.inf))
    ...   def update(self, *, values, **_):
    ...     self.value.value = jnp.maximum(self.value.value, values.max())
    ...   def compute(self): return self.value.value
    >>> m = Max(); m.update(values=jnp.array([1.0, 3.0])); float(m.compute())
    3.0
  """

  def reset(self) -> None:
    """Resets the state in place."""
    raise NotImplementedError(f"{type(self).__name__} must implement reset().")

  def update(self, **kwargs: Any) -> None:
    """Accumulates a batch in place."""
    raise NotImplementedError(f"{type(self).__name__} must implement update().")

  def compute(self) -> Any:
    """Returns the metric's value."""
    raise NotImplementedError(f"{type(self).__name__} must implement compute().")

  def split(self, *filters: Filter) -> tuple:
    """``nnx.split(self, *filters)``."""
    return _graph.split(self, *filters)


def _zero(*states: MetricState) -> None:
  """Zeroes each state in place, keeping its shape and dtype: metrics created
  under ``nnx.vmap`` keep their batch axis through ``reset()`` (as flax.nnx)."""
  for state in states:
    state.value = jnp.zeros_like(state.value)


def _argument(metric: Any, kwargs: dict) -> Any:
  if metric.argname not in kwargs:
    raise TypeError(
      f"{type(metric).__name__}.update expected keyword argument {metric.argname!r}, got"
      f" {sorted(kwargs)}. Fix: call update({metric.argname}=...), or build the metric"
      " with another argname."
    )
  return kwargs[metric.argname]


class Average(Metric):
  """The running mean of the values passed as ``update(<argname>=values)``.

  Args:
    argname: name of the ``update`` keyword holding the values (``"values"``).

  Raises:
    TypeError: from ``update`` if the ``argname`` keyword is missing.
    ValueError: from ``update`` if a mask is given with a Python scalar value.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> avg = nnx.metrics.Average()
    >>> avg.update(values=jnp.array([1.0, 2.0, 3.0])); avg.update(values=jnp.array([6.0]))
    >>> float(avg.compute())
    3.0
  """

  def __init__(self, argname: str = "values"):
    self.argname = argname
    self.total = MetricState(jnp.zeros((), jnp.float32))
    self.count = MetricState(jnp.zeros((), jnp.int32))

  def reset(self) -> None:
    _zero(self.total, self.count)

  def update(self, mask: jax.Array | None = None, **kwargs: Any) -> None:
    """Adds ``kwargs[argname]`` (a scalar or an array, optionally masked)."""
    values = _argument(self, kwargs)
    if isinstance(values, int | float):
      if mask is not None:
        raise ValueError(
          f"Average.update: with a mask, {self.argname} should be a jax array, got a"
          f" Python {type(values).__name__}."
        )
      total, count = jnp.asarray(values, jnp.float32), jnp.ones((), jnp.int32)
    else:
      values = jnp.asarray(values)
      if mask is None:
        total, count = values.sum(), jnp.asarray(values.size, jnp.int32)
      else:
        mask = jnp.asarray(mask)
        total = (values * mask.astype(values.dtype)).sum()
        count = mask.sum().astype(jnp.int32)
    self.total.value = self.total.value + total.astype(jnp.float32)
    self.count.value = self.count.value + count

  def compute(self) -> jax.Array:
    """``total / count`` (NaN before the first update)."""
    return self.total.value / self.count.value.astype(jnp.float32)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Statistics:
  """What :class:`Welford` computes: mean, standard error of the mean and
  standard deviation (scalars)."""

  mean: jax.Array
  standard_error_of_mean: jax.Array
  standard_deviation: jax.Array


class Welford(Metric):
  """Mean and variance of a stream of values, by Welford's update (stable for
  large offsets).

  Args:
    argname: name of the ``update`` keyword holding the values (``"values"``).

  Raises:
    TypeError: from ``update`` if the ``argname`` keyword is missing.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> w = nnx.metrics.Welford()
    >>> w.update(values=jnp.array([1.0, 3.0])); w.update(values=jnp.array([5.0]))
    >>> stats = w.compute(); float(stats.mean), round(float(stats.standard_deviation), 4)
    (3.0, 1.633)
  """

  def __init__(self, argname: str = "values"):
    self.argname = argname
    self.count = MetricState(jnp.zeros((), jnp.int32))
    self.mean = MetricState(jnp.zeros((), jnp.float32))
    self.m2 = MetricState(jnp.zeros((), jnp.float32))

  def reset(self) -> None:
    _zero(self.count, self.mean, self.m2)

  def update(self, **kwargs: Any) -> None:
    """Merges the batch's count, mean and sum of squared deviations."""
    values = jnp.asarray(_argument(self, kwargs), jnp.float32)
    n_b = jnp.asarray(values.size, jnp.float32)
    n_a = self.count.value.astype(jnp.float32)
    n = n_a + n_b
    delta = values.mean() - self.mean.value
    self.mean.value = self.mean.value + delta * n_b / n
    self.m2.value = self.m2.value + values.var() * n_b + delta * delta * n_a * n_b / n
    self.count.value = self.count.value + values.size

  def compute(self) -> Statistics:
    """The population statistics of everything seen so far."""
    n = self.count.value.astype(jnp.float32)
    std = jnp.sqrt(self.m2.value / n)
    return Statistics(
      mean=self.mean.value, standard_error_of_mean=std / jnp.sqrt(n), standard_deviation=std
    )


class Accuracy(Average):
  """Fraction of correct predictions.

  Multi-class: ``logits`` has one more (trailing) axis than ``labels`` and the
  prediction is its argmax. Binary (``threshold`` given): ``logits`` and
  ``labels`` have the same shape and ``logits >= threshold`` is compared with
  ``labels > 0``.

  Args:
    threshold: a float for binary classification, None for multi-class.
    argname: passed to :class:`Average`.

  Raises:
    TypeError: if ``threshold`` is not a float or None.
    ValueError: from ``update`` if the ranks of logits and labels do not fit
      the mode, or labels are not integers.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> acc = nnx.metrics.Accuracy()
    >>> acc.update(logits=jnp.array([[0.1, 0.9], [0.8, 0.2]]), labels=jnp.array([1, 1]))
    >>> float(acc.compute())
    0.5
  """

  def __init__(self, threshold: float | None = None, argname: str = "values"):
    if threshold is not None and not isinstance(threshold, float):
      raise TypeError(f"Accuracy: threshold must be a float or None, got {threshold!r}.")
    self.threshold = threshold
    super().__init__(argname)

  def update(  # type: ignore[override]
    self, *, logits: jax.Array, labels: jax.Array, mask: jax.Array | None = None, **_: Any
  ) -> None:
    """Adds the batch's correct/incorrect predictions."""
    logits, labels = jnp.asarray(logits), jnp.asarray(labels)
    if self.threshold is not None and logits.ndim != labels.ndim:
      raise ValueError(
        "For binary classification, Accuracy expects logits.ndim == labels.ndim, got"
        f" {logits.ndim} and {labels.ndim}."
      )
    if self.threshold is None and logits.ndim != labels.ndim + 1:
      raise ValueError(
        "For multi-class classification, Accuracy expects logits.ndim == labels.ndim + 1,"
        f" got {logits.ndim} and {labels.ndim}. Fix: pass threshold= for binary labels."
      )
    if not jnp.issubdtype(labels.dtype, jnp.integer):
      raise ValueError(f"Accuracy expects integer labels, got dtype {labels.dtype}.")
    if self.threshold is not None:
      correct = (logits >= self.threshold) == (labels > 0)
    else:
      correct = logits.argmax(axis=-1) == labels
    super().update(mask=mask, **{self.argname: correct})


class MultiMetric(Metric):
  """Several named metrics updated together.

  ``update(**batch)`` passes every keyword to every metric; ``mask`` may be one
  array for all metrics or a ``{name: mask}`` dict. ``compute()`` returns
  ``{name: value}`` in construction order.

  Args:
    **metrics: name to Metric.

  Raises:
    TypeError: from a metric's ``update`` when its keyword is missing.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> mm = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average())
    >>> mm.update(logits=jnp.array([[0.0, 1.0]]), labels=jnp.array([1]), values=jnp.array(0.5))
    >>> {k: float(v) for k, v in mm.compute().items()}
    {'accuracy': 1.0, 'loss': 0.5}
  """

  def __init__(self, **metrics: Metric):
    self._metric_names = tuple(metrics)
    for name, metric in metrics.items():
      setattr(self, name, metric)

  def reset(self) -> None:
    for name in self._metric_names:
      getattr(self, name).reset()

  def update(self, **updates: Any) -> None:
    """Updates every metric with ``updates`` (and its own mask, if any)."""
    mask = updates.pop("mask", None)
    for name in self._metric_names:
      own = mask.get(name) if isinstance(mask, dict) else mask
      extra = {} if own is None else {"mask": own}
      getattr(self, name).update(**updates, **extra)

  def compute(self) -> dict[str, Any]:
    return {name: getattr(self, name).compute() for name in self._metric_names}

"""Metrics, EMA, ModelAndOptimizer and LoRA layers."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal


def test_average_with_and_without_mask():
  avg = nnx.metrics.Average()
  assert jnp.isnan(avg.compute())
  avg.update(values=jnp.arange(4.0))
  avg.update(values=jnp.array([10.0, 20.0]), mask=jnp.array([True, False]))
  assert_trees_close(avg.compute(), 16.0 / 5)
  avg.update(values=2)
  assert int(avg.count.value) == 6
  with pytest.raises(ValueError, match="should be a jax array"):
    avg.update(values=2, mask=jnp.ones(1))
  with pytest.raises(TypeError, match="expected keyword argument 'values'"):
    avg.update(loss=1.0)
  avg.reset()
  assert int(avg.count.value) == 0


def test_accuracy_multiclass_binary_and_rank_errors():
  acc = nnx.metrics.Accuracy()
  acc.update(logits=jnp.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]), labels=jnp.array([1, 1, 1]))
  assert_trees_close(acc.compute(), 2 / 3)
  binary = nnx.metrics.Accuracy(threshold=0.5)
  binary.update(logits=jnp.array([0.9, 0.1, 0.6]), labels=jnp.array([1, 0, 0]))
  assert_trees_close(binary.compute(), 2 / 3)
  with pytest.raises(ValueError, match="For multi-class classification"):
    acc.update(logits=jnp.zeros(3), labels=jnp.zeros(3, jnp.int32))
  with pytest.raises(ValueError, match="For binary classification"):
    binary.update(logits=jnp.zeros(3), labels=jnp.zeros((3, 1), jnp.int32))
  with pytest.raises(TypeError, match="threshold"):
    nnx.metrics.Accuracy(threshold=1)


def test_welford_matches_numpy_across_batches_and_large_offsets():
  x = np.asarray(jax.random.normal(jax.random.key(0), (40,)), np.float64) + 1e6
  w = nnx.metrics.Welford()
  for chunk in np.split(x, 4):
    w.update(values=jnp.asarray(chunk, jnp.float32))
  stats = w.compute()
  assert_trees_close(stats.mean, float(x.mean()))
  # float32 accumulation of values near 1e6 keeps only ~2 digits of a unit-scale spread
  assert_trees_close(stats.standard_deviation, float(x.std()), rtol=2e-2)
  assert_trees_close(stats.standard_error_of_mean, float(stats.standard_deviation) / np.sqrt(40))


def test_multimetric_masks_per_metric_and_survives_jit():
  mm = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average())

  @nnx.jit
  def step(mm, logits, labels, loss):
    mm.update(logits=logits, labels=labels, values=loss, mask={"loss": loss > 1})

  step(mm, jnp.array([[0.0, 1.0], [1.0, 0.0]]), jnp.array([1, 1]), jnp.array([1.0, 3.0]))
  out = mm.compute()
  assert list(out) == ["accuracy", "loss"]
  assert float(out["accuracy"]) == 0.5 and float(out["loss"]) == 3.0
  graphdef, _ = nnx.split(mm)
  hash(graphdef)
  mm.reset()
  assert jnp.isnan(mm.compute()["loss"])


def test_ema_update_and_apply_to_shares_variables():
  model = nnx.Linear(2, 2, use_bias=False, rngs=nnx.Rngs(0))
  k0 = model.kernel.value
  ema = nnx.EMA(model, decay=0.9)
  ema_model = ema.apply_to(model)
  assert ema_model.kernel is ema.params.kernel
  model.kernel.value = 2 * k0
  ema.update(model)
  assert_trees_close(ema.params.kernel.value, 0.9 * k0 + 0.1 * 2 * k0)
  assert_trees_close(ema_model.kernel.value, ema.params.kernel.value)


def test_ema_in_a_jitted_train_step():
  model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
  ema = nnx.EMA(model, decay=0.5)
  before = ema.params.kernel.value

  @nnx.jit
  def step(model, opt, ema, x):
    opt.update(model, nnx.grad(lambda m: (m(x) ** 2).mean())(model))
    ema.update(model)

  step(model, opt, ema, jnp.ones((1, 2)))
  assert_trees_close(ema.params.kernel.value, 0.5 * before + 0.5 * model.kernel.value)


def test_model_and_optimizer_steps_its_model():
  x, y = jnp.ones((4, 2)), jnp.zeros((4, 1))
  state = nnx.ModelAndOptimizer(nnx.Linear(2, 1, rngs=nnx.Rngs(0)), optax.sgd(0.1))
  loss = lambda m: ((m(x) - y) ** 2).mean()
  first = loss(state.model)

  @nnx.jit
  def step(state):
    state.update(nnx.grad(loss)(state.model))

  step(state)
  assert loss(state.model) < first and int(state.step.value) == 1


def test_lora_shapes_base_module_and_param_type():
  base = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
  lora = nnx.LoRA(3, 2, 4, base_module=base, rngs=nnx.Rngs(1))
  x = jnp.ones((5, 3))
  assert lora.lora_a.shape == (3, 2) and lora.lora_b.shape == (2, 4)
  assert isinstance(lora.lora_a, nnx.LoRAParam)
  assert_trees_close(lora(x), base(x))  # lora_b starts at zero
  assert sorted(nnx.state(lora, nnx.LoRAParam)) == ["lora_a", "lora_b"]
  with pytest.raises(nnx.LayerConfigError, match="callable"):
    nnx.LoRA(3, 2, 4, base_module=3, rngs=nnx.Rngs(0))


def test_lora_linear_state_and_training_only_lora():
  layer = nnx.LoRALinear(3, 4, lora_rank=2, rngs=nnx.Rngs(0))
  assert sorted(nnx.state(layer)) == ["bias", "kernel", "lora"]
  opt = nnx.Optimizer(layer, optax.sgd(0.1), wrt=nnx.LoRAParam)
  kernel = layer.kernel.value
  x = jnp.ones((2, 3))
  for _ in range(2):
    opt.update(layer, nnx.grad(lambda m: (m(x) ** 2).sum(), wrt=nnx.LoRAParam)(layer))
  assert_trees_equal(layer.kernel.value, kernel)
  assert float(jnp.abs(layer.lora.lora_b.value).sum()) > 0

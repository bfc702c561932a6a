"""The bridged main job: Equinox CNN -> NNX training -> Equinox evaluation agree."""

import jax

import nnx_eqx as nnx
from nnx_eqx.bridge import _demo
from nnx_eqx.testing import assert_trees_close


def test_bridged_demo_trains_and_both_accuracies_agree():
  from nnx_eqx import demo

  data = demo.load_data(seed=0)
  eqx_cnn = _demo.build_eqx_cnn(jax.random.key(0), channels=(8, 16))
  model = _demo.to_nnx(eqx_cnn)
  assert type(model.cnn) is nnx.bridge.Sequential
  history = demo.train(model, data, epochs=1, batch_size=16, progress=False, log=lambda s: None)
  nnx_acc = history[-1]["test_accuracy"]
  trained = _demo.to_eqx(model)
  eqx_acc = _demo.eqx_accuracy(trained, data.x_test, data.y_test)
  assert nnx_acc > 0.5
  assert_trees_close(eqx_acc, nnx_acc)  # the same predictions

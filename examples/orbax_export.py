"""Export a trained model as a TensorFlow SavedModel with ``orbax.export``.

The model is the CNN of flax's MNIST example (convolutions, BatchNorm, Dropout).
Its parameters and statistics go to ``JaxModule`` as a State: its key paths are
JAX's own key classes (``.batch_norm1.mean.value``), which orbax turns into
TensorFlow variable names. The RNG streams stay outside the export (a typed RNG
key has no TensorFlow dtype; flax.nnx models fail the same way when passed whole).

Needs TensorFlow and orbax-export, which nnx_eqx does not depend on:

  pip install tensorflow-cpu orbax-export
  python examples/orbax_export.py /tmp/mnist_savedmodel
"""

import sys
import tempfile

import jax
import numpy as np
import tensorflow as tf
from orbax.export import ExportManager, JaxModule, ServingConfig

import nnx_eqx as nnx

BATCH = 4


class CNN(nnx.Module):
  def __init__(self, *, rngs: nnx.Rngs):
    self.conv1 = nnx.Conv(1, 32, kernel_size=(3, 3), rngs=rngs)
    self.batch_norm1 = nnx.BatchNorm(32, rngs=rngs)
    self.dropout1 = nnx.Dropout(rate=0.025, rngs=rngs)
    self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), rngs=rngs)
    self.batch_norm2 = nnx.BatchNorm(64, rngs=rngs)
    self.linear1 = nnx.Linear(3136, 256, rngs=rngs)
    self.dropout2 = nnx.Dropout(rate=0.025, rngs=rngs)
    self.linear2 = nnx.Linear(256, 10, rngs=rngs)

  def __call__(self, x):
    pool = lambda y: nnx.avg_pool(y, window_shape=(2, 2), strides=(2, 2))  # noqa: E731
    x = pool(nnx.relu(self.batch_norm1(self.dropout1(self.conv1(x)))))
    x = pool(nnx.relu(self.batch_norm2(self.conv2(x))))
    x = nnx.relu(self.dropout2(self.linear1(x.reshape(x.shape[0], -1))))
    return self.linear2(x)


def main(out_dir: str) -> None:
  model = CNN(rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (BATCH, 28, 28, 1))
  model(x)  # (a training call: the statistics move)
  model.eval()
  expected = np.asarray(model(x))

  graphdef, params, rest = nnx.split(model, (nnx.Param, nnx.BatchStat), ...)
  module = JaxModule(params, lambda p, x: nnx.merge(graphdef, p, rest)(x))
  signature = [tf.TensorSpec([BATCH, 28, 28, 1], tf.float32)]
  ExportManager(module, [ServingConfig("serving_default", input_signature=signature)]).save(out_dir)

  loaded = tf.saved_model.load(out_dir)
  outputs = loaded.signatures["serving_default"](tf.constant(np.asarray(x)))
  got = np.asarray(next(iter(outputs.values())))
  gap = np.abs(got - expected).max()
  print(f"SavedModel in {out_dir}; largest difference from the model: {gap:.1e}")


if __name__ == "__main__":
  main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())

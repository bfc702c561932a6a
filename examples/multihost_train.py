"""Data-parallel training over several processes (hosts), and a checkpoint they save together.

Run one copy per process, e.g. two processes on one machine, each with 2 CPU devices:

  XLA_FLAGS=--xla_force_host_platform_device_count=2 \
    python examples/multihost_train.py 127.0.0.1:12345 2 0 /tmp/run &
  XLA_FLAGS=--xla_force_host_platform_device_count=2 \
    python examples/multihost_train.py 127.0.0.1:12345 2 1 /tmp/run

On GPU/TPU clusters `jax.distributed.initialize()` finds these arguments itself.
tests/test_multihost.py runs this file as it is.
"""

import json
import sys

import jax
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import nnx_eqx as nnx


class MLP(nnx.Module):
  def __init__(self, rngs):
    split = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "data"))
    whole = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, None))
    # its columns are split over the devices
    self.hidden = nnx.Linear(4, 8, kernel_init=split, rngs=rngs)
    self.out = nnx.Linear(8, 1, kernel_init=whole, rngs=rngs)  # a copy on every device

  def __call__(self, x):
    return self.out(nnx.relu(self.hidden(x)))


def train(mesh, steps=3):
  """Trains MLP on a batch split over the mesh's "data" axis; returns model, losses."""

  @nnx.jit
  def create():
    model = MLP(nnx.Rngs(0))
    nnx.with_sharding_constraint(model, mesh=mesh)  # each Variable by its own spec
    return model, nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

  @nnx.jit
  def step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    optimizer.update(model, grads)
    return loss

  model, optimizer = create()
  rows = NamedSharding(mesh, P("data"))  # each process makes only its own rows
  losses = []
  for i in range(steps):
    x_all = np.random.default_rng(i).normal(size=(16, 4)).astype(np.float32)
    y_all = x_all.sum(1, keepdims=True)
    x = jax.make_array_from_callback(x_all.shape, rows, lambda idx: x_all[idx])
    y = jax.make_array_from_callback(y_all.shape, rows, lambda idx: y_all[idx])
    losses.append(float(step(model, optimizer, x, y)))
  return model, losses


if __name__ == "__main__":
  coordinator, num_processes, process_id, out = sys.argv[1:5]
  jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU only
  jax.distributed.initialize(  # process 0 listens on the coordinator's address only
    coordinator,
    int(num_processes),
    int(process_id),
    coordinator_bind_address=coordinator,
  )
  n = jax.device_count()  # the devices of every process
  mesh = jax.make_mesh((n,), ("data",), axis_types=(AxisType.Auto,))
  model, losses = train(mesh)
  nnx.checkpoint.save(f"{out}/ckpt", model)  # every process writes its shards
  params = multihost_utils.process_allgather(nnx.state(model, nnx.Param), tiled=True)
  np.savez(f"{out}/params_{process_id}.npz", *jax.tree.leaves(params))
  report = dict(
    devices=n,
    local=jax.local_device_count(),
    losses=losses,
    split=model.hidden.kernel[...].sharding.spec == P(None, "data"),
    whole=model.out.kernel[...].is_fully_replicated,
  )
  print(json.dumps(report))
  jax.distributed.shutdown()

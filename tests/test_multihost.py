"""Multi-process training: examples/multihost_train.py (the recipe the docs page
docs/guides/saving.md shows) run as two processes on localhost with jax.distributed (CPU,
gloo collectives, 2 devices each), against the same steps in this process on a 4-device
mesh; the checkpoint the two processes saved together restores here, in one process."""

import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from jax.sharding import AxisType

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_close, assert_trees_equal

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "multihost_train.py"
TIMEOUT_S = 300  # the machine may be busy; a healthy run takes well under a minute


def recipe():
  spec = importlib.util.spec_from_file_location("multihost_train", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def start_processes(out, n=2):
  """Starts the script as ``n`` processes; returns them with their log files."""
  env = dict(os.environ)
  env.update(
    XLA_FLAGS="--xla_force_host_platform_device_count=2",  # not the 8 devices of conftest
    JAX_PLATFORMS="cpu",
    PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
  )
  address = f"127.0.0.1:{free_port()}"
  started = []
  for i in range(n):
    log = out / f"process_{i}.log"
    with open(log, "wb") as f:
      cmd = [sys.executable, str(SCRIPT), address, str(n), str(i), str(out)]
      started.append((subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT), log))
  return started


def wait_for(started, retry_on_busy_port=False):
  """Each process's JSON report; fails with their output if one fails or time runs out
  (the others are then killed). The free port can be taken by another program before the
  coordinator binds it: that case starts the processes once more on a new port."""
  procs = [p for p, _ in started]
  deadline = time.monotonic() + TIMEOUT_S
  try:
    while any(p.poll() is None for p in procs):
      if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
        break
      time.sleep(0.2)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  texts = [log.read_text(errors="replace") for _, log in started]
  busy = any("Failed to add port to server" in t for t in texts)  # gRPC could not bind
  if retry_on_busy_port and busy and any(p.returncode != 0 for p in procs):
    return wait_for(start_processes(started[0][1].parent))
  if any(p.returncode != 0 for p in procs):
    tails = "\n".join(
      f"--- process {i} (exit {p.returncode}):\n{t[-3000:]}"
      for i, (p, t) in enumerate(zip(procs, texts))
    )
    pytest.fail(f"multi-process run failed or passed {TIMEOUT_S}s:\n{tails}")
  return [json.loads(t.strip().splitlines()[-1]) for t in texts]


@pytest.mark.slow
@pytest.mark.skipif(
  jax.default_backend() != "cpu" or len(jax.devices("cpu")) < 4,
  reason="the one-process side runs on 4 CPU devices (XLA_FLAGS in conftest.py) of the CPU"
  " backend, against two CPU processes",
)
def test_two_processes_train_like_one_process_and_share_a_checkpoint(tmp_path):
  started = start_processes(tmp_path)
  try:  # meanwhile, the same steps in this process, on 4 of its devices
    script = recipe()
    devices = jax.devices("cpu")[:4]
    mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Auto,), devices=devices)
    model, losses = script.train(mesh)
  finally:
    reports = wait_for(started, retry_on_busy_port=True)
  expected = jax.tree.leaves(nnx.state(model, nnx.Param))
  first = None
  for i, report in enumerate(reports):
    assert report["devices"] == 4 and report["local"] == 2, report
    assert report["split"] and report["whole"], report  # one sharded and one replicated kernel
    assert_trees_close(np.float32(report["losses"]), np.float32(losses))
    with np.load(tmp_path / f"params_{i}.npz") as f:
      params = [f[f"arr_{k}"] for k in range(len(f.files))]
    assert_trees_close(params, expected)
    if first is not None:
      assert_trees_equal(params, first)  # both processes hold the same parameters
    first = params

  # The checkpoint both processes wrote, restored by one process alone.
  target = script.MLP(nnx.Rngs(1))
  nnx.checkpoint.restore(tmp_path / "ckpt", target)
  assert_trees_equal(jax.tree.leaves(nnx.state(target, nnx.Param)), first)
  abstract = nnx.eval_shape(lambda: script.MLP(nnx.Rngs(1)))
  nnx.checkpoint.restore(tmp_path / "ckpt", abstract)  # saved on devices this process lacks:
  assert_trees_equal(jax.tree.leaves(nnx.state(abstract, nnx.Param)), first)
  one_device = jax.device_put(np.zeros(()), jax.local_devices()[0]).sharding
  assert abstract.hidden.kernel.value.sharding == one_device


def test_saving_guide_shows_the_tested_script():
  # A ```py fence: the docs' ```python blocks are doctests (tests/test_docs.py).
  page = (ROOT / "docs/guides/saving.md").read_text()
  tag = "<!-- tested: examples/multihost_train.py without its docstring -->\n```py\n"
  assert page.count(tag) == 1
  shown = page.split(tag)[1].split("```\n")[0]
  assert shown == SCRIPT.read_text().split('"""', 2)[2].lstrip("\n")

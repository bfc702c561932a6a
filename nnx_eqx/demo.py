"""The main job: train a small CNN on scikit-learn's 8x8 digits with ``nnx.jit`` + optax.

Run ``python -m nnx_eqx.demo`` (``--help`` lists the options) after installing
the ``demo`` extra (``pip install -e '.[demo]'`` in a clone). The data set
ships with scikit-learn (1,797 grey-scale 8x8 images of the digits 0-9), so
nothing is downloaded. It is split 80/20 (stratified, seeded); the model is
two ``Conv``/``BatchNorm``/``max_pool`` blocks, ``Dropout`` and a ``Linear``
classifier, trained with ``nnx.Optimizer`` (Adam) inside one ``nnx.jit`` step.
Each epoch prints the training loss/accuracy and the test loss/accuracy;
``--output DIR`` saves ``metrics.json`` and a ``training.png`` plot, and
``--checkpoint DIR`` the trained model's state with orbax (``nnx.checkpoint``,
needs the ``checkpoint`` extra).

The pieces are small functions (``make_parser``, ``load_data``,
``build_model``, ``train``, ``evaluate``, ``save_outputs``, ``main``) so that
other modes (e.g. a model built elsewhere) reuse them.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import nnx_eqx as nnx

from ._extras import require
from .bridge import _demo as _bridged

NUM_CLASSES = 10


class Data(NamedTuple):
  """The split data set: images ``(n, 8, 8, 1)`` float32 in [0, 1], labels ``(n,)`` int32."""

  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray


def load_data(seed: int = 0, test_fraction: float = 0.2) -> Data:
  """Loads scikit-learn's bundled digits and splits them (stratified, seeded).

  Example:
    >>> from nnx_eqx.demo import load_data
    >>> data = load_data(0)
    >>> data.x_train.shape, data.x_test.shape, float(data.x_train.max())
    ((1437, 8, 8, 1), (360, 8, 8, 1), 1.0)
  """
  # scikit-learn, tqdm and matplotlib come with the optional `demo` extra
  datasets = require("sklearn.datasets", "nnx_eqx.demo.load_data")
  model_selection = require("sklearn.model_selection", "nnx_eqx.demo.load_data")

  digits = datasets.load_digits()
  x = (digits.images / 16.0).astype(np.float32)[..., None]
  y = digits.target.astype(np.int32)
  x_tr, x_te, y_tr, y_te = model_selection.train_test_split(
    x, y, test_size=test_fraction, random_state=seed, stratify=y
  )
  return Data(x_tr, y_tr, x_te, y_te)


class CNN(nnx.Module):
  """``[Conv 3x3 -> BatchNorm -> relu -> max_pool 2x2] x 2 -> Dropout -> Linear``.

  Input ``(batch, 8, 8, 1)``; output logits ``(batch, 10)``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> from nnx_eqx.demo import CNN
    >>> CNN(rngs=nnx.Rngs(0))(jnp.zeros((2, 8, 8, 1))).shape
    (2, 10)
  """

  def __init__(self, channels: tuple[int, int] = (32, 64), dropout: float = 0.2, *, rngs):
    c1, c2 = channels
    self.conv1 = nnx.Conv(1, c1, (3, 3), rngs=rngs)
    self.bn1 = nnx.BatchNorm(c1, momentum=0.9, rngs=rngs)
    self.conv2 = nnx.Conv(c1, c2, (3, 3), rngs=rngs)
    self.bn2 = nnx.BatchNorm(c2, momentum=0.9, rngs=rngs)
    self.dropout = nnx.Dropout(dropout, rngs=rngs)
    self.head = nnx.Linear(2 * 2 * c2, NUM_CLASSES, rngs=rngs)

  def __call__(self, x):
    x = nnx.max_pool(nnx.relu(self.bn1(self.conv1(x))), (2, 2), strides=(2, 2))
    x = nnx.max_pool(nnx.relu(self.bn2(self.conv2(x))), (2, 2), strides=(2, 2))
    x = self.dropout(x.reshape(x.shape[0], -1))
    return self.head(x)


def build_model(seed: int = 0) -> CNN:
  """The CNN with parameters from ``params=seed`` and dropout keys from ``dropout=seed + 1``."""
  return CNN(rngs=nnx.Rngs(params=seed, dropout=seed + 1))


def _loss_and_accuracy(logits, labels):
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
  accuracy = (jnp.argmax(logits, -1) == labels).mean()
  return loss, accuracy


@nnx.jit
def train_step(model: CNN, optimizer: nnx.Optimizer, x, y):
  """One Adam step on a batch; returns ``(loss, accuracy)`` of the batch before the step."""

  def loss_fn(model):
    loss, acc = _loss_and_accuracy(model(x), y)
    return loss, acc

  (loss, acc), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
  optimizer.update(model, grads)
  return loss, acc


@nnx.jit
def eval_step(model: CNN, x, y):
  """Summed loss and number of correct predictions on a batch."""
  loss, acc = _loss_and_accuracy(model(x), y)
  n = y.shape[0]
  return loss * n, acc * n


def evaluate(model: nnx.Module, x: np.ndarray, y: np.ndarray, batch_size: int = 512):
  """Mean loss and accuracy of ``model`` in evaluation mode (running statistics,
  no dropout); the model is left in evaluation mode."""
  model.eval()
  total_loss = total_correct = 0.0
  for i in range(0, len(x), batch_size):
    loss, correct = eval_step(model, x[i : i + batch_size], y[i : i + batch_size])
    total_loss += float(loss)
    total_correct += float(correct)
  return total_loss / len(x), total_correct / len(x)


def train(
  model: nnx.Module,
  data: Data,
  *,
  epochs: int = 12,
  batch_size: int = 32,
  lr: float = 3e-3,
  seed: int = 0,
  progress: bool = True,
  log: Callable[[str], None] | None = None,
) -> list[dict[str, float]]:
  """Trains ``model`` in place with Adam; returns one metrics dict per epoch.

  Each epoch shuffles the training set (seeded), runs ``len // batch_size``
  steps (the last incomplete batch is dropped, so every step has one shape and
  compiles once) and evaluates on the test set.
  """
  tqdm = require("tqdm.auto", "nnx_eqx.demo.train").tqdm

  optimizer = nnx.Optimizer(model, optax.adam(lr), wrt=nnx.Param)
  rng = np.random.default_rng(seed)
  steps = len(data.x_train) // batch_size
  history: list[dict[str, float]] = []
  bar = tqdm(total=epochs * steps, disable=not progress, unit="step", leave=False)
  write = log or (tqdm.write if progress else print)
  start = time.perf_counter()
  for epoch in range(1, epochs + 1):
    model.train()
    perm = rng.permutation(len(data.x_train))
    losses, accs = [], []
    for s in range(steps):
      idx = perm[s * batch_size : (s + 1) * batch_size]
      loss, acc = train_step(model, optimizer, data.x_train[idx], data.y_train[idx])
      losses.append(loss)
      accs.append(acc)
      bar.update()
    test_loss, test_acc = evaluate(model, data.x_test, data.y_test)
    row = {
      "epoch": epoch,
      "train_loss": float(np.mean(jax.device_get(losses))),
      "train_accuracy": float(np.mean(jax.device_get(accs))),
      "test_loss": test_loss,
      "test_accuracy": test_acc,
      "seconds": time.perf_counter() - start,
    }
    history.append(row)
    bar.set_postfix(loss=f"{row['train_loss']:.3f}", test_acc=f"{test_acc:.3f}")
    write(
      f"epoch {epoch:3d}/{epochs}  train loss {row['train_loss']:.4f}  acc"
      f" {row['train_accuracy']:.4f}  |  test loss {test_loss:.4f}  acc {test_acc:.4f}"
      f"  ({row['seconds']:.1f}s)"
    )
  bar.close()
  return history


def save_outputs(output: str | Path, history: list[dict[str, float]], summary: dict) -> None:
  """Writes ``metrics.json`` (summary and per-epoch history) and ``training.png``."""
  require("matplotlib", "nnx_eqx.demo.save_outputs").use("Agg")
  plt = require("matplotlib.pyplot", "nnx_eqx.demo.save_outputs")

  out = Path(output)
  out.mkdir(parents=True, exist_ok=True)
  (out / "metrics.json").write_text(json.dumps({**summary, "history": history}, indent=2))
  epochs = [h["epoch"] for h in history]
  fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
  ax1.plot(epochs, [h["train_loss"] for h in history], label="train")
  ax1.plot(epochs, [h["test_loss"] for h in history], label="test")
  ax1.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
  ax2.plot(epochs, [h["train_accuracy"] for h in history], label="train")
  ax2.plot(epochs, [h["test_accuracy"] for h in history], label="test")
  ax2.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
  for ax in (ax1, ax2):
    ax.legend()
    ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(out / "training.png", dpi=100)
  plt.close(fig)


def make_parser() -> argparse.ArgumentParser:
  """The command-line options of ``python -m nnx_eqx.demo``."""
  p = argparse.ArgumentParser(
    prog="python -m nnx_eqx.demo",
    description="Train a small CNN on scikit-learn's 8x8 digits with nnx_eqx (nnx.jit + optax).",
  )
  p.add_argument("--epochs", type=int, default=12, help="training epochs (default 12)")
  p.add_argument("--seed", type=int, default=0, help="seed of the split, init and shuffling")
  p.add_argument("--batch-size", type=int, default=32, help="training batch size (default 32)")
  p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
  p.add_argument("--output", metavar="DIR", help="save metrics.json and training.png here")
  p.add_argument(
    "--checkpoint", metavar="DIR", help="save the trained model here (orbax; overwrites DIR)"
  )
  p.add_argument(
    "--from-eqx",
    action="store_true",
    help="build the CNN in Equinox, convert it (nnx.from_eqx), train it with nnx.jit, convert"
    " it back (nnx.to_eqx) and evaluate it with eqx.filter_jit too",
  )
  p.add_argument("--no-progress", action="store_true", help="no progress bar")
  return p


def _check_extras(args: argparse.Namespace) -> None:
  """Exits before any work, naming the extra to install, if an optional package the
  chosen options use is missing."""
  needed = ["sklearn.datasets", "tqdm.auto"]
  needed += ["matplotlib.pyplot"] if args.output else []
  needed += ["orbax.checkpoint"] if args.checkpoint else []
  for module in needed:
    try:
      require(module, "python -m nnx_eqx.demo" + (" --checkpoint" if "orbax" in module else ""))
    except ModuleNotFoundError:
      raise  # installed but broken: the traceback names what is missing
    except ImportError as e:  # not installed: the message names the extra
      raise SystemExit(str(e)) from None


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
  """Runs the demo; returns the summary (final test accuracy, wall time, ...).

  Raises:
    SystemExit: an optional package the options use is missing (scikit-learn and
      tqdm always, matplotlib for ``--output``: the ``demo`` extra; orbax-checkpoint
      for ``--checkpoint``: the ``checkpoint`` extra); the message names the extra.
  """
  args = make_parser().parse_args(argv)
  _check_extras(args)
  start = time.perf_counter()
  data = load_data(args.seed)
  if args.from_eqx:
    model: nnx.Module = _bridged.to_nnx(_bridged.build_eqx_cnn(jax.random.key(args.seed)))
    print("model: an Equinox CNN converted with nnx.from_eqx")
  else:
    model = build_model(args.seed)
  print(
    f"digits: {len(data.x_train)} train / {len(data.x_test)} test images; devices: {jax.devices()}"
  )
  history = train(
    model,
    data,
    epochs=args.epochs,
    batch_size=args.batch_size,
    lr=args.lr,
    seed=args.seed,
    progress=not args.no_progress,
  )
  test_loss, test_acc = evaluate(model, data.x_test, data.y_test)
  summary = {
    "test_loss": test_loss,
    "test_accuracy": test_acc,
    "epochs": args.epochs,
    "seed": args.seed,
    "batch_size": args.batch_size,
    "lr": args.lr,
    "wall_seconds": time.perf_counter() - start,
  }
  if args.from_eqx:
    eqx_model = _bridged.to_eqx(model)  # type: ignore[arg-type]
    summary["eqx_test_accuracy"] = _bridged.eqx_accuracy(
      eqx_model, jnp.asarray(data.x_test), jnp.asarray(data.y_test)
    )
    print(
      f"converted back with nnx.to_eqx: eqx.filter_jit test accuracy"
      f" {summary['eqx_test_accuracy']:.4f} (nnx_eqx: {test_acc:.4f})"
    )
  print(f"final test accuracy {test_acc:.4f} ({summary['wall_seconds']:.1f}s wall time)")
  if args.output:
    save_outputs(args.output, history, summary)
    print(f"saved {Path(args.output) / 'metrics.json'} and {Path(args.output) / 'training.png'}")
  if args.checkpoint:
    path = nnx.checkpoint.save(args.checkpoint, model, force=True)
    print(f"saved the model to {path} (restore: nnx.checkpoint.restore(path, build_model()))")
  return summary


if __name__ == "__main__":
  main()

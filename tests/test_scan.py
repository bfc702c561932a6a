"""nnx.scan over layers and over time: equivalence with the unrolled loop, the same
program as a hand-written jax.lax.scan, state and Rngs propagation, trace counts,
errors, and the seed-era forms (nnx.Scan, decorated __init__/__call__)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  hlo_equal,
)

L = 4


class Block(nnx.Module):
  def __init__(self, rngs):
    self.linear = nnx.Linear(4, 4, rngs=rngs)

  def __call__(self, x):
    return jnp.tanh(self.linear(x))


@nnx.vmap(in_axes=0, out_axes=0)
def make_block(rngs):
  return Block(rngs)


def make_layers(n=L, seed=0):
  rngs = nnx.Rngs(seed)
  with nnx.split_rngs(rngs, splits=n):
    return make_block(rngs)


@nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
def scan_forward(layer, x):
  return layer(x)


def unrolled(layers, x):
  graphdef, state = nnx.split(layers)
  for i in range(L):
    x = nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))(x)
  return x


X = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)


def test_scan_over_layers_matches_unrolled_outputs_and_gradients():
  layers = make_layers()
  assert_trees_close(scan_forward(layers, X), jax.jit(unrolled)(layers, X))
  g_scan = jax.jit(nnx.grad(lambda m: scan_forward(m, X).sum()))(layers)
  g_loop = jax.jit(nnx.grad(lambda m: unrolled(m, X).sum()))(layers)
  assert_trees_close(g_scan, g_loop)


def test_program_equals_hand_written_lax_scan():
  layers = make_layers()
  graphdef, params = nnx.split(layers)

  def ref_forward(params, x):
    return jax.lax.scan(lambda x, p: (nnx.merge(graphdef, p)(x), None), x, params)[0]

  ours = nnx.jit(lambda m, x: scan_forward(m, x)).lower(layers, X)
  assert hlo_equal(ours, jax.jit(ref_forward).lower(params, X))

  @nnx.jit
  def train_step(m, x):
    loss, grads = nnx.value_and_grad(lambda m: scan_forward(m, x).sum())(m)
    nnx.update(m, jax.tree.map(lambda p, g: p - 0.1 * g, nnx.state(m, nnx.Param), grads))
    return loss

  def ref_step(params, x):
    loss, grads = jax.value_and_grad(lambda p: ref_forward(p, x).sum())(params)
    return loss, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

  assert hlo_equal(train_step.lower(layers, X), jax.jit(ref_step).lower(params, X))


def test_scan_over_time_with_a_broadcast_cell():
  cell = nnx.Linear(7, 4, rngs=nnx.Rngs(1))
  xs = jnp.linspace(0.0, 1.0, 5 * 2 * 3).reshape(5, 2, 3)

  @nnx.scan(in_axes=(None, nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  def rnn(cell, h, x):
    h = jnp.tanh(cell(jnp.concatenate([x, h], -1)))
    return h, h

  h, ys = rnn(cell, jnp.zeros((2, 4)), xs)
  ref_h, ref_ys = jnp.zeros((2, 4)), []
  for t in range(5):
    ref_h = jnp.tanh(cell(jnp.concatenate([xs[t], ref_h], -1)))
    ref_ys.append(ref_h)
  assert_trees_close(h, ref_h)
  assert_trees_close(ys, jnp.stack(ref_ys))
  # reverse and unroll
  hr, _ = nnx.scan(rnn.fn, in_axes=rnn.in_axes, out_axes=rnn.out_axes, reverse=True)(
    cell, jnp.zeros((2, 4)), xs
  )
  ref_r = jnp.zeros((2, 4))
  for t in reversed(range(5)):
    ref_r = jnp.tanh(cell(jnp.concatenate([xs[t], ref_r], -1)))
  assert_trees_close(hr, ref_r)
  hu, _ = nnx.scan(rnn.fn, in_axes=rnn.in_axes, out_axes=rnn.out_axes, unroll=2)(
    cell, jnp.zeros((2, 4)), xs
  )
  assert_trees_close(hu, ref_h)


class Shared(nnx.Module):
  """Broadcast state updated in every step: a BatchNorm and a counter."""

  def __init__(self):
    self.bn = nnx.BatchNorm(4, rngs=nnx.Rngs(0))
    self.calls = nnx.Variable(jnp.array(0))


def test_broadcast_state_updates_propagate_like_the_unrolled_loop():
  layers, shared, ref_shared = make_layers(), Shared(), Shared()

  @nnx.scan(in_axes=(0, None, nnx.Carry), out_axes=nnx.Carry)
  def forward(layer, shared, x):
    shared.calls += 1
    return shared.bn(layer(x))

  y = forward(layers, shared, X)
  graphdef, state = nnx.split(layers)
  ref = X
  for i in range(L):
    ref_shared.calls += 1
    ref = ref_shared.bn(nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))(ref))
  assert_trees_close(y, ref)
  assert int(shared.calls.value) == L
  assert_trees_close(nnx.state(shared), nnx.state(ref_shared))


def test_unchanged_broadcast_state_is_a_constant_not_a_carry():
  layers, shared = make_layers(), Shared()

  @nnx.scan(in_axes=(0, None, nnx.Carry), out_axes=nnx.Carry)
  def forward(layer, shared, x):
    shared.calls += 1
    return layer(x) * shared.bn.scale.value

  lowered = nnx.jit(forward).lower(layers, shared, X)
  # outputs: y and the counter; the BatchNorm and the stacked params are not outputs
  assert len(jax.tree.leaves(lowered.out_info)) == 2


class Dropout(nnx.Module):
  """A dropout-like layer keeping its own stream (as nnx.Dropout does)."""

  def __init__(self, rngs):
    self.rngs = rngs.dropout.fork()

  def __call__(self, x):
    return jnp.where(jax.random.bernoulli(self.rngs(), 0.5, x.shape), x, 0.0)


def test_dropout_draws_a_different_mask_per_layer():
  @nnx.split_rngs(splits=L)
  @nnx.vmap(in_axes=0, out_axes=0)
  def make(rngs):
    return Dropout(rngs)

  drops = make(nnx.Rngs(dropout=0))

  @nnx.scan(in_axes=(0, nnx.Carry), out_axes=(nnx.Carry, 0))
  def masks(layer, x):
    return x, layer(x)

  _, ys = masks(drops, jnp.ones(32))
  assert len({tuple(np.asarray(m).tolist()) for m in ys}) == L
  count = drops.rngs.count.value
  assert_trees_equal(count, jnp.ones_like(count))  # each layer drew once


def test_rngs_counts_advance_as_documented():
  # Unsplit stream broadcast (None): every step draws the same keys, and the count
  # is not advanced (as flax.nnx).
  rngs = nnx.Rngs(dropout=0)

  @nnx.scan(in_axes=(nnx.Carry, None, 0), out_axes=(nnx.Carry, 0))
  def draw(c, rngs, x):
    return c, jax.random.uniform(rngs.dropout(), ()) + jax.random.uniform(rngs.dropout(), ())

  _, ys = draw(jnp.zeros(()), rngs, jnp.zeros(5))
  assert int(rngs.dropout.count.value) == 0
  assert len(set(np.asarray(ys).tolist())) == 1
  # Split stream scanned over axis 0: +1 for the split, whatever happens inside.
  rngs = nnx.Rngs(dropout=0)
  draw_split = nnx.split_rngs(splits=5)(
    nnx.scan(draw.fn, in_axes=(nnx.Carry, 0, 0), out_axes=(nnx.Carry, 0))
  )
  _, ys = draw_split(jnp.zeros(()), rngs, jnp.zeros(5))
  assert int(rngs.dropout.count.value) == 1 and rngs.dropout.key.shape == ()
  assert len(set(np.asarray(ys).tolist())) == 5


def test_no_retrace_eager_and_inside_jit():
  layers = make_layers()
  counter = TraceCounter()
  f = nnx.scan(counter(lambda l, x: l(x)), in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
  f(layers, X)
  with assert_no_retrace(counter):
    f(layers, X)
  g = nnx.jit(lambda m, x: f(m, x))
  g(layers, X)
  n = counter.count
  with assert_no_retrace(counter):
    g(layers, X)
  assert n == 2


def test_length_mismatch_errors_name_the_paths():
  layers = make_layers()
  f = nnx.scan(lambda l, x, z: (l(x), z), in_axes=(0, nnx.Carry, 0), out_axes=(nnx.Carry, 0))
  with pytest.raises(nnx.ScanLengthError, match=r"size 4: argument 0, state linear/bias.*size 3"):
    f(layers, X, jnp.ones(3))
  g = nnx.scan(lambda l, x: l(x), in_axes=(0, nnx.Carry), out_axes=nnx.Carry, length=5)
  with pytest.raises(nnx.ScanLengthError, match=r"length=5"):
    g(layers, X)
  h = nnx.scan(lambda c: c, in_axes=nnx.Carry, out_axes=nnx.Carry)
  with pytest.raises(nnx.ScanLengthError, match="pass length=n"):
    h(X)


def test_carry_shape_dtype_and_structure_changes_are_errors_and_atomic():
  layers, shared = make_layers(), Shared()
  before = (nnx.state(layers), nnx.state(shared))

  def scan(body):
    return nnx.scan(body, in_axes=(0, None, nnx.Carry), out_axes=nnx.Carry)

  def grow(layer, shared, x):
    shared.calls += 1
    return jnp.concatenate([layer(x), x], 0)

  with pytest.raises(
    nnx.CarryMismatchError,
    match=r"nnx.scan: carry enters a step with shape \(2, 4\).*shape \(4, 4\)",
  ):
    scan(grow)(layers, shared, X)
  with pytest.raises(nnx.CarryMismatchError, match=r"dtype float32.*dtype int32"):
    scan(lambda l, s, x: x.astype(jnp.int32))(layers, shared, X)
  with pytest.raises(nnx.CarryMismatchError, match="changed structure"):
    scan(lambda l, s, x: (x, x))(layers, shared, X)

  def bad_state(layer, shared, x):
    shared.calls.value = jnp.ones(3, jnp.int32)
    return x

  with pytest.raises(nnx.CarryMismatchError, match=r"argument 1, state calls"):
    scan(bad_state)(layers, shared, X)
  assert_trees_equal((nnx.state(layers), nnx.state(shared)), before)


def test_axes_spec_errors():
  # raised when the transform is applied, before any call
  with pytest.raises(nnx.AxisSpecError, match="If one of in_axes or out_axes has Carry"):
    nnx.scan(lambda c, x: c, in_axes=(nnx.Carry, 0), out_axes=0)
  with pytest.raises(nnx.AxisSpecError, match="top-level entry"):
    nnx.scan(lambda c: c, in_axes=((nnx.Carry, 0),), out_axes=0)
  with pytest.raises(nnx.AxisSpecError, match="Found multiple Carry definitions in in_axes"):
    nnx.scan(lambda a, b: a, in_axes=(nnx.Carry, nnx.Carry))
  with pytest.raises(nnx.AxisSpecError, match="Cannot broadcast output state. Got None"):
    nnx.scan(lambda a, b: a, in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, None))
  with pytest.raises(
    nnx.AxisSpecError, match=r"Cannot broadcast output state. Got StateAxes \(nnx.StateAxes\("
  ):
    nnx.scan(
      lambda a, b: a, in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, nnx.StateAxes({...: None}))
    )


def test_transform_metadata_inside_and_outside():
  init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))

  @nnx.split_rngs(splits=L)
  @nnx.vmap(in_axes=0, out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
  def make(rngs):
    return nnx.Linear(4, 4, kernel_init=init, rngs=rngs)

  stack = make(nnx.Rngs(0))
  seen = []

  @nnx.scan(
    in_axes=(0, nnx.Carry), out_axes=nnx.Carry, transform_metadata={nnx.PARTITION_NAME: "layers"}
  )
  def forward(layer, x):
    seen.append(layer.kernel.out_sharding)
    return layer(x)

  forward(stack, X)
  assert seen == [("embed", "mlp")] and stack.kernel.out_sharding == ("layers", "embed", "mlp")


# --------------------------------------------------------------------------
# Seed-era forms
# --------------------------------------------------------------------------
class SeedBlock(nnx.Module):
  def __init__(self, *, rngs):
    self.linear = nnx.Linear(4, 4, rngs=rngs)
    self.count = nnx.Variable(jnp.array(0))

  def __call__(self, x, _):
    self.count += 1
    return jnp.tanh(self.linear(x)), None

  def double(self, x, _):
    return 2 * self.linear(x), None


def test_seed_scan_wrapper():
  scan = nnx.Scan(SeedBlock, variable_axes={nnx.Param: 0}, split_rngs="params", length=L)(
    rngs=nnx.Rngs(params=0)
  )
  assert scan.scan_module.linear.kernel.value.shape == (L, 4, 4)
  y, _ = scan(X, None)
  graphdef, state = nnx.split(scan.scan_module, nnx.Param, ...)[:2]
  ref = X
  for i in range(L):
    k, b = state.linear.kernel.value[i], state.linear.bias.value[i]
    ref = jnp.tanh(ref @ k + b)
  assert_trees_close(y, ref)
  assert int(scan.scan_module.count.value) == L  # carried (variable_carry=...) and written back
  y2, _ = scan.call.double(X, None)
  assert y2.shape == (2, 4)
  # the 0.0.7 spelling
  old = nnx.scan(SeedBlock, variable_axes={nnx.Param: 0}, split_rngs="params", length=2)(
    rngs=nnx.Rngs(params=0)
  )
  assert isinstance(old, nnx.Scan) and old.scan_module.linear.kernel.value.shape == (2, 4, 4)


class ScanMLP(nnx.Module):
  @partial(
    nnx.scan,
    variable_axes={nnx.Param: 0},
    split_rngs="params",
    length=3,
    metadata_params={nnx.PARTITION_NAME: "layers"},
  )
  def __init__(self, *, rngs):
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
    self.linear = nnx.Linear(4, 4, kernel_init=init, rngs=rngs)

  @partial(nnx.scan, variable_axes={nnx.Param: 0}, metadata_params={nnx.PARTITION_NAME: "layers"})
  def __call__(self, x, _):
    SEEN.append(self.linear.kernel.out_sharding)
    return self.linear(x), None


SEEN: list = []


def test_seed_scan_decorators_on_init_and_call():
  model = ScanMLP(rngs=nnx.Rngs(params=0))
  assert model.linear.kernel.value.shape == (3, 4, 4)
  assert model.linear.kernel.out_sharding == ("layers", "embed", "mlp")
  k = np.asarray(model.linear.kernel.value)
  assert not np.array_equal(k[0], k[1])
  y, _ = model(X, None)
  ref = X
  for i in range(3):
    ref = ref @ k[i] + model.linear.bias.value[i]
  assert_trees_close(y, ref)
  assert SEEN == [("embed", "mlp")]


def test_seed_scan_cannot_stack_without_length():
  with pytest.raises(nnx.ScanLengthError, match="length"):
    nnx.Scan(SeedBlock, variable_axes={nnx.Param: 0})(rngs=nnx.Rngs(0))

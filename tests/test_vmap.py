"""nnx.vmap and nnx.split_rngs: stacked construction, StateAxes, updates, Rngs counts,
trace counts, errors (with the caller's module unchanged), and the same program as
a hand-written jax.vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
  hlo_equal,
)


class Counter(nnx.Module):
  def __init__(self, n=3):
    self.w = nnx.Param(jnp.arange(n * 2.0).reshape(n, 2))
    self.count = nnx.Variable(jnp.array(0))

  def __call__(self, x):
    self.count += 1
    return x * self.w


class Noisy(nnx.Module):
  """A dropout-like block: draws a key from its rngs on every call."""

  def __init__(self, rngs):
    self.rngs = rngs

  def __call__(self, x):
    return jnp.where(jax.random.bernoulli(self.rngs.dropout(), 0.5, x.shape), x, 0.0)


PARAMS_0 = nnx.StateAxes({nnx.Param: 0, ...: None})


@nnx.vmap(in_axes=0, out_axes=0)
def make_linear(rngs):
  return nnx.Linear(2, 3, rngs=rngs)


def make_stack(n, seed=0):
  return nnx.split_rngs(splits=n)(make_linear)(nnx.Rngs(seed))


def test_vmapped_construction_stacks_distinct_layers():
  rngs = nnx.Rngs(0)

  @nnx.split_rngs(splits=4)
  @nnx.vmap(in_axes=0, out_axes=0)
  def make(rngs):
    return nnx.Linear(2, 3, rngs=rngs)

  stack = make(rngs)
  assert_trees_equal(nnx.state(stack), nnx.state(make_stack(4)))
  assert stack.kernel.value.shape == (4, 2, 3) and stack.bias.value.shape == (4, 3)
  k = np.asarray(stack.kernel.value)
  assert all(not np.array_equal(k[0], k[i]) for i in range(1, 4))
  # split_rngs drew one key and restored the stream: count advanced by exactly 1.
  assert rngs.default.key.shape == () and int(rngs.default.count.value) == 1
  # each member equals a Linear built from its own split key (the same random bits;
  # the unbatched initialiser is another program, which a GPU may round differently)
  keys = jax.random.split(jax.random.fold_in(jax.random.key(0), 0), 4)
  ref = nnx.Linear(2, 3, rngs=nnx.Rngs(keys[2]))
  assert_trees_close(k[2], ref.kernel.value)


def test_apply_stack_matches_per_member_loop():
  stack = make_stack(3)
  x = jnp.arange(10.0).reshape(5, 2)
  y = nnx.vmap(lambda m, x: m(x), in_axes=(0, None))(stack, x)
  for i in range(3):
    ref = x @ stack.kernel.value[i] + stack.bias.value[i]
    assert_trees_close(y[i], ref)


def test_state_axes_and_broadcast_updates_propagate():
  m = Counter()
  counter = TraceCounter()
  f = nnx.vmap(counter(lambda m, x: m(x)), in_axes=(PARAMS_0, 0))
  y = f(m, jnp.ones((3, 2)))
  assert_trees_equal(y, m.w.value)
  with assert_no_retrace(counter):
    f(m, jnp.ones((3, 2)))
  # the broadcast counter was updated once per call (not once per member)
  assert int(m.count.value) == 2 and counter.count == 1


def test_no_retrace_inside_jit():
  m = Counter()
  counter = TraceCounter()
  step = nnx.jit(lambda m, x: nnx.vmap(counter(lambda m, x: m(x)), in_axes=(PARAMS_0, 0))(m, x))
  step(m, jnp.ones((3, 2)))
  with assert_no_retrace(counter):
    step(m, jnp.ones((3, 2)))
  assert int(m.count.value) == 2


def test_mapped_state_updates_keep_their_axis():
  m = Counter()

  def scale(m, s):
    m.w.value = m.w.value * s

  nnx.vmap(scale, in_axes=(PARAMS_0, 0))(m, jnp.array([1.0, 2.0, 3.0]))
  expected = jnp.arange(6.0).reshape(3, 2) * jnp.array([[1.0], [2.0], [3.0]])
  assert_trees_equal(m.w.value, expected)


def test_out_axes_one_stacks_on_axis_one():
  stack = make_stack(3)

  @nnx.vmap(in_axes=(0, None), out_axes=1)
  def apply(m, x):
    return m(x)

  assert apply(stack, jnp.ones((5, 2))).shape == (5, 3, 3)


def test_unchanged_state_is_not_an_output_and_program_matches_jax_vmap():
  stack = make_stack(3)
  x = jnp.ones((5, 2))
  lowered = nnx.jit(lambda m, x: nnx.vmap(lambda m, x: m(x), in_axes=(0, None))(m, x)).lower(
    stack, x
  )
  graphdef, state = nnx.split(stack)
  ref = jax.jit(lambda s, x: jax.vmap(lambda s: nnx.merge(graphdef, s)(x))(s)).lower(state, x)
  assert len(jax.tree.leaves(lowered.out_info)) == 1
  assert hlo_equal(lowered, ref)


def test_split_rngs_gives_each_member_its_own_key_broadcast_rngs_the_same():
  rngs = nnx.Rngs(dropout=1)
  noisy = Noisy(rngs)
  x = jnp.ones((4, 16))
  with nnx.split_rngs(noisy, splits=4):
    split = nnx.vmap(lambda m, x: m(x), in_axes=(0, 0))(noisy, x)
  assert len({tuple(np.asarray(r).tolist()) for r in split}) == 4
  # count: +1 for the split (draws inside went to the discarded per-member counts)
  assert int(rngs.dropout.count.value) == 1
  same = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(noisy, x)
  assert_trees_equal(list(same[1:]), [same[0]] * 3)  # one key for every member
  # unsplit: one draw for the whole vmap (every member used the same key)
  assert int(rngs.dropout.count.value) == 2


def test_split_rngs_only_and_restore():
  rngs = nnx.Rngs(params=0, dropout=1)
  backups = nnx.split_rngs(rngs, splits=(2, 3), only="dropout")
  assert rngs.dropout.key.shape == (2, 3) and rngs.dropout.count.value.shape == (2, 3)
  assert rngs.params.key.shape == ()
  nnx.restore_rngs(backups)
  assert rngs.dropout.key.shape == () and int(rngs.dropout.count.value) == 1
  assert int(rngs.params.count.value) == 0


def test_transform_metadata_moves_the_stacked_axis_name():
  seen = []

  @nnx.split_rngs(splits=3)
  @nnx.vmap(in_axes=0, out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
  def make(rngs):
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
    return nnx.Linear(2, 4, kernel_init=init, rngs=rngs)

  stack = make(nnx.Rngs(0))
  assert stack.kernel.out_sharding == ("layers", "embed", "mlp")

  @nnx.vmap(in_axes=(0, None), transform_metadata={nnx.PARTITION_NAME: "layers"})
  def apply(m, x):
    seen.append(m.kernel.out_sharding)
    return m(x)

  apply(stack, jnp.ones((1, 2)))
  assert seen == [("embed", "mlp")]
  assert stack.kernel.out_sharding == ("layers", "embed", "mlp")


def test_axis_larger_than_rank_names_path_and_leaves_module_unchanged():
  m = Counter()
  before = nnx.state(m)
  with pytest.raises(nnx.AxisRankError, match=r"axis 0 of argument 0, state count.*rank 0"):
    nnx.vmap(lambda m: m.w.value, in_axes=0)(m)
  with pytest.raises(nnx.AxisRankError, match=r"axis 2 of argument 1.*shape \(3, 2\)"):
    nnx.vmap(lambda m, x: m(x), in_axes=(PARAMS_0, 2))(m, jnp.ones((3, 2)))
  assert_trees_equal(nnx.state(m), before)


def test_inconsistent_sizes_and_bad_prefix():
  m = Counter()
  with pytest.raises(nnx.AxisSizeError, match=r"size 3: argument 0, state w.*size 4"):
    nnx.vmap(lambda m, x: m(x), in_axes=(PARAMS_0, 0))(m, jnp.ones((4, 2)))
  with pytest.raises(nnx.AxisSpecError, match="3 entries but the function got 2"):
    nnx.vmap(lambda m, x: m(x), in_axes=(0, 0, 0))(m, jnp.ones((3, 2)))
  with pytest.raises(nnx.AxisSpecError, match=r"no filter of nnx\.StateAxes"):
    nnx.vmap(lambda m, x: m(x), in_axes=(nnx.StateAxes({nnx.Param: 0}), 0))(m, jnp.ones((3, 2)))


def test_broadcast_state_set_to_mapped_value_raises_and_is_atomic():
  m = Counter()
  before = nnx.state(m)

  def bad(m, x):
    m.count.value = x.sum().astype(jnp.int32)
    m.w.value = m.w.value * 0

  with pytest.raises(nnx.BroadcastUpdateError, match=r"argument 0, state count has out axis None"):
    nnx.vmap(bad, in_axes=(PARAMS_0, 0))(m, jnp.ones((3, 2)))
  assert_trees_equal(nnx.state(m), before)


def test_decorated_method_binds_self():
  class Ensemble(Counter):
    @nnx.vmap(in_axes=(PARAMS_0, 0))
    def scaled(self, x):
      self.count += 1
      return x * self.w

  m = Ensemble()
  assert_trees_equal(m.scaled(2 * jnp.ones((3, 2))), 2 * m.w.value)
  assert int(m.count.value) == 1


def test_keyword_arguments_bind_to_positions():
  m = Counter()
  f = nnx.vmap(lambda m, x: m(x), in_axes=(PARAMS_0, 0))
  assert_trees_equal(f(m, x=jnp.ones((3, 2))), m.w.value)


@settings(max_examples=6)
@given(
  axis=st.integers(0, 2),
  size=st.integers(1, 3),
)
def test_law_mapping_an_axis_equals_moving_it_to_the_front(axis, size):
  shape = [2, 2, 2]
  shape[axis] = size
  x = jnp.arange(float(np.prod(shape))).reshape(shape)
  m = Counter(n=size)
  y = nnx.vmap(lambda m, x: m.w.value.sum() + x, in_axes=(PARAMS_0, axis))(m, x)
  ref = jax.vmap(lambda w, x: w.sum() + x)(m.w.value, jnp.moveaxis(x, axis, 0))
  assert_trees_equal(y, ref)


def test_new_variables_returned_by_the_body_come_back_stacked():
  traces = []

  @nnx.split_rngs(splits=5)
  @nnx.vmap(in_axes=0, out_axes=0, axis_size=5)
  def make(rngs):
    traces.append(1)
    return nnx.Param(jax.random.normal(rngs(), (2, 3))), nnx.BatchStat(jnp.zeros(3))

  rngs = nnx.Rngs(0)
  w, s = make(rngs)
  assert isinstance(w, nnx.Param) and isinstance(s, nnx.BatchStat)
  assert w.shape == (5, 2, 3) and s.shape == (5, 3)
  assert not jnp.allclose(w[0], w[1])
  make(rngs)
  assert len(traces) == 1

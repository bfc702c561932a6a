"""Ref-mode Variables and raw ``jax.Ref`` values through ``nnx.jit`` (flax.nnx 0.12):
Refs may come in and go out; the caller gets its own Refs back and new Refs for
those created inside."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import (
  TraceCounter,
  assert_no_retrace,
  assert_trees_close,
  assert_trees_equal,
)


def test_raw_ref_in_and_out_of_nnx_jit():
  r = jax.new_ref(jnp.array(1.0))
  counter = TraceCounter()

  @nnx.jit
  @counter
  def f(r):
    r[...] += 1.0
    return jax.new_ref(jnp.array(10.0)), r

  new, same = f(r)
  assert same is r and isinstance(new, jax.Ref)
  assert_trees_equal((r[...], new[...]), (jnp.array(2.0), jnp.array(10.0)))
  with assert_no_retrace(counter):
    new2, same2 = f(r)
  assert same2 is r and new2 is not new and float(r[...]) == 3.0


def test_ref_mode_module_built_inside_comes_out_in_new_refs():
  m1 = nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)
  inside = []

  @nnx.jit
  def f(m):
    m.kernel[...] += 1.0
    out = nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)
    inside.append(out)
    return out

  k0 = m1.kernel[...]
  out = f(m1)
  assert out is not inside[0] and isinstance(out.kernel, nnx.Param) and out.kernel.ref
  assert isinstance(out.kernel.get_raw_value(), jax.Ref)
  assert_trees_equal(m1.kernel[...], k0 + 1.0)
  # the initialiser ran inside nnx.jit, the reference eagerly: two programs (on a GPU
  # they differ in the last bit), so compared within the tolerance policy
  assert_trees_close(out.kernel[...], nnx.Linear(1, 1, rngs=nnx.Rngs(0)).kernel[...])


def test_pytree_with_ref_data_returned_is_the_callers_object():
  @nnx.dataclass
  class Foo(nnx.Pytree):
    a: jax.Ref = nnx.data()

  foo = Foo(a=jax.new_ref(1))

  @nnx.jit
  def f(x):
    x.a[...] += 1
    return x

  out = f(foo)
  assert out is foo and isinstance(out.a, jax.Ref) and int(out.a[...]) == 2


def test_ref_outputs_through_lower_and_compile():
  r = jax.new_ref(jnp.array(1.0))
  f = nnx.jit(lambda r: (r, jax.new_ref(r[...] * 2)))
  f(r)  # traced once: the markers are known
  same, new = f.lower(r).compile()(r)
  assert same is r and float(new[...]) == 2.0


def test_caller_ref_unchanged_after_an_error_inside_nnx_jit():
  m = nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)
  before = m.kernel[...]

  @nnx.jit
  def bad(m):
    m.kernel[...] += 1.0
    raise ValueError("boom")

  with pytest.raises(ValueError, match="boom"):
    bad(m)
  assert_trees_equal(m.kernel[...], before)
  assert isinstance(m.kernel.get_raw_value(), jax.Ref)


def _ref_linear():
  return nnx.with_vars(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), ref=True)


@pytest.mark.parametrize("flatten", [False, True])
def test_update_context_inner_split_gives_placeholders_and_outer_merge_resolves_them(flatten):
  m1 = _ref_linear()
  ref0 = m1.kernel.get_raw_value()
  with nnx.update_context("t"):
    with nnx.split_context("t") as ctx:
      graphdef, state = ctx.split(m1)
    with nnx.merge_context("t", True) as ctx:
      m2 = ctx.merge(graphdef, state)
    m2.kernel[...] = jnp.full((1, 1), 7.0)  # through the caller's own Ref
    new = _ref_linear()
    with nnx.split_context("t") as ctx:
      if flatten:
        g_out, flat = ctx.flatten((m2, new))
        by_path = dict(flat)
        kernel_in, kernel_new = by_path[(0, "kernel")], by_path[(1, "kernel")]
        s_out = flat
      else:
        g_out, s_out = ctx.split((m2, new))
        kernel_in, kernel_new = s_out[0]["kernel"], s_out[1]["kernel"]
    assert isinstance(kernel_in.get_value(), nnx.graphlib.NoUpdate)
    assert isinstance(kernel_new.get_value(), nnx.graphlib.ArrayRefOutput)
    assert len(jax.tree.leaves(s_out)) == 2  # NoUpdate has no leaves
    assert isinstance(m2.kernel.get_raw_value(), jax.Ref)  # the graph itself is untouched
    with nnx.merge_context("t", False) as ctx:
      m3, new_out = ctx.merge(g_out, s_out) if not flatten else ctx.unflatten(g_out, s_out)
  assert m3 is m1 and m1.kernel.get_raw_value() is ref0
  assert_trees_equal(m1.kernel[...], jnp.full((1, 1), 7.0))
  assert new_out is not new and isinstance(new_out.kernel.get_raw_value(), jax.Ref)
  assert new_out.kernel.get_raw_value() is not new.kernel.get_raw_value()
  assert_trees_equal(new_out.kernel[...], new.kernel[...])


def test_from_tree_passes_each_nodes_prefix_to_merge_fn():
  m = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
  seen = []

  def merge_fn(ctx, path, prefix, node_states):
    seen.append((path, prefix))
    return ctx.merge(node_states.graphdef, *node_states.states)

  m2 = nnx.Linear(1, 1, rngs=nnx.Rngs(1))
  tree = nnx.to_tree((m, {"b": m2}), prefix=(0, None))
  a, d = nnx.from_tree(tree, prefix=(0, None), merge_fn=merge_fn)
  assert type(a) is type(d["b"]) is nnx.Linear and a is not m
  assert seen == [((0,), 0), ((1, "b"), None)]


def test_captured_ref_mode_variables_are_updated_inside_jit_grad_and_scan():
  """As flax.nnx: a ref-mode Variable's writes go into its jax.Ref, which JAX carries
  out of any transform, so a captured one may be written there (an ordinary
  Variable's write from another trace is refused)."""
  v = nnx.Variable(jnp.array(2.0), ref=True)
  rngs = nnx.Rngs(0)
  with nnx.var_defaults(ref=True):
    ref_rngs = nnx.Rngs(0)

  def loss(x):
    v[...] = jax.lax.stop_gradient(x * 3)
    return x**2 + v[...]

  assert_trees_close(jax.grad(loss)(jnp.array(4.0)), jnp.array(8.0))
  assert_trees_equal(v[...], jnp.array(12.0))

  def body(c, _):
    v[...] += 1.0
    return c, None

  jax.lax.scan(body, None, None, length=5)
  assert_trees_equal(v[...], jnp.array(17.0))
  keys = [jax.jit(lambda: ref_rngs())() for _ in range(2)]
  assert not bool(jnp.all(jax.random.key_data(keys[0]) == jax.random.key_data(keys[1])))
  assert int(ref_rngs.default.count[...]) == 2
  with pytest.raises(nnx.TraceContextError, match="RngCount"):
    jax.jit(lambda: rngs())()

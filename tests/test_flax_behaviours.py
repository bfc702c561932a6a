"""Behaviours that follow flax.nnx 0.12 (issue 19 item 5) and the flax 0.12 names added
with the import surface (Object, FlatState, map_state, the variable-name registry, ...)."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import optax
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import TraceCounter, assert_no_retrace, assert_trees_close


class MLP(nnx.Module):
  def __init__(self, rngs):
    self.layers = nnx.Sequential(nnx.Linear(2, 3, rngs=rngs), nnx.Linear(3, 1, rngs=rngs))
    self.extra = nnx.List([nnx.Linear(1, 1, rngs=rngs)])

  def __call__(self, x):
    return self.extra[0](self.layers(x))


X, Y = jnp.ones((4, 2)), jnp.zeros((4, 1))


def loss_fn(model):
  return ((model(X) - Y) ** 2).mean()


# -- Pytree checks -------------------------------------------------------------


def test_pytree_false_skips_the_data_static_checks():
  class Foo(nnx.Pytree, pytree=False):
    def __init__(self):
      self.ls = [jnp.ones(1)]

  foo = Foo()
  foo.more = [jnp.ones(2)]  # a plain list of arrays: accepted, and found as state
  assert nnx.state(foo).flat_state().paths == (("ls", 0), ("more", 0))


def test_data_appended_to_a_static_list_during_init_raises_after_init():
  class Bar(nnx.Pytree):
    def __init__(self):
      self.ls = []
      self.ls.append(jnp.ones(1))

  with pytest.raises(
    nnx.PytreeDataError,
    match=r"Found unexpected data on value of type <class 'list'> in static attribute 'ls'",
  ):
    Bar()
  with pytest.raises(ValueError):  # flax raises a ValueError: so does PytreeDataError
    Bar()


def test_check_pytree_after_mutation_and_its_type_error():
  class Baz(nnx.Pytree):
    def __init__(self):
      self.ls = []

  baz = Baz()
  nnx.check_pytree(baz)
  baz.ls.append(nnx.Param(1.0))
  with pytest.raises(nnx.PytreeDataError, match="static attribute 'ls'"):
    nnx.check_pytree(baz)
  with pytest.raises(TypeError, match="expects an nnx.Pytree"):
    nnx.check_pytree([1])


def test_dataclass_field_metadata_static_false_is_data():
  @dataclasses.dataclass
  class DC(nnx.Pytree):
    a: int = dataclasses.field(metadata={"static": False})
    b: int = 3

  assert jax.tree.leaves(DC(5)) == [5]
  assert nnx.state(DC(5)).flat_state().paths == (("a",),)


def test_object_is_not_a_pytree_and_refuses_pytree_true():
  class Buffers(nnx.Object):
    def __init__(self):
      self.items = [jnp.ones(2)]

  assert jax.tree.leaves(Buffers()) and len(jax.tree.leaves(Buffers())) == 1  # a single leaf
  with pytest.raises(ValueError, match="not a pytree"):

    class Bad(nnx.Object, pytree=True):
      pass


def test_has_data():
  assert len(nnx.has_data([1, jnp.ones(2), {"a": nnx.Param(1.0)}])) == 2
  assert nnx.has_data(("x", 1)) == []


# -- display, EMA, recursive_map over containers ----------------------------------


def test_display_of_an_optimizer_and_of_classes(capsys):
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
  nnx.display(opt)
  out = capsys.readouterr().out
  assert "wrt=Param" in out and "OptVariable" in out


def test_ema_of_a_model_with_sequential_and_list():
  model = MLP(nnx.Rngs(0))
  ema = nnx.EMA(model, decay=0.5)
  start = model.layers.layers[0].kernel.value
  model.layers.layers[0].kernel.value = start + 2.0
  ema.update(model)
  assert_trees_close(ema.params.layers.layers[0].kernel.value, start + 1.0)
  averaged = ema.apply_to(model)
  assert averaged.layers.layers[0].kernel is ema.params.layers.layers[0].kernel


def test_recursive_map_and_display_of_containers(capsys):
  model = MLP(nnx.Rngs(0))
  mapped = nnx.recursive_map(lambda path, x: x, model)
  nnx.display(mapped)
  assert "Linear" in capsys.readouterr().out


# -- State.flat_state, map_state, Optimizer state -----------------------------------


def test_flat_state_is_a_sorted_flatstate_of_variables():
  state = nnx.State({"b": nnx.Param(jnp.ones(2)), "a": {"c": nnx.BatchStat(jnp.zeros(1))}})
  flat = state.flat_state()
  assert isinstance(flat, nnx.FlatState)
  assert flat.paths == (("a", "c"), ("b",))
  assert [type(v).__name__ for _, v in flat] == ["BatchStat", "Param"]
  assert flat.to_nested_state().b is state.b


def test_opt_state_mirrors_the_parameters():
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.chain(optax.clip(1.0), optax.adam(1e-3)), wrt=nnx.Param)
  mu = opt.opt_state[1][0][1]  # chain -> adam -> (scale_by_adam, ...) -> mu
  assert isinstance(mu, nnx.State)
  assert isinstance(mu.layers.layers[0]["kernel"], nnx.OptVariable)
  assert mu.layers.layers[0]["kernel"].shape == (2, 3)


def test_map_state_labels_drive_optax_partition_under_jit():
  model = MLP(nnx.Rngs(0))
  labels = nnx.map_state(lambda path, v: path[-1], nnx.state(model, nnx.Param))
  assert labels.layers.layers[0]["kernel"] == "kernel"
  tx = optax.partition({"kernel": optax.sgd(0.1), "bias": optax.set_to_zero()}, labels)
  opt = nnx.Optimizer(model, tx, wrt=nnx.Param)
  counter = TraceCounter()

  @nnx.jit
  @counter
  def step(model, opt):
    grads = nnx.grad(loss_fn)(model)
    opt.update(model, grads)
    return grads

  bias0, kernel0 = model.layers.layers[0].bias.value, model.layers.layers[0].kernel.value
  grads = step(model, opt)
  assert_trees_close(model.layers.layers[0].bias.value, bias0)  # frozen by label
  expected = kernel0 - 0.1 * grads.layers.layers[0]["kernel"].value
  assert_trees_close(model.layers.layers[0].kernel.value, expected)
  with assert_no_retrace(counter):
    step(model, opt)


def test_optimizer_update_error_leaves_state_unchanged():
  model = MLP(nnx.Rngs(0))
  opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
  before = jax.tree.map(lambda x: x, nnx.state(opt))
  with pytest.raises(nnx.StateMismatchError, match="grads lack the paths"):
    opt.update(model, nnx.State({}))
  assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), before, nnx.state(opt)))


# -- registries and small functions -------------------------------------------------


def test_variable_name_registry():
  assert nnx.variable_type_from_name("params") is nnx.Param
  assert nnx.variable_name_from_type(nnx.BatchStat) == "batch_stats"
  with pytest.raises(ValueError, match="not registered"):
    nnx.variable_type_from_name("never_registered_name")
  made = nnx.variable_type_from_name("test_registry_made", allow_register=True)
  assert (
    issubclass(made, nnx.Variable) and nnx.variable_name_from_type(made) == "test_registry_made"
  )
  with pytest.raises(ValueError, match="already registered"):
    nnx.register_variable_name("params", nnx.BatchStat)

  class Unregistered(nnx.Variable):
    pass

  with pytest.raises(ValueError, match="not registered"):
    nnx.variable_name_from_type(Unregistered)


def test_pure_and_vars_as_are_deprecated_aliases():
  state = nnx.State({"w": nnx.Param(jnp.ones(1))})
  with pytest.warns(DeprecationWarning, match="Use as_pure instead"):
    pure = nnx.pure(state)
  assert not isinstance(pure.w, nnx.Variable)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    nnx.as_pure(state)  # the new name does not warn


def test_iter_module_children_includes_containers():
  model = MLP(nnx.Rngs(0))
  assert [(k, type(m).__name__) for k, m in nnx.iter_module_children(model)] == [
    ("extra", "List"),
    ("layers", "Sequential"),
  ]
  assert [k for k, _ in nnx.iter_module_children(model.extra)] == [0]


def test_update_context_objects():
  with pytest.raises(nnx.graphlib.UpdateContextError, match="No update context"):
    nnx.current_update_context("absent")
  with nnx.update_context("t"):
    assert isinstance(nnx.current_update_context("t"), nnx.UpdateContext)


def test_traversals_round_trip():
  from nnx_eqx import traversals

  nested = {"a": {"b": 1, "c": {}}, "d": 2}
  flat = traversals.flatten_mapping(nested, keep_empty_nodes=True)
  assert flat == {("a", "b"): 1, ("a", "c"): traversals.empty_node, ("d",): 2}
  assert traversals.unflatten_mapping(flat) == nested
  assert traversals.unflatten_mapping(traversals.flatten_mapping(nested, sep="/"), sep="/") == {
    "a": {"b": 1},
    "d": 2,
  }
  with pytest.raises(TypeError, match="expects a Mapping"):
    traversals.flatten_mapping([1])


def test_filterlib_path_in_and_filters_to_predicates():
  f = nnx.filterlib.PathIn(("layers", "layers", 0, "kernel"))
  model = MLP(nnx.Rngs(0))
  assert nnx.state(model, f).flat_state().paths == (("layers", "layers", 0, "kernel"),)
  with pytest.raises(nnx.FilterError, match="last filters"):
    nnx.filterlib.filters_to_predicates((..., nnx.Param))


def test_transform_metadata_restores_metadata_also_on_error():
  p = nnx.Param(jnp.ones((4, 3)), sharding=("layers", "embed"))

  @nnx.transform_metadata(in_axes=0, out_axes=0, partition="layers")
  def inside(p):
    assert p.sharding == ("embed",)
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError, match="boom"):
    inside(p)
  assert p.sharding == ("layers", "embed")


def test_transform_metadata_under_vmap_adds_the_stacked_axis():
  @nnx.vmap(in_axes=(None,), out_axes=0, axis_size=3)
  @nnx.transform_metadata(in_axes=(None,), out_axes=0, partition="c")
  def create(rngs):
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("a", "b"))
    return nnx.Linear(4, 2, rngs=rngs, kernel_init=init)

  m = create(nnx.Rngs(0))
  # with_partitioning stores the names as out_sharding (flax 0.12)
  assert m.kernel.shape == (3, 4, 2) and m.kernel.out_sharding == ("c", "a", "b")


def test_backup_keys_restore():
  rngs = nnx.Rngs(0)
  backups = nnx.rnglib.backup_keys(rngs)
  first = rngs.default()
  nnx.restore_rngs(backups)
  assert_trees_close(jax.random.key_data(rngs.default()), jax.random.key_data(first))


def test_markers_inside_containers_are_refused():
  class Foo(nnx.Pytree):
    def __init__(self):
      self.a = [nnx.data(1), nnx.static(2)]

  with pytest.raises(ValueError, match="not\\s+inside other structures.*attribute 'a'"):
    Foo()

"""The bad-input catalogue: each misuse raises a specific error naming the path and the fix."""

import jax
import jax.numpy as jnp
import pytest

import nnx_eqx as nnx
from nnx_eqx.testing import assert_trees_equal


class Model(nnx.Module):
  def __init__(self):
    self.lin = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    self.stat = nnx.BatchStat(jnp.zeros(3))
    self.cache = nnx.Cache(jnp.zeros(2))


def test_non_exhaustive_filters_name_uncovered_paths():
  with pytest.raises(nnx.FilterError, match=r"not matched: cache \(Cache\), stat \(BatchStat\)"):
    nnx.split(Model(), nnx.Param)
  with pytest.raises(nnx.FilterError, match=r"add .* `\.\.\.` as the last filter"):
    Model().partition(nnx.Param, nnx.Cache)
  with pytest.raises(nnx.FilterError, match=r"not matched: stat"):
    nnx.state(Model()).split(nnx.Param, nnx.Cache)


def test_unknown_filter_type():
  with pytest.raises(
    nnx.UnknownFilterError, match=r"Invalid filter 1\.5 of type float.*nnx\.Param"
  ):
    nnx.split(Model(), 1.5)


def test_merge_with_mismatched_state_names_paths():
  graphdef, params, rest = nnx.split(Model(), nnx.Param, ...)
  with pytest.raises(nnx.StateMismatchError, match=r"missing paths: cache, stat"):
    nnx.merge(graphdef, params)
  other = nnx.State({"lin": {"bias": jnp.zeros(3), "kernel": jnp.zeros((2, 3)), "x": 1}})
  with pytest.raises(nnx.StateMismatchError, match=r"unexpected paths: lin/x"):
    nnx.merge(graphdef, other, rest)
  with pytest.raises(nnx.GraphStructureError, match="merge expects a GraphDef first"):
    nnx.merge(params, graphdef)


def test_update_with_new_shape_or_dtype_or_unknown_path():
  m = Model()
  kernel = m.lin.kernel
  nnx.update(m, nnx.State({"lin": {"kernel": jnp.zeros((4, 2, 3))}}))  # as flax.nnx
  assert m.lin.kernel is kernel and kernel.shape == (4, 2, 3)
  nnx.update(m, nnx.State({"stat": jnp.zeros(3, jnp.int32)}))
  assert m.stat.dtype == jnp.int32
  with pytest.raises(nnx.StateMismatchError, match=r"path nope/x is not in the graph"):
    nnx.update(m, nnx.State({"nope": {"x": jnp.zeros(1)}}))


def test_mutation_from_another_trace():
  m = Model()
  with pytest.raises(nnx.TraceContextError, match=r"Cannot mutate BatchStat.*nnx\.jit"):
    jax.jit(lambda x: m.stat.__setattr__("value", x))(jnp.ones(3))
  msg = r"Cannot mutate 'Model' from different trace level \(attribute 'extra'\)"
  with pytest.raises(nnx.TraceContextError, match=msg):
    jax.jit(lambda x: setattr(m, "extra", x))(jnp.ones(3))
  rngs = nnx.Rngs(0)
  with pytest.raises(nnx.TraceContextError, match="RngCount"):
    jax.jit(lambda: rngs())()
  assert int(rngs.default.count.value) == 0
  assert_trees_equal(m.stat.value, jnp.zeros(3))


def test_exception_inside_grad_leaves_module_unchanged():
  m = Model()
  before = nnx.state(m)

  def loss(m):
    m.stat.value = m.stat.value + 1
    raise RuntimeError("inside grad")

  with pytest.raises(RuntimeError, match="inside grad"):
    nnx.grad(loss)(m)
  assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), nnx.state(m), before))


def test_split_of_a_non_graph_value_is_its_own_state():
  graphdef, state = nnx.split(3)
  assert state == 3 and nnx.merge(graphdef, state) == 3
  with pytest.raises(nnx.GraphStructureError, match="Expected a Module.*got int"):
    nnx.graph.api._functional.walk(3)  # the engine itself still wants a graph


def test_errors_share_a_base_class_and_builtin_types():
  for cls, builtin in [
    (nnx.FilterError, ValueError),
    (nnx.UnknownFilterError, TypeError),
    (nnx.StateMismatchError, KeyError),
    (nnx.ShapeDtypeError, ValueError),
    (nnx.TraceContextError, RuntimeError),
  ]:
    assert issubclass(cls, nnx.NnxError) and issubclass(cls, builtin)


def _public_exceptions():
  """Every exception class nnx_eqx's public modules export, with where."""
  import importlib
  import pkgutil

  names = ["nnx_eqx"] + [
    m.name
    for m in pkgutil.walk_packages(nnx.__path__, "nnx_eqx.")
    if not any(part.startswith("_") for part in m.name.split("."))
  ]
  found: dict[type, list[str]] = {}
  for name in names:
    for key, obj in vars(importlib.import_module(name)).items():
      if (
        isinstance(obj, type)
        and issubclass(obj, BaseException)
        and obj.__module__.split(".")[0] == "nnx_eqx"
        and not key.startswith("_")
      ):
        found.setdefault(obj, []).append(f"{name}.{key}")
  return found


def test_public_exceptions_name_a_public_module_that_exports_them():
  import importlib

  found = _public_exceptions()
  assert nnx.LostUpdateError in found and nnx.bridge.UnconvertibleFieldError in found
  for cls, where in found.items():
    assert not any(p.startswith("_") for p in cls.__module__.split(".")), (cls, where)
    assert getattr(importlib.import_module(cls.__module__), cls.__name__) is cls, where
  assert nnx.CheckpointMismatchError.__module__ == "nnx_eqx"
  assert nnx.bridge.UnconvertibleFieldError.__module__ == "nnx_eqx.bridge"


def test_every_public_exception_is_on_the_errors_page():
  import pathlib

  page = (pathlib.Path(__file__).parents[1] / "docs" / "api" / "errors.md").read_text()
  missing = [
    f"{cls.__module__}.{cls.__name__}"
    for cls in _public_exceptions()
    if f"::: {cls.__module__}.{cls.__name__}\n" not in page + "\n"
  ]
  assert not missing, f"add to docs/api/errors.md: {missing}"


def _within_package(file: str) -> tuple[str, ...]:
  """The parts of ``file``'s path inside the package's folder (as imported)."""
  import pathlib

  root = pathlib.Path(nnx.__file__).resolve().parent
  return pathlib.Path(file).resolve().relative_to(root).parts


def test_the_bridge_guide_lists_the_bridge_errors():
  import pathlib

  guide = (pathlib.Path(__file__).parents[1] / "docs" / "guides" / "bridge.md").read_text()
  import inspect

  bridge = [
    f"`{c.__module__.replace('nnx_eqx', 'nnx')}.{c.__name__}`"
    for c in _public_exceptions()
    if _within_package(inspect.getfile(c))[0] == "bridge"
  ]
  assert len(bridge) >= 8 and all(name in guide for name in bridge), bridge


def test_from_eqx_refuses_a_state_of_another_model_naming_path_shapes_and_dtypes():
  import equinox as eqx

  make = eqx.nn.make_with_state(eqx.nn.BatchNorm)
  bn3, state3 = make(3, "batch", mode="batch")
  _, state5 = make(5, "batch", mode="batch")
  nnx.from_eqx(bn3, state3)
  with pytest.raises(nnx.ShapeDtypeError, match=r"batch_state_index.*float32\[3\].*float32\[5\]"):
    nnx.from_eqx(bn3, state5)


def test_a_write_under_jax_vmap_shows_the_nnx_vmap_call_that_works():
  """Equinox's batching idiom for a converted BatchNorm writes from a plain
  ``jax.vmap``: the error shows the ``nnx.vmap`` line, which runs as shown."""
  import re

  import equinox as eqx

  bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
  model = nnx.from_eqx(bn, state)
  x = jnp.linspace(-1.0, 1.0, 24, dtype=jnp.float32).reshape(8, 3)
  with pytest.raises(nnx.TraceContextError) as info:
    jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, None)
  shown = re.search(r"`(y = nnx\.vmap\(.*?\)\(model, x\))`", str(info.value))
  assert shown is not None and "axis_name='batch'" in shown.group(1), str(info.value)
  scope = {"nnx": nnx, "model": model, "x": x}
  exec(shown.group(1), scope)  # noqa: S102 (the line the error shows, as shown)
  assert scope["y"].shape == (8, 3)
  assert int(model.counter.value) == 1  # the statistics were written back


# -- types and markers as users write them ------------------------------------------
def test_two_classes_of_one_short_name_are_printed_by_their_public_paths():
  import equinox as eqx

  native = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  converted = nnx.from_eqx(eqx.nn.Linear(2, 3, key=jax.random.key(0)))
  with pytest.raises(nnx.StackStructureError) as err:
    nnx.stack([native, converted])
  assert (
    "differs from modules[0] at <root>: a nnx_eqx.bridge.Linear in modules[1],"
    " a nnx_eqx.Linear in modules[0]."
  ) in str(err.value)
  with pytest.raises(nnx.StackStructureError, match=r"at <root>: a Conv in modules\[1\], a Lin"):
    nnx.stack([native, nnx.Conv(2, 3, (3,), rngs=nnx.Rngs(0))])  # short names differ: kept


def test_sow_names_both_variable_types_when_their_short_names_are_equal():
  # a user type of the same short name as nnx.Intermediate
  Intermediate = type("Intermediate", (nnx.Variable,), {"__module__": "mylib.vars"})
  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  m.z = Intermediate(jnp.zeros(1))
  with pytest.raises(nnx.SowError, match="of type nnx_eqx.Intermediate, got mylib.vars.Inter"):
    m.sow(nnx.Intermediate, "z", jnp.ones(1))
  m.y = nnx.Param(jnp.zeros(1))
  with pytest.raises(nnx.SowError, match="to be of type Intermediate, got Param"):
    m.sow(nnx.Intermediate, "y", jnp.ones(1))


def test_converter_clash_prints_public_paths_of_equinox_and_nnx_classes():
  import equinox as eqx

  with pytest.raises(nnx.bridge.ConverterClashError) as err:
    nnx.bridge.register(eqx.nn.Linear, nnx.Linear, to_nnx=lambda m, ctx: None)
  msg = str(err.value)
  assert "The Equinox type equinox.nn.Linear already has a converter" in msg
  assert "equinox.nn.Linear <-> nnx_eqx.bridge.Linear" in msg
  assert "cannot also register equinox.nn.Linear <-> nnx_eqx.Linear" in msg


_PRIVATE = __import__("re").compile(r"<class |\b(nnx_eqx|equinox|jax)(\.\w+)*\._\w")


def _raised(fn) -> str:
  try:
    fn()
  except Exception as e:  # noqa: BLE001 (any error: its message is checked)
    return str(e)
  raise AssertionError(f"{fn} raised nothing")


def test_error_messages_print_no_private_module_path_or_class_repr():
  import equinox as eqx

  m = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
  converted = nnx.from_eqx(eqx.nn.Linear(2, 3, key=jax.random.key(0)))
  triggers = [
    lambda: nnx.scan(lambda c, x: (c, x), in_axes=(0, 0)),
    lambda: nnx.scan(lambda c: c, out_axes=0),
    lambda: nnx.scan(lambda c, x: (c, x), in_axes=(nnx.Carry, nnx.Carry)),
    lambda: nnx.scan(lambda c: c, in_axes=nnx.Carry, out_axes=(nnx.Carry, None)),
    lambda: nnx.vmap(lambda m: m, in_axes=(nnx.Carry,))(m),
    lambda: nnx.split(m, ..., nnx.Param),
    lambda: nnx.prefix(m, {nnx.BatchStat: 0}),
    lambda: nnx.stack([m, converted]),
    lambda: nnx.bridge.register(eqx.nn.Linear, nnx.Linear, to_nnx=lambda m, ctx: None),
    lambda: nnx.StateAxes({nnx.BatchStat: 0}).axis_for(("kernel",), m.kernel, "in_axes"),
    lambda: converted(jnp.ones((4, 2))),
  ]
  for fn in triggers:
    msg = _raised(fn)
    assert not _PRIVATE.search(msg), msg


def test_axis_markers_print_as_users_write_them():
  assert repr(nnx.Carry) == "nnx.Carry"
  assert repr((nnx.Carry, 0)) == "(nnx.Carry, 0)"
  axes = nnx.StateAxes({nnx.Param: nnx.Carry, ...: None})
  assert repr(axes) == "nnx.StateAxes({Param: nnx.Carry, ...: None})"
  assert not _PRIVATE.search(repr(axes))
  import pickle

  assert pickle.loads(pickle.dumps(nnx.Carry)) is nnx.Carry


def test_scan_names_the_default_out_axes_the_user_did_not_pass():
  with pytest.raises(nnx.AxisSpecError) as err:
    nnx.scan(lambda c, x: (c, x), in_axes=(0, 0))
  assert str(err.value) == (
    "nnx.scan: If one of in_axes or out_axes has Carry, the other must also have Carry:"
    " out_axes has nnx.Carry and in_axes has none (got in_axes=(0, 0); out_axes not passed,"
    " so its default (nnx.Carry, 0)). Fix: pass out_axes too: out_axes=0 (no carry), or"
    " in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0)."
  )
  with pytest.raises(nnx.AxisSpecError, match=r"got in_axes=\(nnx\.Carry, 0\); out_axes=0\)"):
    nnx.scan(lambda c, x: (c, x), in_axes=(nnx.Carry, 0), out_axes=0)

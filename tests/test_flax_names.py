"""flax.nnx names: lazy submodules and module aliases exist as in flax; names
out of scope (the Linen bridge) raise an error that says so."""

import subprocess
import sys

import pytest

import nnx_eqx as nnx


@pytest.mark.parametrize(
  "name, module",
  [
    ("reprlib", "nnx_eqx.reprlib"),
    ("tracers", "nnx_eqx.tracers"),
    ("ids", "nnx_eqx.ids"),
    ("proxy_caller", "nnx_eqx.proxy_caller"),
    ("object", "nnx_eqx.pytreelib"),
    ("optimizer", "nnx_eqx.training.optimizer"),
  ],
)
def test_flax_submodules_and_aliases_are_attributes(name, module):
  # in a fresh interpreter, so that no earlier import made them attributes
  code = f"import nnx_eqx as nnx; print(nnx.{name}.__name__)"
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == module


def test_aliases_are_the_same_objects_and_do_not_shadow_object():
  assert nnx.optimizer.Optimizer is nnx.Optimizer
  assert nnx.object.Pytree is nnx.pytreelib.Pytree
  namespace: dict = {}
  exec("from nnx_eqx import *", namespace)
  assert "object" not in namespace  # the builtin stays the builtin


@pytest.mark.parametrize(
  "expr", ["nnx.bridge.ToNNX", "nnx.bridge.ToLinen", "nnx.bridge.lazy_init", "nnx.wrappers"]
)
def test_linen_bridge_names_raise_out_of_scope(expr):
  with pytest.raises(nnx.OutOfScopeError, match=r"Linen bridge.*nnx.to_eqx.*Names not provided"):
    eval(expr)
  assert issubclass(nnx.OutOfScopeError, AttributeError)
  assert issubclass(nnx.OutOfScopeError, nnx.NnxError)


def test_other_missing_names_are_plain_attribute_errors_with_a_pointer():
  with pytest.raises(AttributeError, match=r"no attribute 'nope'.*Names not provided") as e:
    nnx.nope  # noqa: B018
  assert not isinstance(e.value, nnx.OutOfScopeError)
  assert not hasattr(nnx, "wrappers") and hasattr(nnx.bridge, "to_eqx")
  assert getattr(nnx.bridge, "ToNNX", None) is None

"""Rendering: compact terminal reprs and treescope (text and HTML) for Modules,
Variables, States and GraphDefs."""

import jax
import jax.numpy as jnp
import numpy as np
import treescope

import nnx_eqx as nnx
from nnx_eqx.graph.api import _repr


class Block(nnx.Module):
  def __init__(self, rngs):
    self.dense = nnx.Linear(16, 16, rngs=rngs)
    self.norm_scale = nnx.Param(jnp.ones(16))
    self.mean = nnx.BatchStat(jnp.zeros(2))


class Net(nnx.Module):
  def __init__(self, rngs):
    self.a = Block(rngs)
    self.b = self.a  # a shared submodule
    self.tied = self.a.dense.kernel  # a shared Variable
    self.rngs = rngs
    self.name = "net"


def net():
  return Net(nnx.Rngs(0))


# --------------------------------------------------------------------------
# Terminal reprs
# --------------------------------------------------------------------------
def test_module_repr_summarises_arrays_and_marks_sharing():
  text = repr(net())
  assert "kernel=Param(value=float32[16, 16])" in text
  assert "mean=BatchStat(value=Array([0., 0.], dtype=float32))" in text
  assert "b=Block(...)  # shared with a" in text
  assert "tied=Param(...)  # shared with a.dense.kernel" in text
  assert "key=RngKey(value=key<fry>[], tag='default')" in text
  assert "name='net'" in text
  assert "0.0, 0.0, 0.0, 0.0, 0.0" not in text  # 16-element arrays are not printed


def test_modules_in_tuples_and_dicts_are_expanded():
  m = nnx.Module()
  m.layers = (nnx.Linear(2, 2, rngs=nnx.Rngs(0)), nnx.Linear(2, 3, rngs=nnx.Rngs(1)))
  m.heads = {"a": m.layers[0]}
  m.activation = jax.nn.relu
  m.dtype = np.dtype("float32")
  text = repr(m)
  # Attributes are visited in sorted order: heads (an nnx.Dict) comes first.
  assert "heads=Dict(\n    a=Linear(\n" in text
  assert "layers=(\n    Linear(...)  # shared with heads.a,\n    Linear(\n" in text
  assert "kernel=Param(value=float32[2, 3])" in text
  assert "activation=<function relu>" in text and "dtype=float32" in text


def test_module_repr_bounds_depth_and_handles_cycles():
  root = nnx.Module()
  node = root
  for _ in range(20):
    node.child = nnx.Module()
    node.child.w = nnx.Param(jnp.ones(1))
    node = node.child
  node.back = root  # a reference cycle
  text = repr(root)
  assert text.count("Module(") == _repr.MAX_DEPTH + 1
  assert "child=Module(...)" in text
  short = _repr.module_repr(root, max_depth=1)
  assert short.count("Module(") == 2
  cyc = nnx.Module()
  cyc.w = nnx.Param(jnp.ones(1))
  cyc.me = cyc
  assert "me=Module(...)  # shared with <root>" in repr(cyc)


def test_repr_inside_a_trace_does_not_touch_values():
  seen = []

  @jax.jit
  def f(m):
    seen.append(repr(m))
    return m.a.dense(jnp.ones((1, 16)))

  f(net())
  assert "kernel=Param(value=Traced<float32[16, 16]>)" in seen[0]
  assert "mean=BatchStat(value=Traced<float32[2]>)" in seen[0]


def test_abstract_and_pytree_values_are_summarised():
  abstract = jax.eval_shape(net)
  assert "kernel=Param(value=ShapeDtypeStruct(float32[16, 16]))" in repr(abstract)
  v = nnx.Variable({"mu": jnp.zeros((8, 8)), "count": jnp.array(3)})
  assert (
    repr(v)
    == "Variable(value={'count': Array(3, dtype=int32, weak_type=True), 'mu': float32[8, 8]})"
  )
  assert repr(nnx.Variable(np.zeros(3, np.int8))) == (
    "Variable(value=array([0, 0, 0], dtype=int8))"
  )
  long = nnx.Variable("x" * 200)
  assert len(repr(long)) < 100 and repr(long).endswith("...)")


def test_state_and_graphdef_reprs():
  graphdef, state = nnx.split(net())
  s = repr(state)
  assert s.startswith("State({")
  assert "'kernel': Param(value=float32[16, 16])" in s
  assert "'tied'" not in s  # shared Variables appear once
  g = repr(graphdef)
  assert g.startswith("GraphDef(Net, nodes=") and f"leaves={graphdef.num_leaves}" in g
  assert repr(nnx.State({})) == "State({})"


# --------------------------------------------------------------------------
# treescope
# --------------------------------------------------------------------------
def test_treescope_text_of_module_variable_and_state():
  m = net()
  text = treescope.render_to_text(m)
  assert text.startswith("Net(")
  assert "dense=Linear(" in text
  assert "kernel=Param(" in text
  assert "mean=BatchStat(value=<jax.Array([0., 0.], dtype=float32)>)" in text
  var = treescope.render_to_text(nnx.Param(jnp.ones(2), sharding=("x",)))
  assert (
    var.split() == "Param( value=<jax.Array([1., 1.], dtype=float32)>, sharding=('x',), )".split()
  )
  st = treescope.render_to_text(nnx.state(m, nnx.BatchStat))
  assert st.startswith("State({") and "'mean': BatchStat(" in st


def test_treescope_text_of_graphdef_shows_structure_and_sharing():
  text = treescope.render_to_text(nnx.graphdef(net()))
  assert text.startswith("GraphDef(")
  assert "root=Net(" in text
  assert "a=Block(" in text
  assert "kernel=Param()" in text
  assert "b=<shared: a>" in text
  assert "tied=<shared: a.dense.kernel>" in text
  assert "default=RngStream(" in text and "RngKey(tag='default')" in text
  assert "name='net'" in text


def test_treescope_html_renders_every_kind():
  m = net()
  graphdef, state = nnx.split(m)
  for obj in (m, state, graphdef, m.a.dense.kernel):
    assert "treescope" in treescope.render_to_html(obj)  # the default, compressed form
    html = treescope.render_to_html(obj, compressed=False)
    assert type(obj).__name__ in html
  # Variable types get their own colours.
  assert _repr.variable_color(nnx.Param) != _repr.variable_color(nnx.BatchStat)
  assert _repr.variable_color(nnx.RngKey) == _repr.variable_color(nnx.RngCount)
  assert _repr.variable_color(nnx.RngKey) in treescope.render_to_html(m.rngs, compressed=False)

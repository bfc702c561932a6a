"""Module-system scenarios written once against the flax.nnx API.

``run(nnx)`` executes every scenario with the given library (flax.nnx or
nnx_eqx) and returns plain JSON-able results. ``generate.py`` records them
with flax.nnx into ``flax_reference.json``; ``test_parity_flax.py`` runs them
with nnx_eqx and compares.
"""

import jax
import jax.numpy as jnp


def _key(k):
  for attr in ("key", "idx", "name"):
    if hasattr(k, attr):
      return str(getattr(k, attr))
  return str(k)


def _paths(state):
  leaves = jax.tree_util.tree_flatten_with_path(state)[0]
  return sorted("/".join(_key(k) for k in path) for path, _ in leaves)


def run(nnx):
  out = {}

  class Count(nnx.Variable):
    pass

  class Block(nnx.Module):
    def __init__(self, din, dout, *, rngs):
      self.linear = nnx.Linear(din, dout, rngs=rngs)
      self.bn_mean = nnx.BatchStat(jnp.zeros(dout))
      self.count = Count(jnp.array(0))
      self.cache = nnx.Cache(jnp.zeros(2))

    def __call__(self, x):
      self.count.value += 1
      return self.linear(x)

  class Model(nnx.Module):
    def __init__(self, rngs):
      self.a = Block(2, 3, rngs=rngs)
      self.b = Block(3, 3, rngs=rngs)
      self.tied = self.a  # shared submodule
      self.w = self.b.linear.kernel  # shared Variable

    def __call__(self, x):
      return self.b(self.a(x))

  rngs = nnx.Rngs(params=0)
  m = Model(rngs)
  out["rngs_count_after_init"] = int(rngs.params.count.value)

  graphdef, state = nnx.split(m)
  out["paths_all"] = _paths(state)
  out["leaves_all"] = len(jax.tree.leaves(state))
  for name, flt in [
    ("param", nnx.Param),
    ("batchstat", nnx.BatchStat),
    ("count", Count),
    ("cache", nnx.Cache),
    ("variable", nnx.Variable),
    ("not_param", nnx.Not(nnx.Param)),
    (
      "plain",
      nnx.All(
        nnx.Variable, nnx.Not(nnx.Param), nnx.Not(nnx.BatchStat), nnx.Not(nnx.Cache), nnx.Not(Count)
      ),
    ),
    ("path_b", nnx.PathContains("b")),
  ]:
    out[f"leaves_{name}"] = len(jax.tree.leaves(nnx.state(m, flt)))
  _, params, rest = nnx.split(m, nnx.Param, ...)
  out["split_param_paths"] = _paths(params)
  out["split_rest_paths"] = _paths(rest)

  m2 = nnx.merge(graphdef, state)
  out["merge_tied_is_a"] = m2.tied is m2.a
  out["merge_w_is_kernel"] = m2.w is m2.b.linear.kernel
  out["merge_new_objects"] = m2 is not m and m2.a is not m.a
  out["graphdef_equal_across_builds"] = nnx.graphdef(Model(nnx.Rngs(params=1))) == graphdef

  @nnx.jit
  def step(m, x):
    return m(x)

  for _ in range(3):
    step(m, jnp.ones((1, 2)))
  out["jit_count_a"] = int(m.a.count.value)
  out["jit_count_b"] = int(m.b.count.value)

  grads = nnx.grad(lambda m, x: m(x).sum())(m, jnp.ones((1, 2)))
  out["grad_paths"] = _paths(grads)
  out["grad_count_a"] = int(m.a.count.value)

  r = nnx.Rngs(0, dropout=1)
  r.params()
  r.params()
  r.dropout()
  out["rngs_default_count"] = int(r.default.count.value)
  out["rngs_dropout_count"] = int(r.dropout.count.value)
  out["rngs_state_paths"] = _paths(nnx.state(r))

  @nnx.jit
  def draw(r):
    return r.dropout()

  draw(r)
  draw(r)
  out["rngs_jit_dropout_count"] = int(r.dropout.count.value)

  out["iter_modules_paths"] = sorted(
    "/".join(map(str, p)) for p, node in nnx.iter_graph(m) if isinstance(node, nnx.Module)
  )
  return out

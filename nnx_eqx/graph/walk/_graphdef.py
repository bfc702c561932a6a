"""GraphDef: the hashable static structure of a graph, and its static values."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import jax
import numpy as np

from ._node_types import MAP, NODE, SEQ
from ._nodedefs import TreeNodeDef, node_views

ENGINE: dict[str, Any] = {}
"""``merge`` and ``split`` for the seed-era methods below. They are defined in
``_graph``, which builds on this module, and installed here by it."""


# --------------------------------------------------------------------------
# Static values and GraphDef
# --------------------------------------------------------------------------
_CONTAINERS = (list, tuple, dict, set, frozenset)


def _freeze(x: Any) -> Any:
  """A hashable stand-in for ``x``, equal for structurally equal values.

  Lists, tuples and dicts become one flat tuple in preorder, each container a
  ``(type name, length or keys)`` marker before its items, so that values
  nested at any depth are frozen, hashed and compared without recursion.
  """
  if not isinstance(x, _CONTAINERS):
    return _freeze_atom(x)
  out: list = []
  stack = [x]
  while stack:
    v = stack.pop()
    if isinstance(v, (list, tuple)):
      out.append((type(v).__name__, len(v)))
      stack.extend(reversed(v))
    elif isinstance(v, dict):
      out.append(("dict", tuple(v)))
      stack.extend(reversed(v.values()))
    elif isinstance(v, (set, frozenset)):  # of hashable (so shallow) elements
      out.append(("set", frozenset(map(_freeze, v))))
    else:
      out.append(_freeze_atom(v))
  return tuple(out)


def _freeze_atom(x: Any) -> Any:
  try:
    hash(x)
  except TypeError:
    return ("id", id(x))
  if isinstance(x, (np.ndarray, jax.Array)):
    return ("id", id(x))
  return x


class StaticValue:
  """A static value kept in a GraphDef; hashed and compared by content.

  Unhashable containers (lists, dicts) are compared structurally; other
  unhashable objects by identity.
  """

  __slots__ = ("value", "_frozen", "_hash")

  def __init__(self, value: Any):
    self.value = value
    self._frozen = _freeze(value)
    self._hash = hash(self._frozen)

  def __eq__(self, other):
    return self is other or (
      isinstance(other, StaticValue) and self._hash == other._hash and self._frozen == other._frozen
    )

  def __hash__(self):
    return self._hash

  def __repr__(self):
    return f"StaticValue({self.value!r})"

  def __reduce__(self):
    # rebuilt from the value: its hash and identity keys belong to one process
    return StaticValue, (self.value,)


# --------------------------------------------------------------------------
# Definition tuples as flat sequences: hashing, comparing and pickling a
# GraphDef of any depth without recursion.
# --------------------------------------------------------------------------
def flatten_defn(defn: tuple) -> tuple[list, list]:
  """``defn`` (nested tuples) as two flat lists in preorder: ``shape`` has the
  length of each tuple met, or -1 for an atom; ``atoms`` holds the atoms."""
  shape: list = []
  atoms: list = []
  stack = [defn]
  pop, push = stack.pop, stack.extend
  while stack:
    x = pop()
    if type(x) is tuple:
      shape.append(len(x))
      push(reversed(x))
    else:
      shape.append(-1)
      atoms.append(x)
  return shape, atoms


def unflatten_defn(shape: list, atoms: list) -> tuple:
  """Inverse of :func:`flatten_defn`."""
  next_atom = iter(atoms).__next__
  root: list = []
  stack: list = [(root, 1)]  # (items being collected, how many to collect)
  for n in shape:
    if n > 0:
      stack.append(([], n))
      continue
    item = next_atom() if n < 0 else ()
    while True:
      items, want = stack[-1]
      items.append(item)
      if len(items) < want:
        break
      stack.pop()
      if not stack:
        return items[0]
      item = tuple(items)
  raise AssertionError("truncated definition")


def map_defn(defn: tuple, fn: Callable[[tuple, Any], tuple]) -> tuple:
  """``defn`` with every definition that is not a node or container replaced by
  ``fn(definition, link)`` (``link``: its path, see ``_links``), called in walk
  order; iterative, so any depth, and O(1) per definition."""
  top = _map_frame(defn, None)
  if top is None:
    return fn(defn, None)
  stack = [top]
  while True:
    f = stack[-1]
    keyed, i = f[2], f[3]
    if i < len(keyed):
      f[3] = i + 1
      k, sub = keyed[i]
      link = (f[1], k)
      g = _map_frame(sub, link)
      if g is None:
        f[4].append(fn(sub, link))
      else:
        stack.append(g)
      continue
    stack.pop()
    d, _, keyed, _, subs = f
    out: tuple
    if d[0] == NODE:
      out = (NODE, d[1], d[2], tuple(zip([k for k, _ in keyed], subs)), d[4])
    elif d[0] == SEQ:
      out = (SEQ, d[1], tuple(subs))
    else:
      out = (MAP, d[1], tuple(zip([k for k, _ in keyed], subs)))
    if not stack:
      return out
    stack[-1][4].append(out)


def _map_frame(d: tuple, link: Any) -> list | None:
  """``[definition, link, (key, sub) pairs, next position, mapped subs]`` for a
  node or container definition, else None."""
  tag = d[0]
  if tag == NODE:
    return [d, link, d[3], 0, []]
  if tag == SEQ:
    return [d, link, list(enumerate(d[2])), 0, []]
  if tag == MAP:
    return [d, link, d[2], 0, []]
  return None


NATIVE_DEPTH = 100
"""Definitions nested at most this many nodes/containers deep are compared by
Python's own (recursive, fast) tuple comparison; deeper or of unknown depth,
through :func:`flatten_defn`."""


def _defn_hash(defn: tuple) -> int:
  # always flat: the hash must depend on the content only, whatever the depth
  shape, atoms = flatten_defn(defn)
  return hash((tuple(shape), tuple(atoms)))


def _defn_equal(a: tuple, b: tuple, depth: int | None) -> bool:
  if depth is None or depth > NATIVE_DEPTH:
    return flatten_defn(a) == flatten_defn(b)
  try:
    return a == b
  except RecursionError:  # called from deep in the stack already: compare flat
    return flatten_defn(a) == flatten_defn(b)


def _max_depth(a: int | None, b: int | None) -> int | None:
  return None if a is None or b is None else max(a, b)


def _graphdef_from_flat(shape, atoms, paths, n_nodes, tree, outer, depth=None) -> GraphDef:
  return GraphDef(unflatten_defn(shape, atoms), paths, n_nodes, tree, outer, depth)


def _var_metadata_def(md: dict) -> Any:
  return StaticValue(md) if md else ()


def _metadata_from_def(mdef: Any) -> dict:
  return dict(mdef.value) if isinstance(mdef, StaticValue) else {}


class GraphDef:
  """The static structure of a graph: node types, attribute keys, static
  attributes, Variable types and metadata, and which objects are shared.

  Hashable and equal across identical builds, so it can be a ``jax.jit``
  static argument. ``ModuleDef`` is the seed-era name of this class.

  Example:
    >>> import nnx_eqx as nnx
    >>> a = nnx.graphdef(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> b = nnx.graphdef(nnx.Linear(2, 3, rngs=nnx.Rngs(1)))
    >>> a == b and hash(a) == hash(b)
    True
  """

  __slots__ = (
    "defn",
    "paths",
    "n_nodes",
    "tree",
    "outer",
    "depth",
    "_h",
    "_builder",
    "_path_tree",
    "_tree_variant",
    "__weakref__",
  )

  def __init__(
    self,
    defn: tuple,
    paths: tuple,
    n_nodes: int,
    tree: bool = False,
    outer: tuple | None = None,
    depth: int | None = None,
  ):
    self.defn = defn
    self.paths = paths
    self.n_nodes = n_nodes
    self.tree = tree
    self.outer = outer  # per node, its index in an enclosing graph (see nnx.graphlib)
    self.depth = depth  # nesting of nodes/containers, when the maker knew it
    self._h: int | None = None  # the hash, computed on first use
    self._builder = None  # compiled by _walk.unflatten on first use
    self._path_tree: dict | None = None
    self._tree_variant: GraphDef | None = None

  @property
  def _hash(self) -> int:
    h = self._h
    if h is None:
      h = _defn_hash(self.defn)
      if self.tree or self.outer is not None:
        h = hash((h, self.tree, self.outer))
      self._h = h
    return h

  def __eq__(self, other):
    return self is other or (
      isinstance(other, GraphDef)
      and self._hash == other._hash
      and self.tree == other.tree
      and self.outer == other.outer
      and _defn_equal(self.defn, other.defn, _max_depth(self.depth, other.depth))
    )

  def __hash__(self):
    return self._hash

  def __reduce__(self):
    # flat, so that pickling does not recurse; compiled builders are not kept
    shape, atoms = flatten_defn(self.defn)
    args = (shape, atoms, self.paths, self.n_nodes, self.tree, self.outer, self.depth)
    return _graphdef_from_flat, args

  def __class_getitem__(cls, item: Any) -> types.GenericAlias:
    """``GraphDef[T]`` for annotations (T is the root's type)."""
    return types.GenericAlias(cls, item)

  def with_outer(self, outer: tuple | None) -> GraphDef:
    """A copy of this GraphDef recording, per node, its index in an enclosing
    graph (None where it has none); ``nnx.graphlib.unflatten`` uses them to
    update the enclosing graph's objects in place."""
    g = GraphDef(self.defn, self.paths, self.n_nodes, self.tree, outer, self.depth)
    g._builder = self._builder
    return g

  def as_tree(self) -> GraphDef:
    """This GraphDef as made in tree mode (``graph=False``); built once.

    Example:
      >>> import nnx_eqx as nnx
      >>> g = nnx.graphdef(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))
      >>> type(g.as_tree().nodes[0]).__name__
      'TreeNodeDef'
    """
    if self.tree:
      return self
    if self._tree_variant is None:
      t = GraphDef(self.defn, self.paths, self.n_nodes, tree=True, depth=self.depth)
      t._builder = self._builder
      self._tree_variant = t
    return self._tree_variant

  @property
  def nodes(self) -> list:
    """Records of the graph's nodes in walk order: ``NodeDef``, ``VariableDef``
    and ``NodeRef`` (see ``nnx.graphlib``); one ``TreeNodeDef`` in tree mode.

    Example:
      >>> import nnx_eqx as nnx
      >>> g = nnx.graphdef(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))
      >>> [type(n).__name__ for n in g.nodes]
      ['NodeDef', 'VariableDef', 'VariableDef']
    """
    if self.tree:
      root = self.defn[1] if len(self.defn) > 1 and isinstance(self.defn[1], type) else None
      return [TreeNodeDef(root or type(None), tuple((p, i) for i, p in enumerate(self.paths)))]
    return node_views(self.defn, _metadata_from_def)

  @property
  def num_leaves(self) -> int:
    """How many leaves (distinct Variables and raw arrays) the graph has."""
    return len(self.paths)

  def path_tree(self) -> dict:
    """The leaf paths as a nested dict: each key maps to a sub-dict, or, at
    the end of a path, to the leaf's index (built once).

    Example:
      >>> import nnx_eqx as nnx
      >>> nnx.graphdef(nnx.Linear(2, 3, rngs=nnx.Rngs(0))).path_tree()
      {'bias': 0, 'kernel': 1}
    """
    if self._path_tree is None:
      root: dict = {}
      for i, path in enumerate(self.paths):
        if not path:  # a bare Variable as the root has no key to look up
          continue
        d = root
        for k in path[:-1]:
          d = d.setdefault(k, {})
        d[path[-1]] = i
      self._path_tree = root
    return self._path_tree

  # Seed-era API -----------------------------------------------------------
  def merge(self, *states: Any) -> Any:
    """Builds a new graph from this GraphDef and states (see ``nnx.merge``)."""
    return ENGINE["merge"](self, *states)

  def apply(self, *states: Any) -> ApplyCaller:
    """Functional call, as flax.nnx: ``graphdef.apply(state)(x)`` or
    ``graphdef.apply(state).submodule.method(x)`` returns
    ``(out, (graphdef, new_state))`` and leaves the inputs untouched.

    A moduledef made by the seed-era ``Module.partition`` (a
    :class:`SeedGraphDef`) keeps the seeds' order ``(out, (new_state,
    moduledef))`` instead; flax code never gets one (``nnx.split`` and
    ``nnx.graphdef`` give plain GraphDefs).

    Raises:
      StateMismatchError: if the states do not fit the GraphDef.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> graphdef, state = nnx.split(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
      >>> y, (graphdef, state) = graphdef.apply(state)(jnp.ones((1, 2)))
      >>> y.shape, type(graphdef).__name__
      ((1, 3), 'GraphDef')
    """
    return ApplyCaller(self, states, (), graphdef_first=True)

  def as_seed(self) -> SeedGraphDef:
    """This GraphDef as a seed-era moduledef (whose ``apply`` returns
    ``(out, (state, moduledef))``)."""
    return _retype(self, SeedGraphDef)


def _retype(g: GraphDef, cls: type) -> Any:
  if type(g) is cls:
    return g
  new: Any = object.__new__(cls)
  for name in GraphDef.__slots__:
    if name != "__weakref__":
      object.__setattr__(new, name, getattr(g, name))
  return new


class SeedGraphDef(GraphDef):
  """The moduledef of the seed-era API (``Module.partition``, ``Pure``): equal
  to the GraphDef of the same graph, but ``apply`` keeps the seeds' result
  order ``(out, (state, moduledef))``.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> state, moduledef = nnx.Linear(2, 3, rngs=nnx.Rngs(0)).partition()
    >>> y, (state, moduledef) = moduledef.apply(state)(jnp.ones((1, 2)))
    >>> y.shape, type(moduledef).__name__
    ((1, 3), 'SeedGraphDef')
  """

  __slots__ = ()

  def apply(self, *states: Any) -> ApplyCaller:
    """Seed-era functional call: ``moduledef.apply(state)(x)`` returns
    ``(out, (new_state, moduledef))``.

    Raises:
      StateMismatchError: if the states do not fit the GraphDef.

    Example:
      >>> import jax.numpy as jnp, nnx_eqx as nnx
      >>> (params, rest), moduledef = nnx.Linear(2, 3, rngs=nnx.Rngs(0)).partition(
      ...   nnx.Param, ...)
      >>> y, (state, moduledef) = moduledef.apply(params, rest)(jnp.ones((1, 2)))
      >>> sorted(state)
      ['bias', 'kernel']
    """
    return ApplyCaller(self, states, ())

  def as_plain(self) -> GraphDef:
    """This moduledef as a plain GraphDef (flax's ``apply`` order)."""
    return _retype(self, GraphDef)

  def __reduce__(self):
    fn, args = super().__reduce__()
    return _seed_of, (fn, args)


def _seed_of(fn: Any, args: tuple) -> SeedGraphDef:
  return fn(*args).as_seed()


class ApplyCaller:
  """Accumulates attribute/item accesses, then calls on a freshly merged graph.

  Returns ``(out, (state, graphdef))`` (the seeds' order), or with
  ``graphdef_first`` ``(out, (graphdef, state))`` (``nnx.call``'s).
  """

  __slots__ = ("_graphdef", "_states", "_accessors", "_graphdef_first")

  def __init__(self, graphdef, states, accessors, graphdef_first: bool = False):
    self._graphdef = graphdef
    self._states = states
    self._accessors = accessors
    self._graphdef_first = graphdef_first

  def _with(self, accessor) -> ApplyCaller:
    return ApplyCaller(
      self._graphdef, self._states, self._accessors + (accessor,), self._graphdef_first
    )

  def __getattr__(self, name):
    return self._with((True, name))

  def __getitem__(self, key):
    return self._with((False, key))

  def __call__(self, *args, **kwargs):
    node = ENGINE["merge"](self._graphdef, *self._states)
    target = node
    for is_attr, k in self._accessors:
      target = getattr(target, k) if is_attr else target[k]
    out = target(*args, **kwargs)
    graphdef, state = ENGINE["split"](node)
    if self._graphdef_first:
      return out, (graphdef, state)
    return out, (state, graphdef.as_seed())


def call(graph_state: tuple, /) -> ApplyCaller:
  """Calls a method of the graph in ``(graphdef, state)`` functionally.

  ``nnx.call((graphdef, state)).method(*args)`` merges a fresh graph, calls
  the method (attribute and item accesses may be chained before the call),
  splits again and returns ``(out, (graphdef, new_state))``; the input is
  untouched, so this can run inside ``jax.jit``.

  Raises:
    StateMismatchError: if the state does not fit the GraphDef.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> y, (graphdef, state) = nnx.call(nnx.split(nnx.Linear(2, 3, rngs=nnx.Rngs(0))))(
    ...   jnp.ones((1, 2)))
    >>> y.shape
    (1, 3)
  """
  graphdef, *states = graph_state
  return ApplyCaller(graphdef, tuple(states), (), graphdef_first=True)


# A GraphDef is a pytree without leaves (static), as in the seeds and flax.nnx, so it
# can be passed to and returned from JAX transforms like a State.
for _cls in (GraphDef, SeedGraphDef):
  jax.tree_util.register_pytree_node(_cls, lambda g: ((), g), lambda g, _: g)

_Node = TypeVar("_Node")
if TYPE_CHECKING:
  PureState = tuple
else:
  PureState = tuple[GraphDef[_Node], Any]
"""``(graphdef, state)`` as ``nnx.split`` returns it; ``PureState[T]`` for a graph of type T."""

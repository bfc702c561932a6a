"""The seeds' ``Node`` and ``Static`` containers and node-type registration.

In the original NNX (0.0.7), an attribute whose value was a *node* (an array,
a ``Node``/``Variable`` container, a ``Pytree``, or an instance of a type given
to ``register_node_type``) went into the State; anything else was static. The
same holds here, on the graph engine of nnx_eqx:

* ``nnx.Node(value)`` is a :class:`~nnx_eqx.Variable` subclass: a graph leaf
  whose value (any pytree, e.g. ``[4, 5]``) is stored in the State.
* ``nnx.Static(value)`` keeps a value static, in the GraphDef, even when it is
  an array that would otherwise be a leaf.
* ``nnx.register_node_type(T)`` makes instances of ``T`` State leaves, like raw
  arrays (it registers ``T`` as a graph leaf type).
* ``nnx.is_node_leaf(x)`` is what the seeds' ``is_node(x)`` asked: would ``x``,
  held by a Module attribute, be stored in the State? ``nnx.is_node`` keeps
  its nnx_eqx meaning (identity-tracked objects: Variables and graph nodes).
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

import jax
import numpy as np

from ..graph._errors import GraphStructureError, ImmutableError
from ..graph.api._repr import _leaf
from ..graph.variables._variables import Variable
from ..graph.walk import _node_types
from ..module._pytree import STATIC_TAG

A = TypeVar("A")


class Node(Variable[A]):
  """A Variable that marks any value (an array, a list, a pytree) as a graph leaf.

  It is the seeds' ``nnx.Node``: the value goes into the State rather than the
  GraphDef. Unlike the seeds, ``Param`` and the other Variable types are not
  subclasses of ``Node``; all of them are subclasses of ``Variable``.

  Example:
    >>> import nnx_eqx as nnx
    >>> m = nnx.Module()
    >>> m.node = nnx.Node([4, 5])
    >>> nnx.state(m).node
    Node(value=[4, 5])
  """


class Static(Generic[A]):
  """Keeps ``value`` static (in the GraphDef, or a pytree's aux data).

  A raw array stored on a Module is a leaf of its State; wrapped in ``Static``
  it becomes part of the GraphDef instead, so ``jax.jit`` treats it as a
  compile-time constant. ``Static`` is immutable, hashable and compared by
  content (arrays by shape, dtype and bytes), so equal static values give equal
  GraphDefs and ``jax.jit`` caches hit. As a JAX pytree it has no leaves.

  Args:
    value: any value; arrays must be concrete (not traced).

  Raises:
    GraphStructureError: if ``value`` is a Variable or a graph node (Module),
      which cannot be static.

  Example:
    >>> import jax, numpy as np, nnx_eqx as nnx
    >>> m = nnx.Module()
    >>> m.mask = nnx.Static(np.array([1.0, 0.0]))
    >>> len(nnx.state(m)), m.mask.value.tolist()
    (0, [1.0, 0.0])
    >>> jax.tree.leaves(nnx.Static(np.ones(3)))
    []
  """

  __slots__ = ("_value", "_hash")
  _value: A
  _hash: int | None

  def __class_getitem__(cls, item):
    """``nnx.Static[T]`` in a class body annotates an attribute as static (flax 0.12)."""
    return Annotated[item, STATIC_TAG]

  def __init__(self, value: A):
    if isinstance(value, Static):
      value = value.value
    if isinstance(value, Variable) or _node_types.is_graph_node(value):
      raise GraphStructureError(
        f"nnx.Static cannot hold a {type(value).__name__}: Variables and Modules are"
        " graph nodes whose state must stay in the State. Fix: wrap the raw value"
        " (`nnx.Static(variable.value)`), or store the object directly."
      )
    object.__setattr__(self, "_value", value)
    object.__setattr__(self, "_hash", None)

  @property
  def value(self) -> A:
    """The wrapped value."""
    return self._value

  def __setattr__(self, name, value):
    raise ImmutableError(
      f"nnx.Static is immutable; cannot set {name!r}. Fix: build a new one with"
      " `nnx.Static(new_value)`."
    )

  def _key(self):
    v = self._value
    if isinstance(v, (np.ndarray, jax.Array, np.generic)):
      try:
        a = np.asarray(v)
      except jax.errors.TracerArrayConversionError:
        raise GraphStructureError(
          "nnx.Static holds a traced array, which cannot be static. Fix: create the"
          " Static value outside `jax.jit`/`jax.grad`, or store the array as a node."
        ) from None
      return ("array", a.shape, a.dtype.str, a.tobytes())
    try:
      hash(v)
    except TypeError:
      return ("id", id(v))
    return ("value", v)

  def __hash__(self) -> int:
    h = self._hash
    if h is None:
      h = hash((Static, self._key()))
      object.__setattr__(self, "_hash", h)
    return h

  def __eq__(self, other) -> bool:
    if self is other:
      return True
    if not isinstance(other, Static) or hash(self) != hash(other):
      return False
    return self._key() == other._key()

  def __repr__(self) -> str:
    return f"Static({_leaf(self._value)})"

  def __reduce__(self):
    return (Static, (self._value,))


jax.tree_util.register_pytree_node(Static, lambda s: ((), s), lambda s, _: s)


def register_node_type(node_type: type) -> None:
  """Makes instances of ``node_type`` nodes: State leaves, like raw arrays.

  The seeds' ``nnx.register_node_type``. An attribute holding an instance is
  stored in the State (not in the GraphDef), is matched by filters as itself,
  and counts as a child of :class:`nnx.legacy.Pytree`. To pass such a State through
  ``jax.jit`` the type must also be a JAX pytree (or an array).

  Args:
    node_type: the class to register (its subclasses are included).

  Example:
    >>> import jax, nnx_eqx as nnx
    >>> class Box:
    ...   def __init__(self, x): self.x = x
    >>> nnx.register_node_type(Box)
    >>> m = nnx.Module(); m.box = Box(1)
    >>> nnx.is_node_leaf(m.box), list(nnx.state(m))
    (True, ['box'])
  """
  _node_types.register_leaf_type(node_type)


def is_node_leaf(x: Any) -> bool:
  """True if ``x``, held by a Module attribute, is stored in the State.

  That is the seeds' ``nnx.is_node``: Variables (``Node``, ``Param``, ...),
  JAX and NumPy arrays, ``nnx.legacy.Pytree`` and ``nnx.Pure`` objects, and instances
  of types given to :func:`register_node_type`. Modules are graph nodes, not
  leaves (see ``nnx.is_graph_node``); ``nnx.is_node`` is True for Variables and
  graph nodes, the objects the graph engine tracks by identity.

  Example:
    >>> import jax.numpy as jnp, nnx_eqx as nnx
    >>> nnx.is_node_leaf(jnp.ones(2)), nnx.is_node_leaf(nnx.Node(1)), nnx.is_node_leaf(3)
    (True, True, False)
  """
  return isinstance(x, Variable) or isinstance(x, _node_types.LEAF_TYPES)

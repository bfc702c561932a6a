"""Errors raised by the lifted transforms (vmap, scan, remat, control flow).

Each derives from :class:`nnx.NnxError` and the builtin a user would expect.
Messages name the argument or state path, what was expected and found, and
the fix.
"""

from __future__ import annotations

from ..graph._errors import NnxError


class AxisSpecError(NnxError, ValueError):
  """``in_axes``/``out_axes`` do not fit the arguments or outputs (not a
  prefix, ``Carry`` misplaced, a broadcast output, an axis for a non-array)."""


class AxisRankError(NnxError, ValueError):
  """An axis to map or scan over is not an axis of the array (axis >= rank)."""


class AxisSizeError(NnxError, ValueError):
  """Mapped arrays disagree on the size of the mapped axis."""


class ScanLengthError(AxisSizeError):
  """Scanned arrays disagree with each other or with ``length``, or no length
  can be inferred."""


class CarryMismatchError(NnxError, TypeError):
  """A scan/loop carry changed its structure, shape or dtype across a step."""


class CarryIdentityError(CarryMismatchError, ValueError):
  """A scan/loop body returned, as the carry, a Module or Variable other than
  the one passed in (a new object instead of the same one updated)."""


class CapturedNodeError(NnxError, ValueError):
  """A lifted function returned a Module or Variable it captured by closure
  (created outside the transform and not passed in)."""


class BroadcastUpdateError(NnxError, ValueError):
  """State that is broadcast (axis ``None``) was updated with a value that
  depends on the mapped axis."""


class LiftedStructureError(NnxError, ValueError):
  """A transform body changed the graph structure where that cannot be
  propagated (e.g. a ``cond`` branch adding an attribute)."""


class BoundMethodError(NnxError, ValueError):
  """A transform was given a method already bound to a Module instance; the
  instance would be captured by closure instead of being lifted."""


class UnsupportedModeError(NnxError, ValueError):
  """A transform was asked for a ``graph=``/``graph_updates=`` mode it cannot
  honour (e.g. ``nnx.make_jaxpr`` with graph updates)."""


class InconsistentAliasingError(NnxError, ValueError):
  """One object (a Variable shared by two Modules, or passed twice) is given
  different prefixes (axes, shardings) by the paths that reach it."""

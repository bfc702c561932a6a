"""Damaged checkpoint files: the error class, and finding which file a read error is about.

orbax, tensorstore, JSON and numpy each report a damaged file their own way
(``DATA_LOSS: ... local file "/ckpt/d/1f..."``, a ``JSONDecodeError`` with no
file name, ``EOF: reading array data``). Nothing here parses orbax's format:
the failing file is the first path inside the checkpoint that the error's
message (or a message of its causes) names, else the path that the innermost
frame of its traceback was reading.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Any

from ..graph._errors import NnxError

# What a damaged file makes orbax, tensorstore, json and numpy raise
# (JSONDecodeError and UnicodeDecodeError are ValueErrors).
READ_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, EOFError)

_FIX = (
  "Fix: save the checkpoint again from the model in memory, or restore an earlier"
  " checkpoint (e.g. the previous step's directory); a copy of the files that was cut short"
  " (disk full, interrupted copy) must be copied again."
)


class CheckpointCorruptError(NnxError, ValueError):
  """A checkpoint exists but one of its files cannot be read: it is truncated,
  empty (zero-length), garbled or missing. The message names the file.

  Raised by ``nnx.checkpoint.restore`` (orbax checkpoints) and
  ``nnx.tree_deserialise_leaves`` (Equinox-format files); the restore target is
  left unchanged. A directory that holds no checkpoint at all raises
  ``CheckpointNotFoundError`` instead.

  Fix: save again, or restore an earlier checkpoint.

  Example:
    >>> import io, nnx_eqx as nnx
    >>> try:
    ...   nnx.tree_deserialise_leaves(io.BytesIO(b""), nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    ... except nnx.CheckpointCorruptError as e:
    ...   print(str(e).split(". ")[0])
    nnx.tree_deserialise_leaves: the BytesIO file object is damaged: it is empty
  """


def _chain(error: BaseException):
  """``error`` and its causes, as Python prints them (``from None`` ends the chain)."""
  seen: set[int] = set()
  e: BaseException | None = error
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    yield e
    e = (
      e.__cause__ if e.__cause__ is not None else None if e.__suppress_context__ else e.__context__
    )


def _under(value: Any, root: pathlib.Path) -> pathlib.Path | None:
  if not isinstance(value, (str, os.PathLike)):
    return None
  try:
    p = pathlib.Path(os.fspath(value)).absolute()
  except (TypeError, ValueError):
    return None
  return p if p != root and root in p.parents else None


def _frames_innermost_first(error: BaseException) -> list:
  frames = []
  tb = error.__traceback__
  while tb is not None:
    frames.append(tb.tb_frame)
    tb = tb.tb_next
  return frames[::-1]


def culprit(error: BaseException, root: pathlib.Path) -> pathlib.Path | None:
  """The file inside the directory ``root`` that ``error`` is about, or None.

  Looks first for a path under ``root`` named in the messages of ``error`` and
  its causes (tensorstore names the files it fails on), then, for a JSON or
  text decoding error or a missing file, for one held by a local variable of
  the innermost frame of its traceback that holds one (orbax's readers of
  JSON files keep the path they read there).
  """
  pattern = re.compile(re.escape(str(root)) + r"/[^\s\"'\\,;:\]\)]+")
  for e in _chain(error):
    for match in pattern.findall(str(e)):
      if (found := _under(match.rstrip("."), root)) is not None:
        return found
  for e in _chain(error):
    if not isinstance(e, (json.JSONDecodeError, UnicodeDecodeError, FileNotFoundError)):
      continue  # tensorstore's errors name their files; others are not about one file
    for frame in _frames_innermost_first(e):
      for value in reversed(list(frame.f_locals.values())):
        if (found := _under(value, root)) is not None:
          return found
  return None


def innermost(error: BaseException) -> BaseException:
  """The last exception of ``error``'s chain of causes (the original failure)."""
  return list(_chain(error))[-1]


# tensorstore's status codes for a file it could not read or decode.
_DAMAGE_STATUS = ("DATA_LOSS:", "OUT_OF_RANGE:", "NOT_FOUND:", "FAILED_PRECONDITION:")


def is_damage(error: BaseException) -> bool:
  """Whether a read error from orbax comes from a damaged or missing file (and not,
  say, from shardings that do not fit the devices)."""
  inner = innermost(error)
  if isinstance(inner, (json.JSONDecodeError, UnicodeDecodeError, EOFError, FileNotFoundError)):
    return True
  return str(inner).startswith(_DAMAGE_STATUS)


def summary(error: BaseException) -> str:
  """``Type: first line of the message`` of the innermost cause, at most 300 characters."""
  inner = innermost(error)
  text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
  text = text[:300] + ("..." if len(text) > 300 else "")
  return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def corrupt_checkpoint(root: pathlib.Path, error: BaseException) -> CheckpointCorruptError:
  """The error for an orbax checkpoint at ``root`` that failed to read with ``error``."""
  found = culprit(error, root)
  if found is None:
    what = "one of its files is missing, truncated, empty or garbled"
  else:
    state = "is missing" if not found.exists() else "is truncated, empty or garbled"
    what = f"its file {found.relative_to(root)} ({found}) {state}"
  return CheckpointCorruptError(
    f"restore: the checkpoint at {root} is damaged: {what} (orbax says {summary(error)})."
    f" The target was not changed. {_FIX}"
  )


def corrupt_file(name: str, error: BaseException | None, why: str) -> CheckpointCorruptError:
  """The error for a damaged single-file checkpoint (an Equinox-format file)."""
  said = f" ({summary(error)})" if error is not None else ""
  return CheckpointCorruptError(
    f"{name} is damaged: {why}{said}. The target was not changed. {_FIX}"
  )

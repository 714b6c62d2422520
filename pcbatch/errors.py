"""Error classes. Every user-facing error names where in the user's code it arose."""

from __future__ import annotations

import enum

__all__ = [
    "AutobatchSyntaxError",
    "BatchSizeError",
    "ConditionShapeError",
    "LaneStatus",
    "NarrowingWarning",
    "NestedBatchedCallError",
    "PcbatchError",
    "StackOverflowError",
    "StaticValueError",
    "TypeInferenceError",
    "UncheckedFailureError",
    "VerificationError",
]


class PcbatchError(Exception):
    """Base class of pcbatch's own errors."""

    # Exception's own constructor, not ValueError's or TypeError's: an error raised
    # while a user's tf.function traces keeps its type (AutoGraph re-raises only
    # exceptions built that way as themselves, and others as its StagingError).
    __init__ = Exception.__init__


class VerificationError(PcbatchError):
    """The IR is malformed (a compiler bug, or a hand-built program's mistake)."""


class TypeInferenceError(PcbatchError, TypeError):
    """A variable's type could not be determined, or two definitions disagree."""


class BatchSizeError(PcbatchError, ValueError):
    """Arguments disagree on the batch size."""


class ConditionShapeError(PcbatchError, ValueError):
    """An ``if`` or ``while`` condition holds several values per example."""


class SharedArrayError(PcbatchError, TypeError):
    """A name bound to another name's array (``z = y``, ``w = buf[1:]``) where one of
    them is changed in place (``y += 1``, ``buf[0] = 5``): in Python both would see the
    change, in a batch each name holds its own value. Raised while types are inferred,
    naming the assignment's line."""


class StackOverflowError(PcbatchError, ValueError):
    """Recursion went deeper than ``max_stack_depth``.

    Attributes:
      function: the function whose recursion overflowed.
      max_stack_depth: the depth that was exceeded.
      suggested_depth: a depth measured to suffice, or None if not measured.
    """

    def __init__(self, message, function=None, max_stack_depth=None, suggested_depth=None):
        super().__init__(message)
        self.function = function
        self.max_stack_depth = max_stack_depth
        self.suggested_depth = suggested_depth


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)`` (Python 3.11+); on 3.10, which has no notes, the note is
    appended to a one-string message so that the user still sees where it happened."""
    if hasattr(error, "add_note"):
        error.add_note(note)
        return
    error.__notes__ = [*getattr(error, "__notes__", []), note]
    if len(error.args) == 1 and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}",)


class LaneStatus(enum.IntEnum):
    """What ``fn(..., return_status=True)`` reports per batch member (an int array)."""

    OK = 0  #: finished; its result is right
    STACK_OVERFLOW = 1  #: its recursion exceeded max_stack_depth; its result is a fill value
    STEP_LIMIT = 2  #: still running when max_steps ran out; its result is a fill value
    ERROR = 3  #: failed a run-time check (range() step 0, an unbound local); a fill value


class UncheckedFailureError(PcbatchError, RuntimeError):
    """A run that may fail (a stack overflow, a step limit) was called where its failure
    could neither raise nor be reported: inside a ``tf.function(jit_compile=True)``
    without ``return_status=True`` (docs/semantics/failures.md)."""


class NarrowingWarning(UserWarning):
    """A 64-bit argument runs narrowed to 32 bits (JAX with ``jax_enable_x64`` off)."""


class NonFiniteToIntError(PcbatchError, ValueError, OverflowError):
    """``int(x)`` or ``round(x)`` of nan (Python: ValueError) or of an infinity (Python:
    OverflowError), found after a compiled run, which does not tell which: both."""


def lane_check_failed(error: Exception) -> Exception:
    """Marks ``error`` as a run-time check's failure (a zero range() step, an unbound
    local): a per-member `LaneStatus.ERROR` with ``return_status=True``."""
    error.pcbatch_lane_check = True
    return error


def is_lane_check_failure(error: BaseException) -> bool:
    return getattr(error, "pcbatch_lane_check", False) is True


def where(loc) -> str:
    """`` at file:line in fn`` for a SourceLoc, or an empty string."""
    return f" at {loc}" if loc is not None else ""


class AutobatchSyntaxError(PcbatchError, SyntaxError):
    """The function uses Python that pcbatch cannot batch.

    Raised before anything runs, with the user's filename, line, column and
    source text, so Python's traceback draws a caret under the offending code.
    """

    def __init__(self, message: str, filename: str, lineno: int, offset: int, text: str):
        SyntaxError.__init__(self, message, (filename, lineno, offset, text))


class StaticValueError(AutobatchSyntaxError, TypeError):
    """A None or text argument (fixed for the call: `pcbatch.frontend.statics`) used as a
    per-example value (``x + tol``, ``return method``): Python raises TypeError on such
    code per example; pcbatch refuses it at the line before anything runs."""


class NestedBatchedCallError(PcbatchError, RuntimeError):
    """A batched function was called while a batched run executes: from a plain helper
    (or a lambda or comprehension) that a running program's primitive calls."""

"""Which batched run this thread is executing.

A batched run's primitives call plain Python (the user's helpers, lambdas and
comprehensions) on the whole batch: on NumPy with the rows of the threads at a
block, on JAX and TensorFlow with tracers. A batched function called from there
would start a run of its own on those values, which is not the per-example call
the user wrote (wrong values on NumPy, confusing errors from tracers), so
`BatchedFunction.__call__` asks `current` first and refuses.
"""

from __future__ import annotations

import contextlib
import threading

_state = threading.local()


def current() -> tuple | None:
    """(name, Context) of the batched function whose run this thread is inside, or None."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def inside(function: tuple):
    """Marks this thread as running ``function``, (name, Context), compile included."""
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(function)
    try:
        yield
    finally:
        stack.pop()


@contextlib.contextmanager
def outside():
    """Host code called from a running program (a host callback) is outside the run."""
    saved = getattr(_state, "stack", None)
    _state.stack = []
    try:
        yield
    finally:
        _state.stack = saved

"""Helpers that the frontend's compiled primitives call, written for one example.

The frontend's primitives are per-example functions (vectorized by the
backend), so Python's ``not``, ``and``, ``or`` and ``x if c else y`` on values
become these NumPy forms, and a branch condition becomes one bool per example.
"""

from __future__ import annotations

import operator

import numpy as np

from pcbatch.errors import ConditionShapeError


def truthy(x):
    """Normalizes a value to one bool, for use as an ``if``/``while`` condition.

    A per-example value must have only size-1 dimensions (as ``bool(array)``
    requires in Python); it becomes a 0-d bool. Works on plain values and, in
    a batched run, on each example's value.
    """
    shape = np.shape(x)
    _check_condition_shape(shape)
    if shape:
        x = x.reshape(())
    return x.astype(bool) if hasattr(x, "astype") else np.bool_(x)


def _check_condition_shape(shape: tuple) -> None:
    if any(d != 1 for d in shape):
        raise ConditionShapeError(
            f"a condition must be a single value per example, but it has shape {shape}; "
            "reduce it with np.all(...) or np.any(...)"
        )


def _truthy_for_backend(backend):
    """`truthy` over a whole batch on a staged backend (None elsewhere): a reshape and a
    cast, where mapping the one-example form over the batch costs TensorFlow a
    ``tf.vectorized_map`` (graph building) for every condition of the program."""
    if not getattr(backend, "staged", False):
        return None

    def batched(x):
        shape = np.shape(x)
        _check_condition_shape(shape[1:])
        return np.reshape(x, shape[:1]).astype(bool)

    return backend.adapt(batched)


truthy.for_backend = _truthy_for_backend


def python_int(x):
    """``x`` as the Python int that ``range`` gives per example (weak, NEP 50).

    On one example: ``operator.index(x)``. Batched: the batch as the default int
    dtype, marked weak (`pcbatch.backends.weak`), so ``uint8_x + i`` stays uint8.
    """
    from pcbatch.backends import weak

    if isinstance(x, (int, np.integer)) or (isinstance(x, np.ndarray) and x.ndim == 0):
        return operator.index(x)
    if np.dtype(x.dtype).kind not in "biu":  # as Python's range: no floats
        raise TypeError(f"range() arguments must be integers, not {np.dtype(x.dtype).name}")
    return weak.mark(x.astype(int))


def range_next(counter, step):
    """The next value of a ``range`` counter: Python int arithmetic (never wraps)."""
    return python_int(counter) + python_int(step)


python_int.weak_results = True  # always a Python int per example (type inference)
range_next.weak_results = True


def select(condition, if_true, if_false):
    """``if_true if condition else if_false`` with both sides already evaluated.

    Between two Python scalars (weak values, NEP 50) the result is weak too, as each
    example's is: ``(1 if c else 2.5) * float32_x`` stays float32.
    """
    from pcbatch.backends import weak

    if not (_is_weak(if_true) and _is_weak(if_false)):
        return np.where(truthy(condition), if_true, if_false)
    if isinstance(condition, (bool, np.bool_, np.ndarray, np.generic)):  # one example
        return if_true if truthy(condition) else if_false
    return weak.mark(np.where(truthy(condition), if_true, if_false))


def _is_weak(x) -> bool:
    from pcbatch.backends import weak

    return weak.is_marked(x) or type(x) in (bool, int, float, complex)


def logical_not(x):
    return np.logical_not(truthy(x))


def logical_and(left, right):
    """``left and right`` with both sides already evaluated."""
    return select(left, right, left)


def logical_or(left, right):
    return select(left, left, right)


def sync() -> None:
    """Asks the scheduler to gather threads here before running what follows.

    Written as a statement, ``pcbatch.sync()``, inside a batched function: the
    compiler starts a new block at that point, and the VM holds back running it
    while threads elsewhere can still reach it (see ``pcbatch/vm/policy.py``).
    Results are the same with or without it. Called as a plain function (in
    plain Python or ``dry_run``) it does nothing.
    """
    return None


NAMESPACE = {
    "__pcb_truthy": truthy,
    "__pcb_select": select,
    "__pcb_not": logical_not,
    "__pcb_and": logical_and,
    "__pcb_or": logical_or,
}

"""Helpers that compiled primitives call: truthiness and per-example selection.

Every value a primitive sees carries a leading batch dimension, so Python's
``not``, ``and``, ``or`` and ``x if c else y`` become elementwise selections
along that dimension.
"""

from __future__ import annotations

import numpy as np


def truthy(x):
    """Normalizes a condition to one bool per batch member (shape ``[batch]``).

    Python scalars become 0-d bools. A batched value whose per-example shape
    has only size-1 dimensions is squeezed to ``[batch]``; a larger per-example
    shape is ambiguous (as ``bool(array)`` is in Python) and raises.
    """
    if isinstance(x, (bool, int, float, np.bool_, np.number)):
        return np.bool_(x)
    array = np.asarray(x)
    if array.ndim <= 1:
        return array.astype(bool) if array.dtype != np.bool_ else array
    if any(d != 1 for d in array.shape[1:]):
        raise ValueError(
            f"a condition must be one value per example, but it has per-example shape "
            f"{array.shape[1:]}; reduce it with np.all(..., axis=-1) or np.any(..., axis=-1)"
        )
    return array.reshape(array.shape[0]).astype(bool)


def select(condition, if_true, if_false):
    """``if_true if condition else if_false``, per batch member."""
    cond = truthy(condition)
    if_true, if_false = np.asarray(if_true), np.asarray(if_false)
    rank = max(if_true.ndim, if_false.ndim)
    if cond.ndim == 1 and rank > 1:
        cond = cond.reshape(cond.shape + (1,) * (rank - 1))
    return np.where(cond, if_true, if_false)


def logical_not(x):
    return np.logical_not(truthy(x))


def logical_and(left, right):
    """``left and right``, per batch member, with both sides already evaluated."""
    return select(left, right, left)


def logical_or(left, right):
    return select(left, left, right)


NAMESPACE = {
    "__pcb_truthy": truthy,
    "__pcb_select": select,
    "__pcb_not": logical_not,
    "__pcb_and": logical_and,
    "__pcb_or": logical_or,
}

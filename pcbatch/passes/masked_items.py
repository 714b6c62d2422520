"""Assignment through a boolean mask (``w[w < 0] = 0.0``), as NumPy runs it per example.

NumPy writes ``value`` into the items where the example's mask is True: a mask of the
array's shape (or of its leading axes, choosing rows) and a value that broadcasts to one
item (a number, or a row for a mask of rows) write what ``np.where(mask, value, w)``
gives, which every backend runs batched. Type inference checks such an assignment
(`check`) and puts that ``where`` in its place (`replaced`); the value is converted into
the array's dtype as any item is (`item_values.item_value`: a Python int the dtype cannot
hold is NumPy 2's OverflowError). A value of several items, one per True (``w[m] =
u[m]``, as many as the example's mask selects), is refused at the line. A slice with
per-example bounds (``w[:n] = 0.0``) arrives here as its mask (`runtime.slice_mask`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcbatch.errors import TypeInferenceError
from pcbatch.ir.nodes import PrimOp
from pcbatch.ir.setitem import SetItem
from pcbatch.ir.types import Type, is_pattern_node
from pcbatch.passes import item_values


def is_masked(op, index_types) -> bool:
    """Whether ``op`` assigns through one boolean index (its types ``index_types``)."""
    if not (isinstance(op, PrimOp) and isinstance(op.function, SetItem)):
        return False
    if op.function.index != (None,) or len(index_types) != 1 or index_types[0] is None:
        return False
    mask = index_types[0].tensors
    return not is_pattern_node(mask) and np.dtype(mask.dtype).kind == "b"


def check(op: PrimOp, target: Type, value: Type, mask: Type) -> None:
    """The mask covers the array's leading axes and the value broadcasts to one item."""
    where = f" at {op.loc}" if op.loc else ""
    if is_pattern_node(target.tensors) or is_pattern_node(value.tensors):
        return  # a tuple: `SetItem` raises Python's TypeError
    shape, covered = tuple(target.tensors.shape), tuple(mask.tensors.shape)
    if shape[: len(covered)] != covered:
        raise TypeInferenceError(
            f"item assignment{where}: a boolean index of shape {covered} does not match the "
            f"array's shape {shape} (NumPy's IndexError): the mask must have the array's "
            "shape, or its leading axes' shape"
        )
    item, given = shape[len(covered):], tuple(value.tensors.shape)
    if op.function.augmented:  # w[m] += x: the whole array combined (`AugmentedItem`)
        item = shape
    try:
        fits = np.broadcast_shapes(given, item) == item
    except ValueError:
        fits = False
    if not fits:
        raise TypeInferenceError(
            f"item assignment{where}: through a boolean mask, the value must be one number "
            f"(or one item, shape {item}) that every selected place gets, not shape "
            f"{given}: a value per True (w[m] = u[m], w[m] += x) differs in length between "
            "examples. Write w = np.where(m, u, w), or w = np.where(m, w + x, w)"
        )


def masked_assign(target, value, mask):
    """One example's ``target[mask] = value``."""
    value = item_values.item_value(target, value)
    mask = np.reshape(mask, np.shape(mask) + (1,) * (np.ndim(target) - np.ndim(mask)))
    return np.where(mask, value, target).astype(target.dtype)


def replaced(op: PrimOp) -> PrimOp:
    """``op`` as the per-example ``where`` of `masked_assign`."""
    return dataclasses.replace(
        op, function=masked_assign, name="masked_setitem", per_example=True
    )

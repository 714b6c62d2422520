"""Item assignment (``buffer[i] = value``) as a primitive the machines can run in place.

As a function, `SetItem` is an ordinary batched primitive: it returns a copy of
the target with each thread's item replaced, so every pass, the reference
interpreter and type inference need nothing special. The machines recognize
it and write into the variable's storage instead, touching only the active
threads' items: a per-thread buffer of draws or results filled one item per
loop iteration would otherwise be copied whole on every write.

The index is a tuple of per-thread integer scalars (one input each), full slices
``:`` and slices whose bounds are known when compiling (``buf[1:] = v[:-1]``, the
same items for every thread); inputs are ``(target, value, *indices)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcbatch.ir.types import VariableAllocation, is_pattern_node

FULL_SLICE = "colon"


@dataclasses.dataclass(frozen=True)
class StaticSlice:
    """A slice of an index whose bounds are known when compiling (ints or None): the same
    items for every thread. (A `slice` itself is unhashable before Python 3.12.)"""

    start: int | None
    stop: int | None
    step: int | None

    def as_slice(self) -> slice:
        return slice(self.start, self.stop, self.step)


@dataclasses.dataclass(frozen=True)
class SetItem:
    """``target[index] = value`` per thread; ``index`` holds `FULL_SLICE`, a `StaticSlice`
    or None (an input). ``where``: the user's line, for the IndexError of an index out of
    bounds."""

    index: tuple
    where: str = ""
    #: an augmented assignment's (``w[m] += x``): through a boolean mask its value is the
    #: whole array combined (`pcbatch.passes.masked_items`), else the item's
    augmented: bool = False

    @property
    def __name__(self) -> str:  # the printer's and profiler's label
        return "setitem"

    @property
    def integer_parts(self) -> int:
        return sum(part is None for part in self.index)

    def key(self, rows, indices: list, wrap) -> tuple:
        """The fancy index of the items: rows, then each index part (``wrap`` fixes negatives)."""
        values = iter(indices)
        key = [rows]
        for axis, part in enumerate(self.index):
            if part is None:
                key.append(wrap(next(values), axis))
            else:
                key.append(slice(None) if part == FULL_SLICE else part.as_slice())
        return tuple(key)

    def forward(self, dims: tuple) -> tuple[SetItem, list]:
        """This assignment with each slice of negative step replaced by the forward slice
        of the same items (for Torch, whose slices step forward only), and the axes of
        the aligned value (`align`) to flip to match: the slices' items come after the
        batch axis, in order."""
        index, flips, sliced = list(self.index), [], 0
        for axis, part in enumerate(self.index):
            if part is None:
                continue
            sliced += 1
            if part == FULL_SLICE or (part.step or 1) > 0:
                continue
            items = range(*part.as_slice().indices(dims[axis]))
            if not items:
                index[axis] = StaticSlice(0, 0, 1)  # no items either way
                continue
            index[axis] = StaticSlice(items[-1], items[0] + 1, -items.step)
            flips.append(sliced)
        return dataclasses.replace(self, index=tuple(index)), flips

    def rest_rank(self, target_rank: int) -> int:
        """Rank of one thread's items in a batched target of ``target_rank``."""
        return target_rank - 1 - self.integer_parts

    def __call__(self, target, value, *indices):
        """The functional form (NumPy): a copy of ``target`` with the items replaced."""
        _refuse_tuple(target)
        target = np.array(target)
        dims = target.shape[1:]
        wrap = lambda i, axis: wrap_checked(i, dims[axis], axis)
        key = self.key(np.arange(target.shape[0]), [np.asarray(i) for i in indices], wrap)
        target[key] = align(np.asarray(value), self.rest_rank(target.ndim))
        return target

    def faulting(self, target, value, *indices):
        """Rows (threads) whose index is out of bounds of their item's axis (batched)."""
        dims = np.shape(target)[1:]
        bad = np.zeros(np.shape(target)[:1], dtype=bool)
        parts = (k for k, part in enumerate(self.index) if part is None)
        for axis, index in zip(parts, indices):
            index = np.broadcast_to(index, bad.shape)
            bad = bad | (index < -dims[axis]) | (index >= dims[axis])
        return bad

    def error(self) -> IndexError:
        from pcbatch.errors import lane_check_failed

        at = f" (at {self.where})" if self.where else ""
        return lane_check_failed(IndexError(
            f"index out of bounds in an item assignment{at}, as NumPy raises for each "
            "example: check the index first (if 0 <= k < len(buf): buf[k] = v)"
        ))

    def for_backend(self, backend):
        """The functional form on a backend with ``set_items`` (the compiled ones)."""
        if not hasattr(backend, "set_items"):
            return None

        def set_items(target, value, *indices):
            _refuse_tuple(target)
            return backend.set_items(self, target, value, list(indices), None)

        return set_items


def wrap_checked(index: np.ndarray, size: int, axis: int) -> np.ndarray:
    """``index`` (one per thread) with negatives counted from ``size``, as Python does;
    NumPy's IndexError, naming the example's axis, for one out of bounds."""
    bad = (index < -size) | (index >= size)
    if bad.any():
        from pcbatch.backends.bounds import index_error

        raise index_error(np.asarray(index)[bad].flat[0], axis, size)
    return np.where(index < 0, index + size, index)


def _refuse_tuple(target) -> None:
    """``t[0] = v`` (or ``t[0] += v``) on a tuple: Python's TypeError, saying what to write."""
    if is_pattern_node(target):
        raise TypeError(
            "'tuple' object does not support item assignment (as in Python); build a new "
            "tuple, t = (t[0] + 1.0, t[1]), or make an array to assign into, "
            "t = np.array([a, b])"
        )


def align(value, item_rank: int):
    """A per-thread ``value`` (leading batch) with unit axes so it broadcasts to the items."""
    missing = item_rank - (value.ndim - 1)
    if missing < 0:  # leading unit axes of one example's value, which NumPy drops
        return value.reshape(value.shape[:1] + value.shape[1 - missing:])
    if missing == 0:
        return value
    return value.reshape(value.shape[:1] + (1,) * missing + value.shape[1:])


def is_in_place(op, program) -> bool:
    """True when ``op`` is an item assignment the machine may run on the variable's storage."""
    if not isinstance(op.function, SetItem) or op.vars_out != op.vars_in[0]:
        return False
    alloc = program.alloc_of(op.vars_out)
    tensors = program.var_types[op.vars_out].tensors
    return not is_pattern_node(tensors) and alloc in (
        VariableAllocation.REGISTER,
        VariableAllocation.FULL,
    )

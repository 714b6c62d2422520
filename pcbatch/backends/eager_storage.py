"""The eager machine's registers and stacks, one implementation for every eager backend.

A `Register` holds one value per thread in an array ``top`` of shape ``[batch, *shape]``;
a `Stack` adds, per thread, the values saved below it (``stack[depth, row]``) and their
count (``depth``). Both are written for the array operations an eager backend supplies
(`EagerArrays`: NumPy's here, torch's in `pcbatch.backends.torch`), through Python's
indexing syntax, which NumPy arrays and torch tensors share. The few places where the
libraries differ (allocation, joining, a fresh full-width copy, the conversions torch
needs) go through the operations; NumPy's hot path pays one flag test for them.

Reads of some threads gather their rows, writes scatter them back; a read of every
thread hands out a view that a primitive cannot write to (on NumPy), and a write of
every thread replaces ``top`` with a fresh array: an earlier full-width read may still be
in use (a parallel copy ``a, b = b, a`` reads both before writing either).

Stacks grow on demand (doubling) up to ``max_depth``, so a generous depth costs memory
only where recursion really goes deep; a push beyond it raises `StackFull`.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pcbatch.backends.base import StackFull
from pcbatch.ir import setitem
from pcbatch.ir.types import TensorType

__all__ = ["EagerArrays", "NumpyArrays", "Register", "Stack"]


class EagerArrays(Protocol):
    """The array operations the storage needs from an eager backend."""

    #: whether stored values need `storable` before a scatter (NumPy casts by itself)
    converts: bool

    def zeros(self, shape: tuple, dtype: Any) -> Any:
        """Zeros to hold values of NumPy ``dtype`` (in a dtype that can hold them)."""

    def row_numbers(self, size: int) -> Any:
        """``0, 1, ..., size - 1`` (int64): the stacks' slots at depth 0."""

    def concatenate(self, arrays: list) -> Any: ...

    def whole(self, top: Any, dtype: Any) -> Any:
        """What a read of every thread returns: ``top``, or a read-only view of it."""

    def rows_of(self, array: Any, index: Any, dtype: Any) -> Any:
        """``array[index]``, as values of NumPy ``dtype`` (on a backend that `converts`)."""

    def storable(self, value: Any, like: Any) -> Any:
        """``value`` ready to be scattered into ``like`` (device, dtype)."""

    def filled(self, value: Any, like: Any) -> Any:
        """A fresh array shaped and typed like ``like``, holding ``value`` broadcast."""

    def to_host(self, value: Any) -> np.ndarray: ...

    def wrap_negative(self, index: Any, size: int, axis: int) -> Any:
        """``index``, negative entries counted from ``size`` (Python's rule); NumPy's
        IndexError (naming the example's ``axis``) for an entry out of bounds."""

    def as_index(self, value: Any, like: Any) -> Any:
        """``value`` as an integer index array for ``like``."""

    def flip(self, value: Any, axes: list) -> Any:
        """``value`` reversed along ``axes``."""


class NumpyArrays:
    """`EagerArrays` on NumPy."""

    converts = False

    def zeros(self, shape: tuple, dtype: Any) -> np.ndarray:
        return np.zeros(shape, dtype=dtype)

    def row_numbers(self, size: int) -> np.ndarray:
        return np.arange(size, dtype=np.int64)

    def concatenate(self, arrays: list) -> np.ndarray:
        return np.concatenate(arrays)

    def whole(self, top: np.ndarray, dtype: Any) -> np.ndarray:
        view = top.view()
        view.flags.writeable = False  # a primitive must not mutate VM state
        return view

    def rows_of(self, array: np.ndarray, index: np.ndarray, dtype: Any) -> np.ndarray:
        return array[index]

    def storable(self, value: Any, like: np.ndarray) -> Any:
        return value

    def filled(self, value: Any, like: np.ndarray) -> np.ndarray:
        if type(value) is np.ndarray and value.shape == like.shape and value.dtype == like.dtype:
            return value.copy()  # the common case, kept cheap
        if np.ndim(value) == 0:
            return np.full(like.shape, value, like.dtype)
        return np.array(np.broadcast_to(value, like.shape), dtype=like.dtype)

    def to_host(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def wrap_negative(self, index: np.ndarray, size: int, axis: int) -> np.ndarray:
        return setitem.wrap_checked(index, size, axis)

    def as_index(self, value: Any, like: np.ndarray) -> np.ndarray:
        return np.asarray(value)

    def flip(self, value: Any, axes: list) -> np.ndarray:
        return np.flip(value, axes)


class Register:
    """One value per thread; updated in place (every method returns ``self``)."""

    def __init__(self, name: str, type_: TensorType, batch_size: int, arrays: EagerArrays):
        self.name = name
        self.type = type_
        self.arrays = arrays
        self.top = arrays.zeros((batch_size, *type_.shape), type_.dtype)
        self.high_water = 0

    def read(self, lanes) -> Any:
        index = lanes.index
        if index is None:
            return self.arrays.whole(self.top, self.type.dtype)
        if self.arrays.converts:
            return self.arrays.rows_of(self.top, index, self.type.dtype)
        return self.top[index]

    def update(self, value: Any, lanes) -> Register:
        self._set_top(value, lanes)
        return self

    def adopt(self, value: Any, lanes) -> Register:
        """`update` with ``value``, a new array of every thread's values that nothing else
        holds (`pcbatch.vm.machine`'s check), kept as the top rather than copied."""
        if lanes.index is None and not self.arrays.converts:
            self.top = value
            return self
        return self.update(value, lanes)

    def _set_top(self, value: Any, lanes) -> None:
        index = lanes.index
        if index is None:
            self.top = self.arrays.filled(value, self.top)
        elif self.arrays.converts:
            self.top[index] = self.arrays.storable(value, self.top)
        else:
            self.top[index] = value

    def assign_items(self, assignment, value, indices: list, lanes) -> Register:
        """``top[index] = value`` in place, for the lanes' threads only."""
        arrays, top = self.arrays, self.top
        dims = top.shape[1:]
        assignment, flips = assignment.forward(dims)
        wrap = lambda i, axis: arrays.wrap_negative(i, dims[axis], axis)
        key = assignment.key(lanes.rows(), [arrays.as_index(i, top) for i in indices], wrap)
        value = arrays.storable(value, top) if arrays.converts else np.asarray(value)
        value = setitem.align(value, assignment.rest_rank(top.ndim))
        top[key] = arrays.flip(value, flips) if flips else value
        return self

    def clear_stack(self, lanes) -> Register:
        return self  # a register has no stack

    def save(self, lanes):
        raise TypeError(f"variable {self.name!r} is a register and has no stack")

    def push(self, value, lanes, saved=None):
        raise TypeError(f"variable {self.name!r} is a register and has no stack")

    def pop(self, lanes):
        raise TypeError(f"variable {self.name!r} is a register and has no stack")


class Stack(Register):
    """A register plus a per-thread stack of saved values.

    The top lives in ``top`` so reads cost what a register's do; ``stack[d, row]`` holds
    the ``d``-th value saved below thread ``row``'s top. Each thread's next free place is
    kept as its position in the stack flattened over depth and row (``slot``, ``d * batch
    + row``), so that a push or pop of some threads is one scatter or gather by position,
    not a 2-D one by depth and row.
    """

    def __init__(
        self, name: str, type_: TensorType, batch_size: int, max_depth: int, arrays: EagerArrays
    ):
        super().__init__(name, type_, batch_size, arrays)
        self.max_depth = max_depth
        self.batch_size = batch_size
        self.slot = arrays.row_numbers(batch_size)  # every thread at depth 0
        self.limit = max_depth * batch_size  # a slot past the deepest place
        capacity = min(max_depth, 4)
        self._hold(arrays.zeros((capacity, *self.top.shape), type_.dtype))

    @property
    def depth(self) -> Any:
        """How many values each thread has saved."""
        return self.slot // max(self.batch_size, 1)

    def _hold(self, stack: Any) -> None:
        self.stack = stack
        depth, batch, *shape = stack.shape
        self.flat = stack.reshape((depth * batch, *shape))  # a view: ``flat[slot]``

    def _grow_to(self, needed: int) -> None:
        capacity = len(self.stack)
        if needed <= capacity:
            return
        new_capacity = min(self.max_depth, max(needed, 2 * capacity))
        extra = self.arrays.zeros((new_capacity - capacity, *self.stack.shape[1:]),
                                  self.type.dtype)
        self._hold(self.arrays.concatenate([self.stack, extra]))

    def _deeper(self, lanes) -> Any:
        """The lanes' slots before a push, after checking that each has room for one more
        value and counting it: an int (a depth) where every thread of a full-width push
        stands at one depth (the stack's row at that depth is then written whole)."""
        index, batch = lanes.index, self.batch_size
        slot = self.slot if index is None else self.slot[index]
        highest = int(slot.max())
        if highest >= self.limit:
            rows = lanes.rows()[slot >= self.limit]
            raise StackFull(self.name, self.arrays.to_host(rows))
        deepest = highest // batch
        if deepest >= len(self.stack):
            self._grow_to(deepest + 1)
        if deepest >= self.high_water:
            self.high_water = deepest + 1
        if index is not None:
            self.slot[index] = slot + batch
            return slot
        if int(slot.min()) // batch == deepest:
            self.slot += batch
            return deepest
        self.slot = slot + batch  # a fresh array: ``slot`` still holds the old slots
        return slot

    def _put(self, slot: Any, lanes, value: Any) -> None:
        """``value`` into the lanes' stacks at ``slot`` (`_deeper`'s)."""
        if type(slot) is not int:
            self.flat[slot] = value
        elif lanes.index is None:
            self.stack[slot] = value
        else:
            self.stack[slot, lanes.index] = value

    def push(self, value: Any, lanes, saved: Any = None) -> Stack:
        """Saves the top (or ``saved``, where the caller knows what to save: a return
        address) on the lanes' stacks, and sets the top to ``value``."""
        if not lanes.count:
            return self
        slot = self._deeper(lanes)
        if saved is None:
            self._put(slot, lanes, self.top if lanes.index is None else self.top[lanes.index])
        elif self.arrays.converts:
            self._put(slot, lanes, self.arrays.storable(saved, self.stack))
        else:
            self._put(slot, lanes, saved)
        self._set_top(value, lanes)
        return self

    def save(self, lanes) -> Stack:
        """Pushes the top and leaves it as it is (``x = x`` with a push)."""
        if lanes.count:
            slot = self._deeper(lanes)  # first: it may grow the stack
            self._put(slot, lanes, self.top if lanes.index is None else self.top[lanes.index])
        return self

    def clear_stack(self, lanes) -> Stack:
        rows = lanes.rows()
        self.slot[rows] = rows
        return self

    def pop(self, lanes) -> Stack:
        index = lanes.index
        if not lanes.count:
            return self
        if index is None:
            return self._pop_every_thread(lanes)
        slot = self.slot[index] - self.batch_size
        if int(slot.min()) < 0:
            raise AssertionError(f"stack underflow in {self.name!r} (a compiler bug)")
        self.slot[index] = slot
        self._set_top(self.flat[slot], lanes)
        return self

    def _pop_every_thread(self, lanes) -> Stack:
        """`pop` of every thread: where they all stand at one depth, the stack's row at
        that depth is the new top, read whole rather than gathered."""
        batch = self.batch_size
        slot = self.slot - batch
        lowest = int(slot.min())
        if lowest < 0:
            raise AssertionError(f"stack underflow in {self.name!r} (a compiler bug)")
        self.slot = slot
        if int(slot.max()) // batch == lowest // batch:
            self._set_top(self.stack[lowest // batch], lanes)  # `_set_top` copies the row
        else:
            self._set_top(self.flat[slot], lanes)
        return self

"""The NumPy backend: eager, and the reference for every compiled backend.

Beyond the seed's NumpyBackend, a block's primitives run only on the rows of
the threads at that block: `Lanes` hold the active row indices, reads gather
them, writes scatter back. So a block costs what its active threads cost,
and a user's primitive never sees another thread's junk rows.

Stacks grow on demand (doubling) up to ``max_stack_depth``, so a generous
depth costs memory only where recursion really goes deep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pcbatch.backends import batched_array
from pcbatch.backends.base import StackFull
from pcbatch.ir import setitem
from pcbatch.ir.types import TensorType, Type, VariableAllocation, map_pattern

__all__ = ["NumpyBackend", "RegisterVariable", "StackVariable"]


@dataclasses.dataclass
class NumpyLanes:
    """Active rows: ``index`` (sorted row numbers) or None for every row."""

    index: np.ndarray | None
    count: int
    batch_size: int
    _every_row: np.ndarray | None = None  # ``rows()`` of all the lanes, made once

    def rows(self) -> np.ndarray:
        if self.index is not None:
            return self.index
        if self._every_row is None:
            self._every_row = np.arange(self.batch_size)
        return self._every_row


class RegisterVariable:
    """One value per thread; updated in place."""

    def __init__(self, name: str, type_: TensorType, batch_size: int):
        self.name = name
        self.type = type_
        self.top = np.zeros((batch_size,) + tuple(type_.shape), dtype=type_.dtype)
        self.high_water = 0

    def read(self, lanes: NumpyLanes) -> np.ndarray:
        if lanes.index is None:
            view = self.top.view()
            view.flags.writeable = False  # a primitive must not mutate VM state
            return view
        return self.top[lanes.index]

    def update(self, value: np.ndarray, lanes: NumpyLanes) -> RegisterVariable:
        self._set_top(value, lanes)
        return self

    def _set_top(self, value: np.ndarray, lanes: NumpyLanes) -> None:
        if lanes.index is None and np.ndim(value) == 0:
            self.top = np.full(self.top.shape, value, self.top.dtype)
        elif lanes.index is None:
            # Replace rather than overwrite: a full-width read handed out a view of
            # the old array, and a parallel copy (a, b = b, a) may still read it.
            self.top = np.array(np.broadcast_to(value, self.top.shape), dtype=self.top.dtype)
        else:
            self.top[lanes.index] = value

    def assign_items(self, assignment, value, indices: list, lanes: NumpyLanes):
        """``top[index] = value`` in place, for the lanes' threads only."""
        value = np.asarray(value)
        dims = self.top.shape[1:]
        wrap = lambda i, axis: np.where(i < 0, i + dims[axis], i)
        key = assignment.key(lanes.rows(), [np.asarray(i) for i in indices], wrap)
        self.top[key] = setitem.align(value, assignment.rest_rank(self.top.ndim))
        return self

    def clear_stack(self, lanes: NumpyLanes) -> RegisterVariable:
        return self  # a register has no stack

    def push(self, value, lanes):
        raise TypeError(f"variable {self.name!r} is a register and has no stack")

    def pop(self, lanes):
        raise TypeError(f"variable {self.name!r} is a register and has no stack")


class StackVariable(RegisterVariable):
    """A register plus a per-thread stack of saved values.

    The top lives in ``top`` so reads cost what a register's do; ``stack``
    holds the saved values below it and ``depth`` counts them per thread.
    """

    def __init__(self, name: str, type_: TensorType, batch_size: int, max_depth: int):
        super().__init__(name, type_, batch_size)
        self.max_depth = max_depth
        self.depth = np.zeros(batch_size, dtype=np.int64)
        capacity = min(max_depth, 4)
        self.stack = np.zeros((capacity, batch_size) + tuple(type_.shape), dtype=type_.dtype)

    def _grow_to(self, needed: int) -> None:
        capacity = len(self.stack)
        if needed <= capacity:
            return
        new_capacity = min(self.max_depth, max(needed, 2 * capacity))
        extra = np.zeros((new_capacity - capacity,) + self.stack.shape[1:], self.stack.dtype)
        self.stack = np.concatenate([self.stack, extra])

    def push(self, value: np.ndarray, lanes: NumpyLanes, saved=None) -> StackVariable:
        """Saves the top (or ``saved``, where the caller knows what to save: a return
        address) on the lanes' stacks, and sets the top to ``value``."""
        rows = lanes.rows()
        if not len(rows):
            return self
        depth = self.depth[rows]
        deepest = int(depth.max())
        if deepest >= self.max_depth:
            raise StackFull(self.name, rows[depth >= self.max_depth])
        self._grow_to(deepest + 1)
        self.stack[depth, rows] = self.top[rows] if saved is None else saved
        self.depth[rows] = depth + 1
        self.high_water = max(self.high_water, deepest + 1)
        self._set_top(value, lanes)
        return self

    def clear_stack(self, lanes: NumpyLanes) -> StackVariable:
        self.depth[lanes.rows()] = 0
        return self

    def pop(self, lanes: NumpyLanes) -> StackVariable:
        rows = lanes.rows()
        depth = self.depth[rows] - 1
        if len(depth) and depth.min() < 0:
            raise AssertionError(f"stack underflow in {self.name!r} (a compiler bug)")
        self.depth[rows] = depth
        self._set_top(self.stack[depth, rows], lanes)
        return self


def may_cast(have: np.dtype, want: np.dtype) -> bool:
    """Casts a result may need: within a kind or up (NumPy's same_kind), and a weak
    Python int (stored int64) into the unsigned dtype its variable takes (NEP 50)."""
    return np.can_cast(have, want, casting="same_kind") or (have.kind == "i" and want.kind == "u")


def _shape_merge(s1, s2):
    if s1 is None:
        return s2
    if s2 is None:
        return s1
    s1, s2 = list(s1), list(s2)
    width = max(len(s1), len(s2))
    s1 = [1] * (width - len(s1)) + s1
    s2 = [1] * (width - len(s2)) + s2
    merged = []
    for a, b in zip(s1, s2):
        if a == b:
            merged.append(a)
        elif a is None or b is None:
            known = b if a is None else a
            merged.append(None if known == 1 else known)  # 1 broadcasts to the unknown size
        elif a == 1 or b == 1:
            merged.append(b if a == 1 else a)
        else:
            raise ValueError(f"shapes {s1} and {s2} are not broadcast-compatible")
    return merged


class NumpyBackend:
    """Runs the VM eagerly on NumPy arrays, touching only active rows.

    Args:
      safety_checks: accepted for the seed's API. NumPy runs eagerly, so a stack
        overflow or a step limit is found as it happens and always raises; there is
        nothing left to check after a run, and False changes nothing.
    """

    name = "numpy"
    gathers_active_rows = True
    measures_stack_depth = True
    variable_class = RegisterVariable

    def __init__(self, safety_checks: bool = True):
        self.safety_checks = bool(safety_checks)

    # -- the VM core -------------------------------------------------------
    def create_variable(self, name, alloc, type_, max_stack_depth, batch_size):
        """A new zero-initialized variable of ``type_`` for ``batch_size`` threads."""
        if alloc == VariableAllocation.FULL:
            return StackVariable(name, type_, batch_size, max_stack_depth)
        return RegisterVariable(name, type_, batch_size)

    def all_lanes(self, batch_size: int) -> NumpyLanes:
        return NumpyLanes(None, batch_size, batch_size)

    def lanes_at(self, program_counter: np.ndarray, block_index: int) -> NumpyLanes:
        size = len(program_counter)
        index = np.flatnonzero(program_counter == block_index)
        if len(index) == size:
            return NumpyLanes(None, size, size)
        return NumpyLanes(index, len(index), size)

    def lanes_of(self, rows: np.ndarray, batch_size: int) -> NumpyLanes:
        return NumpyLanes(rows, len(rows), batch_size)

    def place(
        self, value, lanes: NumpyLanes, type_: TensorType, leading_batch: bool = False
    ) -> np.ndarray:
        """``value`` cast to ``type_`` and broadcast to the lanes' rows.

        By default ``value`` broadcasts as NumPy aligns shapes (from the right,
        the batch dimension included). With ``leading_batch`` its first
        dimension is the batch (or 1) and the rest is per-example, so a
        per-example scalar fills a per-example vector.
        """
        array = np.asarray(value)
        target = (lanes.count, *type_.shape)
        if array.shape == target and array.dtype == type_.dtype:
            return array  # already in place: the common case, kept cheap
        if leading_batch:
            missing = len(type_.shape) - (array.ndim - 1)
            if missing > 0:
                array = array.reshape(array.shape[:1] + (1,) * missing + array.shape[1:])
        if array.dtype != type_.dtype:
            if not may_cast(array.dtype, np.dtype(type_.dtype)):
                raise TypeError(f"got dtype {array.dtype}, expected {np.dtype(type_.dtype)}")
            array = array.astype(type_.dtype)
        return np.broadcast_to(array, target)

    def truth(self, condition) -> np.ndarray:
        """``condition`` as bools (a number: nonzero)."""
        if getattr(condition, "dtype", None) != np.bool_:
            return np.asarray(condition) != 0
        return condition

    def count_true(self, mask: np.ndarray) -> int:
        return int(np.count_nonzero(mask))

    def lanes_where(self, lanes: NumpyLanes, mask: np.ndarray) -> NumpyLanes:
        """The lanes, of ``lanes``, where ``mask`` (one bool per lane) holds."""
        index = np.flatnonzero(mask) if lanes.index is None else lanes.index[mask]
        return NumpyLanes(index, len(index), lanes.batch_size)

    def gather(self, value: np.ndarray, lanes: NumpyLanes) -> np.ndarray:
        return value if lanes.index is None else value[lanes.index]

    def vectorize(self, function: Callable) -> Callable:
        """A function written for one example, applied to batched arrays."""
        return batched_array.vectorize(function)

    def select(self, condition, if_true, if_false):
        if getattr(condition, "dtype", None) != np.bool_:
            condition = condition != 0
        return np.where(condition, if_true, if_false)

    def to_host(self, value) -> np.ndarray:
        return np.asarray(value)

    def copy_out(self, value) -> np.ndarray:
        return np.array(value)

    def next_block(self, program_counter: np.ndarray) -> int:
        return int(program_counter.min())

    # -- the seed's NumpyBackend surface ------------------------------------
    def any(self, t, name=None):
        return np.any(t)

    def assert_matching_dtype(self, expected_dtype, val, message=""):
        """Raises ValueError if ``val``'s dtype is not ``expected_dtype``."""
        actual = np.asarray(val).dtype
        if actual != np.dtype(expected_dtype):
            raise ValueError(
                f"mismatched dtype: expected {expected_dtype}, got {actual}. {message}"
            )

    def batch_size(self, val, name=None):
        return np.asarray(val).shape[0]

    def broadcast_to_shape_of(self, val, target, name=None):
        """``val`` broadcast to ``target``'s shape (and cast to its dtype)."""
        target = np.asarray(target)
        return np.broadcast_to(np.asarray(val, dtype=target.dtype), target.shape).copy()

    def cond(self, pred, true_fn, false_fn, name=None):
        return true_fn() if pred else false_fn()

    def equal(self, t1, t2, name=None):
        return np.equal(t1, t2)

    def not_equal(self, t1, t2, name=None):
        return np.not_equal(t1, t2)

    def full_mask(self, size, name=None):
        return np.ones(int(size), dtype=bool)

    def initial_program_counter(self, size, dtype, name=None):
        return np.zeros(int(size), dtype=np.dtype(dtype) if dtype is not None else np.int64)

    def merge_dtypes(self, dt1, dt2):
        """The dtype that holds both (NumPy promotion; int64 over int32)."""
        if dt1 is None:
            return dt2
        if dt2 is None:
            return dt1
        return np.promote_types(dt1, dt2)

    def merge_shapes(self, s1, s2):
        """The broadcast of two shapes (None entries are unknown dimensions)."""
        return _shape_merge(s1, s2)

    def prepare_for_cond(self, state):
        return state

    def reduce_min(self, t, name=None):
        return np.min(t)

    def run_on_dummies(
        self, primitive_callable: Callable, input_types: Sequence[Type], fill: Any = 1
    ):
        """Calls the primitive on arrays filled with ``fill`` of the given (batched) types."""
        args = [
            map_pattern(lambda t: np.full(t.shape, fill, t.dtype), t.tensors) for t in input_types
        ]
        with np.errstate(all="ignore"):
            return primitive_callable(*args)

    def static_value(self, t):
        return t

    def switch_case(self, branch_selector, branch_callables, name=None):
        return branch_callables[int(branch_selector)]()

    def type_of(self, t, preferred_dtype=None) -> TensorType:
        """The `TensorType` of ``t`` (its whole shape; callers strip the batch)."""
        if preferred_dtype is not None and not isinstance(t, np.ndarray):
            array = np.asarray(t, dtype=preferred_dtype)
        else:
            array = np.asarray(t)
        return TensorType(array.dtype, tuple(array.shape))

    def where(self, condition, x, y, name=None):
        """Selects rows of ``x`` where ``condition``; ``condition`` may be per-row."""
        x, y = np.asarray(x), np.asarray(y)
        condition = np.asarray(condition)
        rank = max(x.ndim, y.ndim)
        condition = condition.reshape(condition.shape + (1,) * (rank - condition.ndim))
        return np.where(condition, x, y)

    def while_loop(self, cond, body, loop_vars, name=None):
        while cond(*loop_vars):
            loop_vars = body(*loop_vars)
        return loop_vars

    def wrap_straightline_callable(self, f):
        return f

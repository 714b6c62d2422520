"""The NumPy backend: eager, and the reference for every compiled backend.

Beyond the seed's NumpyBackend, a block's primitives run only on the rows of
the threads at that block: `Lanes` hold the active row indices, reads gather
them, writes scatter back. So a block costs what its active threads cost,
and a user's primitive never sees another thread's junk rows.

Registers and stacks are `pcbatch.backends.eager_storage`'s, on NumPy's arrays (the
Torch backend runs the same ones on tensors).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pcbatch.backends import batched_array
from pcbatch.backends.base import StackFull  # noqa: F401 - where tests and users find it
from pcbatch.backends.eager_storage import NumpyArrays, Register, Stack
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


#: NumPy's array operations for the eager machine's storage
NUMPY_ARRAYS = NumpyArrays()


class RegisterVariable(Register):
    """One value per thread, in a NumPy array (`pcbatch.backends.eager_storage.Register`)."""

    def __init__(self, name: str, type_: TensorType, batch_size: int, arrays=NUMPY_ARRAYS):
        super().__init__(name, type_, batch_size, arrays)


class StackVariable(Stack, RegisterVariable):
    """A register plus a per-thread stack (`pcbatch.backends.eager_storage.Stack`)."""

    def __init__(
        self, name: str, type_: TensorType, batch_size: int, max_depth: int, arrays=NUMPY_ARRAYS
    ):
        Stack.__init__(self, name, type_, batch_size, max_depth, arrays)


def may_cast(have: np.dtype, want: np.dtype) -> bool:
    """Casts a result may need: within a kind or up (NumPy's same_kind), and a weak
    Python int (stored int64) into the unsigned dtype its variable takes (NEP 50)."""
    return np.can_cast(have, want, casting="same_kind") or (have.kind == "i" and want.kind == "u")


def check_example_shape(have: tuple, want: tuple) -> None:
    """A primitive's per-example result has the shape type inference gave it: a ValueError
    if not. They differ only where the shape depends on the values (``v[k:]`` with ``k``
    per example, run one example at a time), which broadcasting would hide."""
    if tuple(have) != tuple(want):
        raise ValueError(
            f"each example's value has shape {tuple(have)} where type inference, running "
            f"the line on dummy values, found {tuple(want)}: the shape depends on the "
            "values (a slice with a per-example bound, np.nonzero, ...), which one batch "
            "cannot hold; keep the length fixed (np.where(mask, v, 0), v[k + np.arange(3)])"
        )


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
    arrays = NUMPY_ARRAYS  # what the registers and stacks are made of
    #: the eager machine may keep a program's compiled blocks across runs and instances:
    #: what they compile to depends on the class only, and keeps no state of a run
    reuses_block_runners = True

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
        index = (program_counter == block_index).nonzero()[0]
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
            elif missing == 0:
                check_example_shape(array.shape[1:], type_.shape)
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
        index = mask.nonzero()[0] if lanes.index is None else lanes.index[mask]
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
        """Calls the primitive on arrays filled with ``fill`` of the given (batched) types
        (`dummy_array`)."""
        args = [
            map_pattern(lambda t: dummy_array(t.shape, t.dtype, fill), t.tensors)
            for t in input_types
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


def dummy_array(shape: tuple, dtype: Any, fill: Any) -> np.ndarray:
    """An array of ``shape`` (batched: the batch first) filled with ``fill``; with
    ``fill="eye"``, each example's square matrices the identity (ones otherwise): a
    primitive that solves, inverts or factors a matrix fails on all ones and all zeros."""
    if fill != "eye":
        return np.full(shape, fill, dtype)
    if len(shape) >= 3 and shape[-1] == shape[-2]:
        return np.broadcast_to(np.eye(shape[-1], dtype=dtype), shape).copy()
    return np.ones(shape, dtype)

"""Model-based tests of the NumPy backend's variables (`RegisterVariable`, `StackVariable`).

The model keeps, per thread, a Python list of values: the stack, top last, so
``model[row][-1]`` is what the thread currently reads and ``len(model[row]) - 1``
is its stack depth. Every operation runs under a random lane set made in one of
the three ways the VM makes them (``all_lanes``, an explicit ``NumpyLanes`` index,
``lanes_at`` on a program-counter array), and after every step the whole
variable is compared with the model.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pcbatch.backends.numpy import NumpyBackend, NumpyLanes, RegisterVariable, StackFull
from pcbatch.ir.types import TensorType, VariableAllocation

DTYPES = [np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)]
SHAPES = [(), (2,), (2, 3)]
ALLOCS = [VariableAllocation.FULL, VariableAllocation.REGISTER]

batch_sizes = st.integers(min_value=1, max_value=8)
dtypes = st.sampled_from(DTYPES)
shapes = st.sampled_from(SHAPES)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


# ---------------------------------------------------------------------------
# Helpers shared by the state machine and the plain tests


def random_values(seed: int, count: int, type_: TensorType) -> np.ndarray:
    """Distinct-looking values of ``type_`` for ``count`` threads."""
    rng = np.random.default_rng(seed)
    size = (count,) + tuple(type_.shape)
    dtype = np.dtype(type_.dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=size).astype(np.bool_)
    if dtype.kind == "i":
        return rng.integers(-1000, 1000, size=size).astype(dtype)
    return rng.normal(size=size).astype(dtype)


def draw_value(data, backend, lanes, type_: TensorType):
    """A value for ``lanes``, as a primitive might produce it, placed by the backend.

    Sometimes a full ``[count, *shape]`` array, sometimes one value that ``place``
    broadcasts, sometimes a narrower dtype of the same kind that ``place`` casts.
    """
    seed = data.draw(seeds, label="value seed")
    form = data.draw(st.sampled_from(["full", "scalar", "narrow"]), label="value form")
    dtype = np.dtype(type_.dtype)
    if form == "scalar":
        raw = random_values(seed, 1, TensorType(dtype, ()))[0]
    else:
        raw = random_values(seed, lanes.count, type_)
        if form == "narrow":
            narrower = {"i": np.int32, "f": np.float32, "b": np.bool_}[dtype.kind]
            raw = raw.astype(narrower)
    placed = backend.place(raw, lanes, type_)
    assert placed.shape == (lanes.count,) + tuple(type_.shape)
    assert placed.dtype == dtype
    return placed


def draw_lanes(data, backend, batch_size: int, candidates, *, allow_empty: bool = False):
    """A lane set over a random subset of ``candidates``; returns (lanes, sorted rows)."""
    candidates = sorted(int(r) for r in candidates)
    chosen = data.draw(
        st.sets(st.sampled_from(candidates), min_size=0 if allow_empty else 1)
        if candidates
        else st.just(set()),
        label="rows",
    )
    rows = sorted(chosen)
    form = data.draw(st.sampled_from(["index", "pc", "all"]), label="lane form")
    if form == "all" and rows == list(range(batch_size)):
        lanes = backend.all_lanes(batch_size)
    elif form == "pc":
        block = data.draw(st.integers(0, 4), label="block")
        others = data.draw(
            st.lists(
                st.integers(0, 5).filter(lambda b: b != block),
                min_size=batch_size,
                max_size=batch_size,
            ),
            label="other pcs",
        )
        pc = np.array(others, dtype=np.int32)
        pc[rows] = block
        lanes = backend.lanes_at(pc, block)
    else:
        lanes = NumpyLanes(np.array(rows, dtype=np.int64), len(rows), batch_size)
    assert lanes.count == len(rows)
    assert lanes.batch_size == batch_size
    assert lanes.rows().tolist() == rows
    return lanes, rows


def snapshot(var) -> tuple:
    everyone = NumpyBackend().all_lanes(len(var.top))
    state = [np.array(var.read(everyone)), var.high_water]
    if hasattr(var, "depth"):
        state += [var.depth.copy(), var.stack.copy()]
    return tuple(state)


def assert_same_snapshot(before: tuple, after: tuple) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
        else:
            assert a == b


# ---------------------------------------------------------------------------
# The state machine


class VariableMachine(RuleBasedStateMachine):
    """One variable (stack or register) against a list-of-stacks model."""

    def __init__(self):
        super().__init__()
        self.backend = NumpyBackend()
        self.var = None

    @initialize(
        batch_size=batch_sizes,
        dtype=dtypes,
        shape=shapes,
        alloc=st.sampled_from(ALLOCS),
        max_depth=st.integers(min_value=0, max_value=9),
    )
    def create(self, batch_size, dtype, shape, alloc, max_depth):
        self.batch_size = batch_size
        self.type = TensorType(dtype, shape)
        self.alloc = alloc
        self.max_depth = max_depth
        self.var = self.backend.create_variable("v", alloc, self.type, max_depth, batch_size)
        assert isinstance(self.var, self.backend.variable_class)
        zero = np.zeros(shape, dtype=dtype)
        self.model = [[zero.copy()] for _ in range(batch_size)]
        self.high_water = 0

    # -- model helpers ---------------------------------------------------------
    @property
    def is_stack(self) -> bool:
        return self.alloc == VariableAllocation.FULL

    def depths(self) -> list:
        return [len(s) - 1 for s in self.model]

    def tops(self) -> np.ndarray:
        return np.stack([s[-1] for s in self.model]).astype(self.type.dtype)

    # -- rules -----------------------------------------------------------------
    @rule(data=st.data())
    def update(self, data):
        lanes, rows = draw_lanes(data, self.backend, self.batch_size, range(self.batch_size))
        value = draw_value(data, self.backend, lanes, self.type)
        self.var = self.var.update(value, lanes)
        for i, row in enumerate(rows):
            self.model[row][-1] = np.array(value[i])

    @precondition(lambda self: self.alloc == VariableAllocation.FULL)
    @rule(data=st.data())
    def push(self, data):
        lanes, rows = draw_lanes(data, self.backend, self.batch_size, range(self.batch_size))
        value = draw_value(data, self.backend, lanes, self.type)
        overflowing = [r for r in rows if len(self.model[r]) - 1 >= self.max_depth]
        if overflowing:
            before = snapshot(self.var)
            with pytest.raises(StackFull) as info:
                self.var.push(value, lanes)
            assert info.value.name == "v"
            assert np.asarray(info.value.rows).tolist() == overflowing
            # A refused push must leave every thread as it was (the model is unchanged).
            assert_same_snapshot(before, snapshot(self.var))
            return
        self.var = self.var.push(value, lanes)
        for i, row in enumerate(rows):
            self.model[row].append(np.array(value[i]))
        self.high_water = max(self.high_water, max(self.depths()))

    @precondition(
        lambda self: self.alloc == VariableAllocation.FULL and any(len(s) > 1 for s in self.model)
    )
    @rule(data=st.data())
    def pop(self, data):
        eligible = [r for r in range(self.batch_size) if len(self.model[r]) > 1]
        lanes, rows = draw_lanes(data, self.backend, self.batch_size, eligible)
        self.var = self.var.pop(lanes)
        for row in rows:
            self.model[row].pop()

    @rule(data=st.data())
    def read_some(self, data):
        lanes, rows = draw_lanes(
            data, self.backend, self.batch_size, range(self.batch_size), allow_empty=True
        )
        got = self.var.read(lanes)
        assert got.shape == (len(rows),) + tuple(self.type.shape)
        assert got.dtype == np.dtype(self.type.dtype)
        expected = self.tops()[rows] if rows else np.zeros_like(got)
        np.testing.assert_array_equal(got, expected)
        if lanes.index is not None and got.size:
            # A gathered read is the primitive's own array: scribbling on it
            # must not reach the variable.
            before = snapshot(self.var)
            got[...] = np.ones_like(got)
            assert_same_snapshot(before, snapshot(self.var))

    @precondition(lambda self: self.alloc == VariableAllocation.REGISTER)
    @rule(data=st.data())
    def register_has_no_stack(self, data):
        lanes, _ = draw_lanes(data, self.backend, self.batch_size, range(self.batch_size))
        value = draw_value(data, self.backend, lanes, self.type)
        before = snapshot(self.var)
        with pytest.raises(TypeError, match="register"):
            self.var.push(value, lanes)
        with pytest.raises(TypeError, match="register"):
            self.var.pop(lanes)
        assert_same_snapshot(before, snapshot(self.var))

    # -- invariants --------------------------------------------------------------
    @invariant()
    def matches_model(self):
        if self.var is None:
            return
        everyone = self.backend.all_lanes(self.batch_size)
        got = self.var.read(everyone)
        assert got.shape == (self.batch_size,) + tuple(self.type.shape)
        assert got.dtype == np.dtype(self.type.dtype)
        np.testing.assert_array_equal(got, self.tops())

    @invariant()
    def all_lanes_read_is_read_only(self):
        if self.var is None:
            return
        got = self.var.read(self.backend.all_lanes(self.batch_size))
        assert not got.flags.writeable
        with pytest.raises(ValueError):
            got[...] = np.ones_like(got)

    @invariant()
    def depth_and_high_water(self):
        if self.var is None:
            return
        if not self.is_stack:
            assert self.var.high_water == 0
            return
        assert self.var.depth.tolist() == self.depths()
        assert self.var.high_water == self.high_water
        capacity = len(self.var.stack)
        assert max(self.depths()) <= capacity <= max(self.max_depth, 0)
        assert capacity >= self.high_water


VariableMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestVariableMachine = VariableMachine.TestCase


# ---------------------------------------------------------------------------
# Plain property tests

FAST = settings(max_examples=40, deadline=None)


def make_stack(batch_size, dtype, shape, max_depth):
    return NumpyBackend().create_variable(
        "s", VariableAllocation.FULL, TensorType(dtype, shape), max_depth, batch_size
    )


@FAST
@given(batch_size=batch_sizes, dtype=dtypes, shape=shapes, data=st.data())
def test_pop_restores_the_value_before_the_push(batch_size, dtype, shape, data):
    backend = NumpyBackend()
    type_ = TensorType(dtype, shape)
    var = make_stack(batch_size, dtype, shape, 8)
    everyone = backend.all_lanes(batch_size)
    var.update(draw_value(data, backend, everyone, type_), everyone)
    before = np.array(var.read(everyone))

    lanes, rows = draw_lanes(data, backend, batch_size, range(batch_size))
    pushed = draw_value(data, backend, lanes, type_)
    var.push(pushed, lanes)
    after_push = var.read(everyone)
    np.testing.assert_array_equal(after_push[rows], pushed)
    untouched = [r for r in range(batch_size) if r not in rows]
    np.testing.assert_array_equal(after_push[untouched], before[untouched])

    var.pop(lanes)
    np.testing.assert_array_equal(var.read(everyone), before)
    assert var.depth.tolist() == [0] * batch_size
    assert var.high_water == 1


@FAST
@given(
    batch_size=batch_sizes,
    dtype=dtypes,
    shape=shapes,
    max_depth=st.integers(min_value=5, max_value=40),
    data=st.data(),
)
def test_stack_grows_on_demand_past_its_initial_capacity(batch_size, dtype, shape, max_depth, data):
    backend = NumpyBackend()
    type_ = TensorType(dtype, shape)
    var = make_stack(batch_size, dtype, shape, max_depth)
    initial_capacity = len(var.stack)
    assert initial_capacity == min(max_depth, 4)
    lanes, rows = draw_lanes(data, backend, batch_size, range(batch_size))
    pushes = data.draw(st.integers(min_value=initial_capacity + 1, max_value=max_depth))
    history = []
    for _ in range(pushes):
        value = draw_value(data, backend, lanes, type_)
        history.append(np.array(var.read(lanes)))
        var.push(value, lanes)
    assert initial_capacity < len(var.stack) <= max_depth
    assert var.high_water == pushes
    assert var.depth[rows].tolist() == [pushes] * len(rows)
    for saved in reversed(history):
        var.pop(lanes)
        np.testing.assert_array_equal(var.read(lanes), saved)
    assert var.depth.tolist() == [0] * batch_size


@FAST
@given(
    batch_size=batch_sizes,
    max_depth=st.integers(min_value=0, max_value=6),
    data=st.data(),
)
def test_push_beyond_max_depth_names_exactly_the_full_rows(batch_size, max_depth, data):
    backend = NumpyBackend()
    type_ = TensorType(np.int64, ())
    var = make_stack(batch_size, np.int64, (), max_depth)
    deep_lanes, deep_rows = draw_lanes(data, backend, batch_size, range(batch_size))
    for i in range(max_depth):
        var.push(backend.place(i + 1, deep_lanes, type_), deep_lanes)
    lanes, rows = draw_lanes(data, backend, batch_size, range(batch_size))
    full_rows = sorted(set(rows) & set(deep_rows))
    before = snapshot(var)
    if full_rows or max_depth == 0:
        with pytest.raises(StackFull) as info:
            var.push(backend.place(-1, lanes, type_), lanes)
        assert np.asarray(info.value.rows).tolist() == (full_rows if max_depth else rows)
        assert_same_snapshot(before, snapshot(var))
    else:
        var.push(backend.place(-1, lanes, type_), lanes)
        assert var.read(lanes).tolist() == [-1] * len(rows)


@FAST
@given(batch_size=batch_sizes, dtype=dtypes, shape=shapes, data=st.data())
def test_operations_under_no_lanes_change_nothing(batch_size, dtype, shape, data):
    backend = NumpyBackend()
    type_ = TensorType(dtype, shape)
    var = make_stack(batch_size, dtype, shape, 4)
    everyone = backend.all_lanes(batch_size)
    var.update(draw_value(data, backend, everyone, type_), everyone)
    var.push(draw_value(data, backend, everyone, type_), everyone)
    before = snapshot(var)
    none = NumpyLanes(np.zeros(0, dtype=np.int64), 0, batch_size)
    empty_value = backend.place(np.zeros((0,) + shape, dtype), none, type_)
    assert var.read(none).shape == (0,) + shape
    var.update(empty_value, none)
    var.pop(none)
    assert_same_snapshot(before, snapshot(var))
    pc = np.ones(batch_size, dtype=np.int32)
    nobody = backend.lanes_at(pc, 0)
    assert nobody.count == 0
    var.update(empty_value, nobody)
    assert_same_snapshot(before, snapshot(var))


def test_push_under_no_lanes_leaves_high_water_alone():
    backend = NumpyBackend()
    var = make_stack(3, np.int64, (), 4)
    none = NumpyLanes(np.zeros(0, dtype=np.int64), 0, 3)
    var.push(backend.place(7, none, TensorType(np.int64, ())), none)
    assert var.depth.tolist() == [0, 0, 0]
    assert var.high_water == 0


def test_push_under_no_lanes_never_overflows():
    backend = NumpyBackend()
    var = make_stack(3, np.int64, (), 0)
    none = NumpyLanes(np.zeros(0, dtype=np.int64), 0, 3)
    var.push(backend.place(7, none, TensorType(np.int64, ())), none)


def test_pop_of_an_empty_stack_is_an_internal_error_and_changes_nothing():
    backend = NumpyBackend()
    type_ = TensorType(np.int64, ())
    var = make_stack(4, np.int64, (), 4)
    lanes = NumpyLanes(np.array([1, 3]), 2, 4)
    row_one = NumpyLanes(np.array([1]), 1, 4)
    var.push(backend.place(5, row_one, type_), row_one)
    before = snapshot(var)
    with pytest.raises(AssertionError, match="underflow"):
        var.pop(lanes)
    assert_same_snapshot(before, snapshot(var))


@FAST
@given(batch_size=batch_sizes, dtype=dtypes, shape=shapes, data=st.data())
def test_register_reads(batch_size, dtype, shape, data):
    backend = NumpyBackend()
    type_ = TensorType(dtype, shape)
    var = backend.create_variable("r", VariableAllocation.REGISTER, type_, 4, batch_size)
    assert type(var) is RegisterVariable
    everyone = backend.all_lanes(batch_size)
    np.testing.assert_array_equal(var.read(everyone), np.zeros((batch_size,) + shape, dtype))
    value = draw_value(data, backend, everyone, type_)
    var.update(value, everyone)
    whole = var.read(everyone)
    np.testing.assert_array_equal(whole, value)
    with pytest.raises(ValueError):
        whole[...] = np.ones_like(whole)
    assert var.top.flags.writeable  # only the view handed out is frozen
    lanes, rows = draw_lanes(data, backend, batch_size, range(batch_size))
    np.testing.assert_array_equal(var.read(lanes), np.asarray(value)[rows])

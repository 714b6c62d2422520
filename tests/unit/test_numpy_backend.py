"""Unit tests of `NumpyBackend`: the seed's NumpyBackend surface and the VM core.

The variables' push/pop/update behaviour is covered by the model-based tests in
``test_stack_variables.py``; here each backend operation gets direct tests.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcbatch.backends.numpy import NumpyBackend, NumpyLanes, RegisterVariable, StackVariable
from pcbatch.ir.types import TensorType, Type, VariableAllocation

FAST = settings(max_examples=40, deadline=None)


@pytest.fixture
def be() -> NumpyBackend:
    return NumpyBackend()


def lanes_of(rows, batch_size) -> NumpyLanes:
    return NumpyLanes(np.array(rows, dtype=np.int64), len(rows), batch_size)


# ---------------------------------------------------------------------------
# Properties


def test_variable_class_is_the_register_every_variable_derives_from(be):
    assert be.variable_class is RegisterVariable
    assert issubclass(StackVariable, be.variable_class)
    assert be.name == "numpy"
    assert be.gathers_active_rows is True


# ---------------------------------------------------------------------------
# The seed's surface, alphabetically


def test_any(be):
    assert be.any(np.array([False, True, False]))
    assert not be.any(np.array([False, False]))
    assert not be.any(np.zeros(0, dtype=bool))
    assert be.any(np.array([[0, 0], [0, 3]]))


def test_assert_matching_dtype_accepts_the_same_dtype(be):
    be.assert_matching_dtype(np.int32, np.zeros(3, dtype=np.int32))
    be.assert_matching_dtype(np.dtype(np.float64), 1.5)
    be.assert_matching_dtype(np.bool_, [True, False])


@pytest.mark.parametrize(
    "expected, val",
    [
        (np.int64, np.zeros(2, dtype=np.int32)),
        (np.int32, np.zeros(2, dtype=np.int64)),
        (np.float32, 1.0),
        (np.bool_, np.array([1, 0])),
    ],
)
def test_assert_matching_dtype_raises_value_error_on_mismatch(be, expected, val):
    with pytest.raises(ValueError, match="while checking x"):
        be.assert_matching_dtype(expected, val, message="while checking x")


def test_batch_size(be):
    assert be.batch_size(np.zeros((5, 2, 3))) == 5
    assert be.batch_size(np.zeros(7)) == 7
    assert be.batch_size([[1, 2], [3, 4], [5, 6]]) == 3
    assert be.batch_size(np.zeros((0, 4))) == 0


def test_broadcast_to_shape_of(be):
    target = np.zeros((2, 3), dtype=np.float32)
    out = be.broadcast_to_shape_of(5, target)
    assert out.shape == (2, 3)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.full((2, 3), 5.0))
    rows = be.broadcast_to_shape_of(np.array([1, 2, 3]), target)
    np.testing.assert_array_equal(rows, [[1, 2, 3], [1, 2, 3]])
    # The result is a fresh array, not a broadcast view.
    assert rows.flags.writeable
    rows[0, 0] = 9
    assert rows[1, 0] == 1
    with pytest.raises(ValueError):
        be.broadcast_to_shape_of(np.array([1, 2]), target)


def test_cond_runs_only_the_chosen_branch(be):
    def boom():
        raise AssertionError("the other branch ran")

    assert be.cond(True, lambda: "yes", boom) == "yes"
    assert be.cond(False, boom, lambda: "no") == "no"
    assert be.cond(np.bool_(True), lambda: 1, boom) == 1
    assert be.cond(np.array(False), boom, lambda: 2) == 2


@pytest.mark.parametrize("shape", [(), (2,), (2, 3)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.bool_])
def test_create_variable(be, dtype, shape):
    type_ = TensorType(dtype, shape)
    stack = be.create_variable("s", VariableAllocation.FULL, type_, 6, 3)
    register = be.create_variable("r", VariableAllocation.REGISTER, type_, 6, 3)
    assert type(stack) is StackVariable
    assert type(register) is RegisterVariable
    for var, name in [(stack, "s"), (register, "r")]:
        assert var.name == name
        assert var.type == type_
        assert var.high_water == 0
        value = var.read(be.all_lanes(3))
        assert value.shape == (3,) + shape
        assert value.dtype == np.dtype(dtype)
        assert not value.any()
    assert stack.max_depth == 6
    assert stack.depth.tolist() == [0, 0, 0]


def test_create_variable_stacks_start_small(be):
    type_ = TensorType(np.float64, (2,))
    assert len(be.create_variable("s", VariableAllocation.FULL, type_, 1000, 5).stack) == 4
    assert len(be.create_variable("s", VariableAllocation.FULL, type_, 2, 5).stack) == 2
    assert len(be.create_variable("s", VariableAllocation.FULL, type_, 0, 5).stack) == 0


def test_equal_and_not_equal(be):
    a = np.array([1, 2, 3])
    np.testing.assert_array_equal(be.equal(a, np.array([1, 0, 3])), [True, False, True])
    np.testing.assert_array_equal(be.not_equal(a, np.array([1, 0, 3])), [False, True, False])
    np.testing.assert_array_equal(be.equal(a, 2), [False, True, False])
    np.testing.assert_array_equal(be.not_equal(a, 2), [True, False, True])
    grid = be.equal(np.array([[1], [2]]), np.array([1, 2]))
    np.testing.assert_array_equal(grid, [[True, False], [False, True]])
    assert be.equal(a, a).dtype == np.bool_


def test_full_mask(be):
    mask = be.full_mask(4)
    assert mask.dtype == np.bool_
    assert mask.shape == (4,)
    assert mask.all()
    assert be.full_mask(np.array(3)).shape == (3,)
    assert be.full_mask(0).shape == (0,)


def test_initial_program_counter(be):
    pc = be.initial_program_counter(np.array(5), np.int32)
    assert pc.shape == (5,)
    assert pc.dtype == np.int32
    assert not pc.any()
    assert be.initial_program_counter(3, np.int64).dtype == np.int64
    assert be.initial_program_counter(3, None).dtype == np.int64


@pytest.mark.parametrize(
    "dt1, dt2, merged",
    [
        (np.int32, np.int64, np.int64),
        (np.int64, np.int32, np.int64),
        (np.int32, np.int32, np.int32),
        (np.float32, np.float64, np.float64),
        (np.bool_, np.int32, np.int32),
        (np.int64, np.float64, np.float64),
    ],
)
def test_merge_dtypes_prefers_the_more_precise(be, dt1, dt2, merged):
    assert np.dtype(be.merge_dtypes(dt1, dt2)) == np.dtype(merged)
    assert np.dtype(be.merge_dtypes(np.dtype(dt1), np.dtype(dt2))) == np.dtype(merged)


def test_merge_dtypes_with_none(be):
    assert np.dtype(be.merge_dtypes(None, np.int32)) == np.int32
    assert np.dtype(be.merge_dtypes(np.float64, None)) == np.float64
    assert be.merge_dtypes(None, None) is None


@pytest.mark.parametrize(
    "s1, s2, merged",
    [
        ([2, 1], [3], [2, 3]),
        ([], [4, 5], [4, 5]),
        ([4, 5], [], [4, 5]),
        ([1, 3], [2, 1], [2, 3]),
        ([5], [5], [5]),
        ([None, 3], [2, 3], [2, 3]),
        ([2, 3], [None, 3], [2, 3]),
        ([None], [None], [None]),
        ([None], [1], [None]),
        ([3], [None], [3]),
        ([None], [3], [3]),
    ],
)
def test_merge_shapes_broadcasts(be, s1, s2, merged):
    assert list(be.merge_shapes(s1, s2)) == merged


def test_merge_shapes_with_an_unknown_shape(be):
    assert list(be.merge_shapes(None, [2, 3])) == [2, 3]
    assert list(be.merge_shapes([2, 3], None)) == [2, 3]
    assert be.merge_shapes(None, None) is None


@pytest.mark.parametrize("s1, s2", [([2], [3]), ([2, 3], [3, 3]), ([4, 1], [1, 2, 5])])
def test_merge_shapes_raises_value_error_when_incompatible(be, s1, s2):
    with pytest.raises(ValueError):
        be.merge_shapes(s1, s2)


def test_merge_shapes_of_one_and_unknown_is_unknown(be):
    assert list(be.merge_shapes([1], [None])) == [None]


@FAST
@given(
    s1=st.lists(st.sampled_from([1, 2, 3]), max_size=3),
    s2=st.lists(st.sampled_from([1, 2, 3]), max_size=3),
)
def test_merge_shapes_agrees_with_numpy_on_known_shapes(s1, s2):
    be = NumpyBackend()
    try:
        expected = list(np.broadcast_shapes(tuple(s1), tuple(s2)))
    except ValueError:
        with pytest.raises(ValueError):
            be.merge_shapes(s1, s2)
        return
    assert list(be.merge_shapes(s1, s2)) == expected
    assert list(be.merge_shapes(s2, s1)) == expected


def test_prepare_for_cond_is_the_identity(be):
    state = (np.arange(3), [np.ones(2)])
    assert be.prepare_for_cond(state) is state


def test_reduce_min(be):
    assert be.reduce_min(np.array([4, 2, 7])) == 2
    assert be.reduce_min(np.array([[3.5, -1.0], [0.0, 2.0]])) == -1.0
    with pytest.raises(ValueError):
        be.reduce_min(np.zeros(0))


def test_run_on_dummies_passes_ones_of_the_batched_types(be):
    seen = []

    def primitive(x, pair):
        seen.append((x, pair))
        return x * 2, np.add(pair[0], pair[1])

    x_type = Type(TensorType(np.float32, (5, 3)))
    pair_type = Type((TensorType(np.int32, (5,)), TensorType(np.int64, (5,))))
    doubled, summed = be.run_on_dummies(primitive, [x_type, pair_type])
    ((x, pair),) = seen
    assert x.shape == (5, 3) and x.dtype == np.float32 and (x == 1).all()
    assert isinstance(pair, tuple) and len(pair) == 2
    assert pair[0].dtype == np.int32 and pair[1].dtype == np.int64
    assert be.type_of(doubled) == TensorType(np.float32, (5, 3))
    assert be.type_of(summed) == TensorType(np.int64, (5,))


def test_run_on_dummies_silences_floating_point_warnings(be):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = be.run_on_dummies(
            lambda x: np.log(x - 1.0) / (x - 1.0), [Type(TensorType(np.float64, (2,)))]
        )
    assert out.shape == (2,)


def test_static_value_is_the_value_itself(be):
    t = np.arange(3)
    assert be.static_value(t) is t
    assert be.static_value(4) == 4


def test_switch_case_runs_only_the_selected_branch(be):
    calls = []

    def branch(i):
        def run():
            calls.append(i)
            return i * 10

        return run

    branches = [branch(i) for i in range(3)]
    assert be.switch_case(1, branches) == 10
    assert be.switch_case(np.int32(2), branches) == 20
    assert be.switch_case(np.array(0), branches) == 0
    assert calls == [1, 2, 0]


def test_type_of_arrays_keeps_the_whole_shape(be):
    assert be.type_of(np.zeros((4, 3), np.float32)) == TensorType(np.float32, (4, 3))
    assert be.type_of(np.zeros(4, np.bool_)) == TensorType(np.bool_, (4,))
    assert be.type_of(np.zeros((), np.int32)) == TensorType(np.int32, ())
    t = be.type_of(np.zeros((2, 5), np.int64))
    assert np.dtype(t.dtype) == np.int64 and t.shape == (2, 5)


def test_type_of_python_constants(be):
    assert be.type_of(3) == TensorType(np.int64, ())
    assert be.type_of(2.5) == TensorType(np.float64, ())
    assert be.type_of(True) == TensorType(np.bool_, ())
    assert be.type_of([1, 2]) == TensorType(np.int64, (2,))


def test_type_of_prefers_the_preferred_dtype_for_constants_only(be):
    assert be.type_of(3, preferred_dtype=np.int32) == TensorType(np.int32, ())
    assert be.type_of(1.0, preferred_dtype=np.float32) == TensorType(np.float32, ())
    assert be.type_of([1, 2], preferred_dtype=np.float64) == TensorType(np.float64, (2,))
    array = np.zeros(3, dtype=np.int64)
    assert be.type_of(array, preferred_dtype=np.int32) == TensorType(np.int64, (3,))


def test_where_with_a_per_row_condition(be):
    condition = np.array([True, False, True, False])
    x = np.arange(12).reshape(4, 3)
    y = -np.arange(12).reshape(4, 3)
    out = be.where(condition, x, y)
    assert out.shape == (4, 3)
    np.testing.assert_array_equal(out, np.stack([x[0], y[1], x[2], y[3]]))


def test_where_with_a_full_condition_and_broadcast_false_values(be):
    x = np.arange(6).reshape(2, 3)
    condition = x % 2 == 0
    np.testing.assert_array_equal(be.where(condition, x, -1), [[0, -1, 2], [-1, 4, -1]])
    rows = be.where(np.array([False, True]), x, np.array([7, 8, 9]))
    np.testing.assert_array_equal(rows, [[7, 8, 9], [3, 4, 5]])


def test_where_per_row_over_deeper_values(be):
    x = np.ones((3, 2, 2))
    out = be.where(np.array([True, False, True]), x, 0.0)
    np.testing.assert_array_equal(out.sum(axis=(1, 2)), [4.0, 0.0, 4.0])


def test_while_loop(be):
    result = be.while_loop(lambda i, total: i < 5, lambda i, total: (i + 1, total + i), (0, 0))
    assert tuple(result) == (5, 10)
    start = (7, 1)
    assert be.while_loop(lambda i, total: i < 5, lambda i, total: (0, 0), start) is start


def test_wrap_straightline_callable_returns_the_callable(be):
    def f(x):
        return x + 1

    assert be.wrap_straightline_callable(f) is f


# ---------------------------------------------------------------------------
# The VM core


def test_all_lanes(be):
    lanes = be.all_lanes(4)
    assert lanes.index is None
    assert lanes.count == 4
    assert lanes.batch_size == 4
    assert lanes.rows().tolist() == [0, 1, 2, 3]


def test_lanes_at(be):
    pc = np.array([0, 2, 0, 1, 2])
    at0 = be.lanes_at(pc, 0)
    assert at0.index.tolist() == [0, 2]
    assert at0.count == 2 and at0.batch_size == 5
    assert be.lanes_at(pc, 2).rows().tolist() == [1, 4]
    nobody = be.lanes_at(pc, 3)
    assert nobody.count == 0 and nobody.rows().tolist() == []
    everyone = be.lanes_at(np.array([1, 1, 1]), 1)
    assert everyone.index is None and everyone.count == 3


@FAST
@given(pc=st.lists(st.integers(0, 3), min_size=1, max_size=8), block=st.integers(0, 3))
def test_lanes_at_names_the_threads_at_the_block(pc, block):
    be = NumpyBackend()
    lanes = be.lanes_at(np.array(pc), block)
    expected = [i for i, p in enumerate(pc) if p == block]
    assert lanes.rows().tolist() == expected
    assert lanes.count == len(expected)
    assert lanes.batch_size == len(pc)
    assert (lanes.index is None) == (len(expected) == len(pc))


def test_gather(be):
    value = np.arange(10).reshape(5, 2)
    assert be.gather(value, be.all_lanes(5)) is value
    np.testing.assert_array_equal(be.gather(value, lanes_of([1, 3], 5)), value[[1, 3]])


def test_place_broadcasts_a_scalar(be):
    lanes = lanes_of([0, 2, 3], 5)
    out = be.place(7, lanes, TensorType(np.int64, (2, 3)))
    assert out.shape == (3, 2, 3)
    assert out.dtype == np.int64
    assert (out == 7).all()
    per_event = be.place(np.array([1.0, 2.0]), be.all_lanes(4), TensorType(np.float64, (2,)))
    np.testing.assert_array_equal(per_event, np.tile([1.0, 2.0], (4, 1)))


def test_place_keeps_a_full_value(be):
    value = np.arange(6, dtype=np.int32).reshape(3, 2)
    out = be.place(value, be.all_lanes(3), TensorType(np.int32, (2,)))
    np.testing.assert_array_equal(out, value)
    assert out.dtype == np.int32


@pytest.mark.parametrize(
    "value, dtype",
    [
        (np.array([1, 2], dtype=np.int64), np.int32),
        (np.array([1, 2], dtype=np.int32), np.int64),
        (np.array([0.5, 1.5], dtype=np.float64), np.float32),
        (np.array([1, 2], dtype=np.int64), np.float64),
        (np.array([True, False]), np.int64),
        (3, np.int32),
    ],
)
def test_place_casts_within_a_kind(be, value, dtype):
    out = be.place(value, be.all_lanes(2), TensorType(dtype, ()))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.broadcast_to(np.asarray(value).astype(dtype), (2,)))


@pytest.mark.parametrize(
    "value, dtype",
    [
        (np.array([1.5, 2.0]), np.int64),
        (np.array([1.0, 2.0], dtype=np.float32), np.int32),
        (2.5, np.int32),
        (np.array([1, 0]), np.bool_),
        (np.array([1 + 2j, 0j]), np.float64),
    ],
)
def test_place_refuses_to_cast_across_kinds(be, value, dtype):
    with pytest.raises(TypeError):
        be.place(value, be.all_lanes(2), TensorType(dtype, ()))


@pytest.mark.parametrize(
    "value, count, shape",
    [
        (np.zeros((3, 2)), 4, (2,)),
        (np.zeros(3), 2, ()),
        (np.zeros((2, 3)), 2, (2,)),
        (np.zeros((2, 2, 2)), 2, (2,)),
    ],
)
def test_place_raises_on_an_incompatible_shape(be, value, count, shape):
    with pytest.raises(ValueError):
        be.place(value, be.all_lanes(count), TensorType(np.float64, shape))


def test_select(be):
    cond = np.array([True, False, True])
    np.testing.assert_array_equal(be.select(cond, 4, 9), [4, 9, 4])
    np.testing.assert_array_equal(
        be.select(cond, np.array([1, 2, 3]), np.array([-1, -2, -3])), [1, -2, 3]
    )


def test_next_block_is_the_smallest_program_counter(be):
    block = be.next_block(np.array([3, 1, 2, 1]))
    assert block == 1
    assert type(block) is int
    assert be.next_block(np.array([5], dtype=np.int32)) == 5


def test_parallel_copy_through_all_lane_reads(be):
    """(a, b) = (b, a) written back one variable at a time, as the VM does."""
    type_ = TensorType(np.int64, ())
    everyone = be.all_lanes(3)
    a = be.create_variable("a", VariableAllocation.REGISTER, type_, 4, 3)
    b = be.create_variable("b", VariableAllocation.FULL, type_, 4, 3)
    a.update(be.place(np.array([1, 2, 3]), everyone, type_), everyone)
    b.update(be.place(np.array([10, 20, 30]), everyone, type_), everyone)
    new_a, new_b = b.read(everyone), a.read(everyone)
    a.update(be.place(new_a, everyone, type_), everyone)
    b.push(be.place(new_b, everyone, type_), everyone)
    assert a.read(everyone).tolist() == [10, 20, 30]
    assert b.read(everyone).tolist() == [1, 2, 3]


def test_all_lane_read_is_a_snapshot_across_full_width_writes(be):
    type_ = TensorType(np.float64, (2,))
    everyone = be.all_lanes(2)
    var = be.create_variable("v", VariableAllocation.FULL, type_, 4, 2)
    var.update(be.place(1.0, everyone, type_), everyone)
    first = var.read(everyone)
    var.push(be.place(2.0, everyone, type_), everyone)
    second = var.read(everyone)
    var.update(be.place(3.0, everyone, type_), everyone)
    third = var.read(everyone)
    var.pop(everyone)
    assert (first == 1.0).all() and (second == 2.0).all() and (third == 3.0).all()
    assert (var.read(everyone) == 1.0).all()


def test_where_aligns_a_per_row_condition_with_the_larger_operand(be):
    result = be.where(np.array([True, False, True]), 0, np.arange(9).reshape(3, 3))
    np.testing.assert_array_equal(result, [[0, 0, 0], [3, 4, 5], [0, 0, 0]])

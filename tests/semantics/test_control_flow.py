"""Control flow exactly as Python runs it, per example, on every backend.

``for ... in range(...)`` evaluates its arguments once, before the loop; a zero step is
an error; ``and``/``or``/``x if c else y`` and chained comparisons evaluate an operand
only for the examples where Python evaluates it (``n >= 0 and 2 ** n > 5`` must not
compute ``2 ** -3``), and give Python's value, not a bool. The oracle is the plain
function run on each example alone.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import pcbatch
from pcbatch import api
from tests import backends, tiers
from tests.semantics import control_flow_src as src
from tests.semantics import numpy_star_src


def _per_example(fn, *args):
    """The plain function on each example (batched callees run plainly too)."""
    args = [np.asarray(a) for a in args]
    api._dry_run.depth = getattr(api._dry_run, "depth", 0) + 1
    try:
        results = [fn.python_function(*(a[j] for a in args)) for j in range(len(args[0]))]
    finally:
        api._dry_run.depth -= 1
    if isinstance(results[0], tuple):
        return tuple(np.asarray(r) for r in zip(*results))
    return np.asarray(results)


def _check(fn, backend_name, *args):
    expected = _per_example(fn, *args)
    with warnings.catch_warnings():
        # NumPy warns (``divide by zero``) where an untaken operand runs for an example.
        warnings.simplefilter("error", RuntimeWarning)
        actual = fn(*[np.asarray(a) for a in args], backend=backends.backend(backend_name))
    for got, want in zip(backends.leaves(actual), backends.leaves(expected)):
        backends.assert_close(np.asarray(got), want, backend_name)


_V = [[1.0, 2.0, -3.0], [4.0, 5.0, 6.0], [-1.0, 0.0, 2.0]]
_W = [[1.0, 1.0, 1.0], [0.0, 2.0, 0.0], [3.0, 3.0, 3.0]]

CASES = [
    # for / range
    ("rebind_stop", [0, 4, 7]),
    ("rebind_start_and_step", [0, 3, 39, 50], [1, 2, 5, 1]),
    ("rebind_loop_variable", [1, 3, 5]),
    ("loop_variable_is_the_bound", [0, 1, 4, 6]),
    ("loop_variable_after", [0, 1, 4]),
    ("counting_down", [5, -3, 10], [1, 2, 3]),
    ("dynamic_step", [1, 2, 11], [3, 4, 1]),
    ("for_with_break_and_continue", [0, 5, 9, 20], [1, 2, 1, 3]),
    # for over sequences
    ("over_items", _V),
    ("over_rows", np.arange(18.0).reshape(3, 3, 2)),
    ("over_enumerate", _V, [0, 5, -2]),
    ("over_zip", _V, _W),
    ("over_enumerate_of_zip", _V, _W),
    ("over_reversed", _V),
    ("over_a_reversed_range", [0, 1, 5, 10]),
    ("over_a_reversed_range_with_a_step", [0, 10, 10, -3, 5], [10, 0, 0, 7, 5], [3, -3, 4, 2, -1]),
    ("over_a_reversed_range_of_small_ints", np.array([0, 5, 20, 22], np.uint8)),
    ("over_an_enumerated_range", [0, 3, 5, 11]),
    ("over_a_range_zipped_with_rows", _V, [0, 2, 9]),
    ("over_a_tuple", np.array([1.0, 2.0, 3.0], np.float32)),
    ("over_a_global_list", np.array([1.0, 2.0, 3.0], np.float32)),
    ("over_a_global_array", np.array([1.0, 2.0, 3.0], np.float32)),
    ("over_items_with_break_and_continue", [[1, 0, -3], [4, 5, 6], [-1, 0, 2]]),
    ("over_nested", np.arange(18.0).reshape(3, 3, 2)),
    ("over_a_rebound_sequence", _V),
    ("over_an_array_changed_in_place", _V),
    ("over_a_tuple_evaluated_first", [1.0, -2.0, 3.5]),
    ("over_pairs", [1.0, 5.0, 3.0]),
    ("over_a_tuple_variable", [1.5, -2.0, 3.0], [3, 4, -5]),
    ("over_no_items", _V),
    ("choosing_between_tuples", [1, 2, 3]),
    ("enumerate_counts_in_python_ints", np.array([[250, 1, 2], [3, 4, 5], [255] * 3], np.uint8)),
    # short-circuits
    ("power_and", [-3, 0, 2, 3]),
    ("power_or", [-3, 0, 2, 3]),
    ("power_ternary", [-3, 0, 2, 3]),
    ("power_return_ternary", [-3, 0, 2, 3]),
    ("guarded_division", [7, 7, -9, 0], [2, 0, 4, 0]),
    ("guarded_modulo", [7, 8, -9, 0], [2, 0, 3, 0]),
    ("not_of_short_circuit", [-1, 0, 2, 5]),
    ("nested_ternaries", [-3, -1, 0, 2]),
    ("chain_with_recursion", [-2, 0, 3]),
    ("chain_with_power", [-2, 0, 1, 3]),
    ("chain_three", [-9, 0, 1, 2, 3, 5]),
    ("chain_with_a_plain_call_in_the_middle", [-2, 0, 3, 5]),
    ("or_value", [0, 3, -1], [5, 6, 0]),
    ("and_value", [0, 3, -1], [5, 6, 0]),
    ("or_value_with_call", [0, 3, 0], [4, -1, 0]),
    ("or_reading_its_target", [3, 4, 0, 8]),
    ("and_reading_its_target", [3, 4, 0, 5]),
    ("short_circuit_in_while", [0, 2, 3, 10]),
    ("short_circuit_in_if", [0, 5, 6, -4]),
    ("short_circuit_in_elif", [-1, 0, 4, 7, 9]),
    ("pure_short_circuits", [0, 3, -2, 4], [1, 3, -5, 2]),
    # sum / any / all of a comprehension
    ("sum_of_a_generator", _V),
    ("sum_of_a_list_with_a_start", _V, _W),
    ("sum_of_nested_generators", _V),
    ("sum_over_a_counted_range", [0, 3, 8]),
    ("comprehension_names_do_not_leak", np.array(_V, np.float32)),
    ("any_and_all_in_tests", _V, [0.5, 2.0, -0.5]),
    ("any_stops_at_the_first_true_item", np.abs(_V) + 1.0, [[0, 7], [2, 9], [1, -8]]),
    ("reductions_in_one_statement", _V, _W),
    ("sum_of_rows_from_an_array", np.arange(18.0).reshape(3, 3, 2)),
    # max / min of a comprehension
    ("max_of_a_generator", _V),
    ("min_of_a_list_with_a_default", [[-1, -2, 0], [4, 5, 6], [-3, 2, 2]]),
    ("max_over_a_counted_range", [0, 1, 3, 6]),
    ("max_of_comparisons", _V),
    ("max_and_min_keep_pythons_first_item",
     np.array([[np.nan, 1.0, 2.0], [1.0, np.nan, 0.5], [0.0, -0.0, 0.0]], np.float32)),
    ("max_of_pairs_of_items", _V, _W),
    ("reductions_over_constants_of_per_example_items", [-1.0, 0.5, 2.5, 3.5]),
]


# Every case on NumPy and Torch; on JAX and TensorFlow the fast tier takes the cases in
# turn (tests/tiers.py).
@pytest.mark.parametrize(
    ("case", "backend_name"),
    tiers.in_turn([pytest.param(c, id=c[0]) for c in CASES], backends.BACKEND_NAMES),
)
def test_matches_python_per_example(case, backend_name):
    name, *args = case
    _check(getattr(src, name), backend_name, *args)


@pytest.mark.parametrize("backend_name", backends.BACKEND_NAMES)
def test_loops_over_items_use_pythons_len_and_min_beside_numpys_star_import(backend_name):
    # `from numpy import *` binds NumPy's min: zip's length is Python's min all the same
    v, w = [[1.0, 2.0, -3.0], [4.0, 5.0, 6.0]], [[1.0, 1.0], [0.0, 2.0]]
    _check(numpy_star_src.dot_over_zip, backend_name, v, w)
    _check(numpy_star_src.weighted_reversed, backend_name, v)


@backends.backend_param
def test_a_comprehension_python_may_skip_is_refused_at_its_line(backend_name):
    fn = src.a_comprehension_behind_and
    with pytest.raises(pcbatch.AutobatchSyntaxError) as info:
        fn(np.array(_V), np.array([1.0, 0.0, 2.0]), backend=backends.backend(backend_name))
    assert f"line {_marked_line(fn, 'ERROR comprehension')}" in str(info.value)
    assert "for loop" in str(info.value)


@backends.backend_param
def test_a_sum_of_arrays_from_zero_says_to_start_from_an_array(backend_name):
    # Python's 0 + row is an array; a batched variable keeps one shape
    fn = src.sum_of_rows_from_zero
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(np.arange(18.0).reshape(3, 3, 2), backend=backends.backend(backend_name))
    message = str(info.value)
    assert f"control_flow_src.py:{_marked_line(fn, 'ERROR sum of rows')}" in message
    assert "sum(..., np.zeros(n))" in message and "__comp" not in message


@backends.backend_param
def test_max_with_a_key_is_refused_at_its_line(backend_name):
    fn = src.max_with_a_key
    with pytest.raises(pcbatch.AutobatchSyntaxError) as info:
        fn(np.array(_V), backend=backends.backend(backend_name))
    assert f"line {_marked_line(fn, 'ERROR key')}" in str(info.value)
    assert "no key=" in str(info.value)


@backends.backend_param
def test_max_of_no_items_is_pythons_value_error_for_those_examples(backend_name):
    fn = src.max_of_no_items
    v = np.array([[11.0, 12.0], [1.0, 2.0], [13.0, 0.0]])
    with pytest.raises(ValueError, match=r"max\(\) (arg is an empty sequence|iterable "
                       r"argument is empty)") as info:
        fn(v, backend=backends.backend(backend_name))
    assert f"control_flow_src.py:{_marked_line(fn, 'ERROR empty')}" in str(info.value)
    assert "default=" in str(info.value)
    result, status = fn(v, backend=backends.backend(backend_name), return_status=True)
    assert [pcbatch.LaneStatus(s).name for s in np.asarray(status)] == ["OK", "ERROR", "OK"]
    np.testing.assert_array_equal(np.asarray(result)[[0, 2]], [12.0, 13.0])


# Branches on shapes: the side Python does not run may not run on these shapes at all
# (v.trace() of a vector, v[5] of a short vector); it is neither typed nor compiled.
SHAPE_CASES = [
    ("branch_on_a_shape", _V),
    ("branch_on_a_shape", np.arange(12.0).reshape(3, 2, 2)),
    ("shape_tests_in_an_elif_chain", np.arange(6.0).reshape(3, 2)),
    ("shape_tests_in_an_elif_chain", np.arange(21.0).reshape(3, 7)),
    ("shape_tests_in_an_elif_chain", np.arange(3.0).reshape(3, 1)),
    ("shape_test_in_a_called_function", np.arange(12.0).reshape(3, 2, 2)),
    ("shape_test_in_a_called_function", _V),
    ("shape_and_value_test", np.ones((3, 4)), [1, -1, 2]),
    ("shape_tests_in_conditional_expressions", _V),
    ("shape_tests_in_conditional_expressions", np.arange(12.0).reshape(3, 2, 2)),
    ("shape_test_short_circuits_as_python_does", [1.5, -2.0, 0.0]),
    ("shape_test_short_circuits_as_python_does", _V),
]


@pytest.mark.parametrize(
    ("case", "backend_name"),
    tiers.in_turn([pytest.param(c, id=f"{c[0]}-{np.ndim(c[1])}d") for c in SHAPE_CASES],
                  backends.BACKEND_NAMES),
)
def test_a_branch_on_shapes_compiles_only_the_side_python_runs(case, backend_name):
    name, *args = case
    _check(getattr(src, name), backend_name, *args)


DTYPE_CASES = [
    np.array([[100, -7, 3], [127, 0, 1]], np.int8),
    np.array([[2**62 + 1, 2**61 + 3, -5], [7, 2**53 + 1, 0]]),
    np.array([[1.5, -2.0, 0.25], [3.0, 0.0, 1.0]], np.float32),
    np.array([[True, False, True], [False, False, True]]),
]


@backends.backend_param
@pytest.mark.parametrize("name", ["branch_on_a_dtype", "dtype_tests_in_conditional_expressions"])
@pytest.mark.parametrize("v", DTYPE_CASES, ids=["int8", "int64", "float32", "bool"])
def test_a_branch_on_dtypes_compiles_only_the_side_python_runs(name, v, backend_name):
    function = getattr(src, name)
    if name == "dtype_tests_in_conditional_expressions" and v.dtype == bool:
        v = v.astype(np.uint8)  # np.finfo(bool) raises, in Python too
    got = function(v, backend=backends.backend(backend_name))
    for actual, want in zip(backends.leaves(got), backends.leaves(function(v, dry_run=True))):
        actual, want = np.asarray(actual), np.asarray(want)
        assert actual.dtype == want.dtype, (actual.dtype, want.dtype)
        np.testing.assert_array_equal(actual, want)


@backends.backend_param
def test_the_dtype_of_a_python_number_is_refused_at_the_users_line(backend_name):
    with pytest.raises(pcbatch.TypeInferenceError, match="no attribute 'dtype'") as info:
        src.dtype_of_a_python_number(np.array([2, 3]), backend=backends.backend(backend_name))
    line = _marked_line(src.dtype_of_a_python_number, "ERROR")
    assert f"control_flow_src.py:{line}" in str(info.value)


@backends.backend_param
def test_loops_with_else_run_it_where_python_does(backend_name):
    v = np.array([[1.0, -2, 3], [4, 5, 6], [-1, 1, 2], [2, 0, -2]])
    _check(src.search_with_for_else, backend_name, v, [3.0, 5.0, 9.0, -2.0])
    _check(src.nested_loops_with_else, backend_name, v)


RAISES = [
    ("checked_sqrt", [4.0, 9.0], [4.0, -1.0, 9.0], ValueError, "ERROR raise"),
    ("asserted_below_the_limit", [1.0, 2.0], [1.0, 20.0, 3.0], AssertionError,
     "ERROR assert"),
    ("raises_in_a_while_loop", [1, 3], [1, 9, 3], RuntimeError, "ERROR loop"),
    ("calls_the_validated_helper", [1.0, 2.0], [1.0, 5.0, 2.0], ValueError, "ERROR helper"),
]


@backends.backend_param
@pytest.mark.parametrize(("name", "fine", "failing", "error", "marker"), RAISES,
                         ids=[r[0] for r in RAISES])
def test_raise_and_assert_fail_the_examples_that_reach_them(
    name, fine, failing, error, marker, backend_name
):
    """``raise`` in a branch or loop, a failed ``assert``, a raise in a batched helper:
    Python's exception where an example reaches it, nothing elsewhere (they were
    rejected at the line); ``return_status=True`` marks those examples ERROR."""
    fn, b = getattr(src, name), backends.backend(backend_name)
    _check(fn, backend_name, fine)
    with pytest.raises(error):
        fn(np.array(failing), dry_run=True)
    with pytest.raises(error) as info:
        fn(np.array(failing), backend=b)
    where = src.validated_helper if name == "calls_the_validated_helper" else fn
    line = f"{src.__file__}:{_marked_line(where, marker)}"
    assert any(line in note for note in getattr(info.value, "__notes__", [line]))
    result, status = fn(np.array(failing), backend=b, return_status=True)
    assert [pcbatch.LaneStatus(s).name for s in np.asarray(status)] == ["OK", "ERROR", "OK"]
    expected = fn(np.array(failing)[[0, 2]], dry_run=True)
    backends.assert_close(np.asarray(result)[[0, 2]], expected, backend_name)


def _marked_line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, line in enumerate(lines) if marker in line)


@backends.backend_param
def test_a_zero_step_at_run_time_raises_pythons_value_error_at_the_users_line(backend_name):
    args = np.array([1, 2, 3]), np.array([1, 0, 2])
    with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero") as info:
        src.dynamic_step(*args, backend=backends.backend(backend_name))
    line = _marked_line(src.dynamic_step, "MARK: dynamic step")
    assert f"{src.__file__}:{line} in dynamic_step" in str(info.value)


@backends.backend_param
def test_a_zero_step_of_a_reversed_range_raises_pythons_value_error(backend_name):
    fn = src.over_a_reversed_range_with_a_step
    args = np.array([0, 10]), np.array([10, 0]), np.array([3, 0])
    with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero") as info:
        fn(*args, backend=backends.backend(backend_name))
    assert f"{src.__file__}:{_marked_line(fn, 'MARK: reversed range')}" in str(info.value)


@backends.backend_param
def test_a_zero_step_where_no_example_reaches_the_loop_is_no_error(backend_name):
    # the check runs only for the threads at the loop, as Python's range() call does
    _check(src.step_in_a_branch, backend_name, [3, 0, -1, 4], [2, 0, 0, 3])


@pytest.mark.parametrize("name", ["literal_zero_step", "literal_negative_zero_step"])
def test_a_literal_zero_step_is_rejected_at_the_users_line(name):
    fn = pcbatch.Context().batch(getattr(src, name))
    with pytest.raises(pcbatch.AutobatchSyntaxError, match="must not be zero") as info:
        fn(np.array([3, 4]))
    assert info.value.filename == src.__file__
    assert info.value.lineno == _marked_line(getattr(src, name), "# ERROR")


def test_short_circuits_that_cannot_fail_stay_one_eager_block():
    """Names, constants, comparisons and +, -, * need no branch: the cheap per-example
    selection, one block for the whole function."""
    with pcbatch.profile() as prof:
        src.pure_short_circuits(np.array([0, 3]), np.array([1, 3]))
    assert list(prof.block_counts) == ["pure_short_circuits.entry"]


def test_a_chained_comparison_calls_its_middle_operand_once():
    # on NumPy a plain helper runs once for the whole batch (it is vectorized); the
    # first call compiles, and type inference calls the helper too: count a later call
    src.chain_with_a_plain_call_in_the_middle(np.array([-2, 0, 5]))
    src.draw.calls = 0
    got = src.chain_with_a_plain_call_in_the_middle(np.array([-2, 0, 5]))
    np.testing.assert_array_equal(got, [False, True, False])
    assert src.draw.calls == 1


@pytest.mark.parametrize(("name", "error", "message"), [
    ("zip_strict", pcbatch.AutobatchSyntaxError, "zip\\(strict=True\\) is not supported"),
    ("zip_of_rows", pcbatch.AutobatchSyntaxError, "for column in m.T"),
    ("over_a_rebound_array_changed_in_place", pcbatch.AutobatchSyntaxError,
     "'v', which is rebound inside the loop.*np.array\\(v\\)"),
    ("over_a_view_of_an_array_changed_in_place", pcbatch.AutobatchSyntaxError,
     "'u\\[1:\\]', which is a view of it.*np.array\\(u\\[1:\\]\\)"),
    ("choosing_a_tuple_or_a_number", pcbatch.TypeInferenceError,
     "chooses between a tuple of 2 items and a non-tuple"),
    ("a_row_changed_in_place", pcbatch.TypeInferenceError,
     "'for row in m' makes 'row' a view of an item of 'm'.*row = np.array\\(m\\[i\\]\\)"),
])
def test_a_for_over_items_that_python_would_run_otherwise_is_rejected_at_its_line(
    name, error, message
):
    fn = pcbatch.Context().batch(getattr(src, name))
    arity = len(inspect.signature(fn.python_function).parameters)
    with pytest.raises(error, match=message) as info:
        fn(*[np.ones((2, 3, 2))] * arity)
    line = _marked_line(getattr(src, name), "# ERROR")
    if isinstance(info.value, SyntaxError):
        assert (info.value.filename, info.value.lineno) == (src.__file__, line)
    else:  # found once types are known, at the loop's line
        assert f"{src.__file__}:{line} in {name}" in str(info.value)


@backends.backend_param
def test_a_for_over_a_number_raises_pythons_type_error_at_its_line(backend_name):
    fn = pcbatch.Context().batch(src.over_a_number)
    with pytest.raises(TypeError, match="not iterable") as info:
        fn(np.array([1.0, 2.0]), backend=backends.backend(backend_name))
    line = _marked_line(src.over_a_number, "# ERROR")
    assert f"{src.__file__}:{line} in over_a_number" in str(info.value)
    assert "the length of x" in str(info.value)  # not the rewritten loop's hidden names

"""Every misuse at call time ends in a clear error naming the user's function and line.

One test per bad input of issue 7, on every backend: the error's type, and a
message that names the function (and the source line, where one applies).
Inputs that are not errors (empty batches, NaN and inf) must give what the
per-example run gives.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from pcbatch.vm import machine
from tests.backends import EAGER_NAMES, assert_close, backend, backend_param
from tests.reliability import bad_src


def _bad_lines(fn) -> list:
    lines, first = inspect.getsourcelines(fn)
    return [f"bad_src.py:{first + i}" for i, line in enumerate(lines) if "# BAD" in line]


def _batched(fn, type_inference=None):
    return pcbatch.Context().batch_uncurried(fn, type_inference)


def _assert_same(actual, expected, backend_name):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, backend_name)
    else:
        assert_close(actual, expected, backend_name)


@backend_param
@pytest.mark.parametrize("dry_run", [False, True])
def test_different_batch_sizes_name_the_function_and_both_arguments(backend_name, dry_run):
    add = _batched(bad_src.add)
    with pytest.raises(pcbatch.BatchSizeError) as info:
        add(np.ones(3), np.ones(4), backend=backend(backend_name), dry_run=dry_run)
    message = str(info.value)
    assert "add()" in message and "'x'" in message and "'y'" in message
    assert "3" in message and "4" in message


@backend_param
@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("countdown", [np.zeros(0, dtype=np.int64)]),
        ("halve_until_small", [np.zeros(0)]),
        ("add", [np.zeros((0, 2)), np.float64(1.0)]),
    ],
)
def test_zero_size_batch_returns_empty_results(backend_name, name, args):
    fn = _batched(getattr(bad_src, name))
    expected = fn(*args, dry_run=True)
    actual = fn(*args, backend=backend(backend_name))
    _assert_same(actual, expected, backend_name)
    for leaf in expected if isinstance(expected, tuple) else (expected,):
        assert np.shape(leaf)[0] == 0


@backend_param
def test_result_not_matching_type_inference_names_function_and_line(backend_name):
    fn = _batched(bad_src.float_result, bad_src.int_result_types)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(np.ones(3), backend=backend(backend_name))
    message = str(info.value)
    assert "float_result" in message and "type_inference" in message
    assert _bad_lines(bad_src.float_result)[0] in message


@pytest.mark.parametrize(
    "value", [object(), {"a": 1}, [None, 1.0]], ids=["object", "dict", "None"]
)
def test_argument_that_is_not_an_array_of_numbers(value):
    add = _batched(bad_src.add)
    with pytest.raises(TypeError, match=r"add\(\): argument 'x'.*batched argument"):
        add(value, np.ones(3))
    with pytest.raises(TypeError, match=r"add\(\): argument 'x'.*batched argument"):
        add(value, np.ones(3), dry_run=True)


def test_a_text_argument_used_as_a_number_is_a_type_error_at_its_line():
    """Text is fixed for the call (tests/semantics/test_statics.py); ``x + y`` with text
    is Python's TypeError per example, refused at the line before anything runs."""
    add = _batched(bad_src.add)
    with pytest.raises(pcbatch.StaticValueError, match="'x' is 'abc' in this call") as info:
        add("abc", np.ones(3))
    assert isinstance(info.value, TypeError) and info.value.filename == bad_src.__file__
    with pytest.raises(TypeError):
        add("abc", np.ones(3), dry_run=True)


@backend_param
@pytest.mark.parametrize("name", ["halve_until_small", "nan_loop", "add"])
def test_nan_and_inf_propagate_like_numpy(backend_name, name):
    fn = _batched(getattr(bad_src, name))
    x = np.array([np.nan, np.inf, -np.inf, 3.0, 0.25])
    args = [x] * len(inspect.signature(fn).parameters)
    with np.errstate(invalid="ignore"):
        expected = fn(*args, dry_run=True)
        actual = fn(*args, backend=backend(backend_name))
    _assert_same(actual, expected, backend_name)


@backend_param
@pytest.mark.parametrize("name", ["deep", "deep_then_call"])
def test_stack_overflow_names_the_function(backend_name, name):
    fn = getattr(bad_src, name)
    with pytest.raises(pcbatch.StackOverflowError) as info:
        fn(np.array([3, 40]), backend=backend(backend_name))
    err = info.value
    assert err.function == name and f"'{name}'" in str(err)
    assert err.max_stack_depth == machine.DEFAULT_MAX_STACK_DEPTH
    assert err.suggested_depth is not None and err.suggested_depth >= 40
    ok = fn(np.array([3, 40]), backend=backend(backend_name), max_stack_depth=45)
    assert_close(ok, fn(np.array([3, 40]), dry_run=True), backend_name)


@backend_param
@pytest.mark.parametrize("name", ["never_ends", "recurses_forever"])
def test_run_that_never_ends_stops_at_max_steps_naming_its_lines(backend_name, name):
    fn = getattr(bad_src, name)
    fn = fn if isinstance(fn, pcbatch.BatchedFunction) else _batched(fn)
    with pytest.raises(pcbatch.StepLimitError) as info:
        fn(np.array([3, 40, 5]), backend=backend(backend_name), max_steps=500)
    message = str(info.value)
    assert f"{name}()" in message and "max_steps=500" in message
    assert "3 thread(s) still running" in message
    assert any(line in message for line in _bad_lines(fn)), message


@backend_param
def test_exception_in_a_primitive_names_the_function_and_line(backend_name):
    fn = _batched(bad_src.reshapes_wrongly)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(np.ones(2), backend=backend(backend_name))
    message = str(info.value)
    assert "reshapes_wrongly" in message and _bad_lines(bad_src.reshapes_wrongly)[0] in message


def test_exception_raised_on_values_propagates_with_a_note_at_the_users_line():
    # Only NumPy runs primitives on concrete values; compiled backends trace them.
    fn = _batched(bad_src.logs)
    with pytest.warns(PerExampleFallbackWarning):
        np.testing.assert_allclose(fn(np.array([1.0, 2.0])), 2 * np.log([1.0, 2.0]))
        with pytest.raises(ValueError, match="non-positive") as info:
            fn(np.array([1.0, -2.0]))
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "logs" in notes and _bad_lines(bad_src.logs)[0] in notes


@backend_param
def test_calling_an_undecorated_recursive_function(backend_name):
    fn = _batched(bad_src.calls_plain_recursive)
    n = np.array([3, 4, 1])
    if backend_name in EAGER_NAMES:  # runs it one example at a time, and says so
        with pytest.warns(PerExampleFallbackWarning):
            assert_close(fn(n, backend=backend(backend_name)), fn(n, dry_run=True), backend_name)
        return
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(n, backend=backend(backend_name))
    message = str(info.value)
    assert "calls_plain_recursive" in message and "ctx.batch" in message
    assert _bad_lines(bad_src.calls_plain_recursive)[0] in message


@backend_param
def test_return_arity_differing_between_branches_names_both_lines(backend_name):
    fn = _batched(bad_src.arity_mismatch)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(np.array([1.0, -1.0]), backend=backend(backend_name))
    message = str(info.value)
    assert "arity_mismatch" in message and "structured differently" in message
    assert all(line in message for line in _bad_lines(bad_src.arity_mismatch))


def test_unknown_call_option_is_a_type_error_listing_the_options():
    add = _batched(bad_src.add)
    with pytest.raises(TypeError, match=r"add\(\).*'max_step'.*max_steps"):
        add(np.ones(3), np.ones(3), max_step=3)

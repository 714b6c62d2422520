"""The ``math`` module's functions of per-example numbers (`pcbatch.frontend.math_forms`).

A user writing a function for one example writes ``math.sqrt(x)``, ``math.exp(-x * x)``,
``math.floor(x)``: each example gets Python's value (a Python float or int, which NumPy
converts to the dtype of an array beside it), and an example for which Python raises
(``math.sqrt(-1)``: ValueError, ``math.exp(1000)``: OverflowError, ``math.floor(nan)``)
fails with Python's exception at the user's line, the others finishing
(``return_status=True``). These calls were refused at the line, all but five.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import pcbatch
from tests import backends


def transcendental(x, y):
    a = math.sqrt(abs(x)) + math.exp(-x * x) + math.log(1.0 + x * x) + math.log(abs(x) + 1, 2)
    b = math.sin(x) * math.cos(y) + math.tan(x / 4) + math.atan2(y, x) + math.hypot(x, y)
    c = math.asin(math.tanh(x)) + math.acos(math.tanh(y)) + math.atan(x) + math.asinh(y)
    d = math.log2(1.0 + abs(y)) + math.log10(2.0 + x) + math.log1p(abs(x)) + math.expm1(y)
    e = math.sinh(x) + math.cosh(y) + math.acosh(1.0 + abs(x)) + math.atanh(math.tanh(x) / 2)
    f = math.pow(abs(x), y) + math.fmod(x, 0.75) + math.copysign(2.0, y) + math.degrees(x)
    return a, b, c, d, e, f, math.radians(y) + math.fabs(x)


def python_numbers_beside_arrays(x, k):
    """A math function's result is a Python float or int: NumPy converts it to the dtype
    of the array beside it (float32, int8), as per example."""
    return math.sqrt(abs(x)) * x, math.floor(x) + k, math.ceil(x) * k, math.exp(x) + 1


def rounded(x, n):
    return math.floor(x), math.ceil(x), math.trunc(x), math.floor(n), math.ceil(n)


def square_root(x):
    return math.sqrt(x) + 1.0


def logarithm(x, base):
    return math.log(x, base)


def exponential(x):
    return math.exp(x)


def power(x, y):
    return math.pow(x, y)


def remainder(x, y):
    return math.fmod(x, y)


def floor_of(x):
    return math.floor(x) * 2


def arcsine(x):
    return math.asin(x)


def sine(x):
    return math.sin(x)


def guarded(x):
    if x >= 0:
        return math.sqrt(x)
    return -math.sqrt(-x)


def truncated(x):
    return math.trunc(x)


def gamma(x):
    return math.gamma(x)


def _batched(function):
    return pcbatch.Context().batch(function)


@backends.backend_param
def test_math_functions_give_pythons_values(backend_name):
    x = np.array([0.3, -1.2, 2.5, 0.0, -0.7])
    y = np.array([1.5, 0.25, -2.0, 0.5, 3.0])
    batched = _batched(transcendental)
    want = batched(x, y, dry_run=True)
    per_example = [transcendental(*row) for row in zip(x, y)]
    backends.assert_identical(want, tuple(np.array(parts) for parts in zip(*per_example)))
    backends.assert_close(batched(x, y, backend=backends.backend(backend_name)), want,
                          backend_name)


@backends.backend_param
def test_math_results_are_python_numbers_beside_arrays(backend_name):
    x = np.array([0.5, -2.25, 3.0], np.float32)
    k = np.array([1, -2, 3], np.int8)
    batched = _batched(python_numbers_beside_arrays)
    want = batched(x, k, dry_run=True)
    assert [np.asarray(w).dtype for w in want] == [np.float32, np.int8, np.int8, np.float64]
    got = batched(x, k, backend=backends.backend(backend_name))
    backends.assert_identical(got[1:3], want[1:3])
    backends.assert_close(got, want, backend_name)


@backends.backend_param
def test_floor_ceil_and_trunc_are_exact_ints(backend_name):
    x = np.array([2.5, -2.5, 1e15 + 0.5, -0.0, 7.0])
    n = np.array([3, -4, 2**53 + 1, 0, 9])  # an int64 goes through float64, as in Python
    batched = _batched(rounded)
    want = batched(x, n, dry_run=True)
    np.testing.assert_array_equal(want[0], [2, -3, 10**15, 0, 7])
    np.testing.assert_array_equal(want[3], [3, -4, 2**53, 0, 9])
    assert {np.asarray(w).dtype for w in want} == {np.dtype(np.int64)}
    backends.assert_identical(batched(x, n, backend=backends.backend(backend_name)), want)


#: (function, arguments with the failing example second, Python's exception)
FAILURES = [
    (square_root, (np.array([4.0, -1.0, 9.0]),), ValueError),
    (logarithm, (np.array([2.0, 0.0, 8.0]), np.array([2.0, 2.0, 2.0])), ValueError),
    (logarithm, (np.array([2.0, 3.0, 8.0]), np.array([2.0, -2.0, 2.0])), ValueError),
    (logarithm, (np.array([2.0, 3.0, 8.0]), np.array([2.0, 1.0, 2.0])), ZeroDivisionError),
    (exponential, (np.array([1.0, 1000.0, -1000.0]),), OverflowError),
    (power, (np.array([2.0, 0.0, 4.0]), np.array([3.0, -1.0, 0.5])), ValueError),
    (power, (np.array([2.0, -8.0, 4.0]), np.array([3.0, 1 / 3, 0.5])), ValueError),
    (power, (np.array([2.0, 10.0, 4.0]), np.array([3.0, 400.0, 0.5])), OverflowError),
    (remainder, (np.array([2.0, 1.0, 4.0]), np.array([3.0, 0.0, 0.5])), ValueError),
    (remainder, (np.array([2.0, np.inf, 4.0]), np.array([3.0, 1.0, 0.5])), ValueError),
    (floor_of, (np.array([2.5, np.nan, 4.0]),), ValueError),
    (floor_of, (np.array([2.5, -np.inf, 4.0]),), OverflowError),
    (arcsine, (np.array([0.5, 1.5, -1.0]),), ValueError),
    (sine, (np.array([0.5, np.inf, -1.0]),), ValueError),
]


@pytest.mark.parametrize(("function", "arguments", "error"), FAILURES,
                         ids=lambda v: getattr(v, "__name__", None))
@backends.backend_param
def test_an_example_python_fails_raises_pythons_error_at_the_line(
    function, arguments, error, backend_name
):
    with pytest.raises(error):
        function(*(a[1] for a in arguments))  # Python's own, on the failing example
    batched = _batched(function)
    backend = backends.backend(backend_name)
    with pytest.raises(error) as info:
        batched(*arguments, backend=backend)
    line = inspect.getsourcelines(function)[1] + 1
    assert f"{__file__}:{line}" in str(info.value)
    results, status = batched(*arguments, backend=backend, return_status=True)
    np.testing.assert_array_equal(
        np.asarray(status) == pcbatch.LaneStatus.ERROR, [False, True, False]
    )
    for lane in (0, 2):
        want = function(*(a[lane] for a in arguments))
        backends.assert_close(np.asarray(results)[lane], want, backend_name)


@backends.backend_param
def test_floor_past_int64_is_an_overflow_error_where_python_gives_a_big_int(backend_name):
    assert math.floor(1e19) == 10**19  # exact in Python: an int64 batch cannot hold it
    with pytest.raises(OverflowError, match="int64"):
        _batched(floor_of)(np.array([2.5, 1e19]), backend=backends.backend(backend_name))


def signs(x, y):
    return np.copysign(x, y), np.signbit(y), np.copysign(3, y), math.copysign(1.0, y)


@backends.backend_param
def test_sign_bits_of_zeros_and_nans(backend_name):
    """TensorFlow's ``np.signbit`` said False for -0.0 and -nan, silently; its NumPy has no
    ``copysign`` (refused). Both read the sign bit now."""
    x = np.array([1.0, -2.0, np.nan, 0.0, 5.0])
    y = np.array([-0.0, 0.0, -np.nan, -1.0, np.inf])
    batched = _batched(signs)
    want = batched(x, y, dry_run=True)
    np.testing.assert_array_equal(want[1], [True, False, True, True, False])
    backends.assert_identical(batched(x, y, backend=backends.backend(backend_name)), want,
                              zero_signs=True)


@backends.backend_param
def test_nan_and_infinities_pass_where_python_passes_them(backend_name):
    x = np.array([np.nan, np.inf, -0.0, 0.0])
    batched = _batched(square_root)
    want = batched(x, dry_run=True)
    backends.assert_identical(batched(x, backend=backends.backend(backend_name)), want)
    x = np.array([np.inf, -np.inf, np.nan])  # exp(inf) is inf: no overflow, as Python
    backends.assert_identical(_batched(exponential)(x, backend=backends.backend(backend_name)),
                              _batched(exponential)(x, dry_run=True))


@backends.backend_param
def test_a_test_before_the_call_keeps_every_example(backend_name):
    x = np.array([4.0, -9.0, 0.25])
    batched = _batched(guarded)
    backends.assert_close(batched(x, backend=backends.backend(backend_name)),
                          batched(x, dry_run=True), backend_name)


@backends.backend_param
def test_trunc_of_a_numpy_float32_is_pythons_type_error(backend_name):
    with pytest.raises(TypeError, match="__trunc__"):
        math.trunc(np.float32(1.5))
    x = np.array([1.5, -2.5], np.float32)
    with pytest.raises(TypeError, match="__trunc__"):
        _batched(truncated)(x, backend=backends.backend(backend_name))
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(_batched(truncated)(x64, backend=backends.backend(backend_name)),
                                  [1, -2])


def test_a_math_function_pcbatch_does_not_compute_is_refused_at_the_line():
    with pytest.raises(pcbatch.AutobatchSyntaxError, match=r"math\.gamma\(\)") as info:
        _batched(gamma)(np.array([1.5, 2.5]))
    assert f"line {inspect.getsourcelines(gamma)[1] + 1}" in str(info.value)

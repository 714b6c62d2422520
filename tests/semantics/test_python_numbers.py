"""Python's own ints and bools, per example (issue 24).

A value that is a Python ``int`` or ``bool`` per example (a literal, a ``range``
counter, ``not x``, ``i < 2``, arithmetic on those) computes as Python computes it:

- Python's ints grow without bound: ``factorial(25)`` by ``f = f * i`` and ``2 ** 70``
  by doubling are exact in Python, and every backend gave the int64 wrap
  (7034535277573963776, 0) silently. Now OverflowError at the line for those examples
  (`LaneStatus.ERROR` with ``return_status=True``; the others keep their results).
  NumPy's own int64 values (an argument, ``np.int64(1)``) still wrap, as NumPy's do.
- Python's bools are ints in arithmetic: ``flag + other`` is 2 and ``~flag`` is -2,
  where every backend gave NumPy's bools (True, False) silently.
- A NumPy function of Python numbers is a NumPy scalar: ``np.sin(t)`` of a Python float
  ``t`` is float64, so an ODE step ``-k * y + np.sin(t)`` of a float32 ``y`` is float64
  per example; every backend kept it a Python float and gave float32, silently (and a
  different step count of the adaptive integrator below).
- ``float(x)``, ``int(x)``, ``bool(x)``, ``round(x)``, ``x.item()`` and ``v.tolist()``
  give Python scalars, which NumPy converts to the array's dtype beside it: ``float(x)
  * y`` of float32 ``y`` is float32, where every backend gave float64 (int8 beside
  ``int(x)``: int64), silently; ``v.tolist()`` was refused.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import pcbatch
from tests import backends


def factorial(n):
    f = 1
    for i in range(1, n + 1):
        f = f * i
    return f


def doubled(n):
    p = 1
    for _ in range(n):
        p = p + p
    return p, -p, p - 3 * p


def wrapping_factorial(n):
    f = np.int64(1)
    for i in range(1, n + 1):
        f = f * i
    return f


def python_bools(n, x):
    strong = n > 2  # a NumPy bool per example
    negated = not (n > 2)  # a Python bool
    last = True
    for i in range(n):
        last = i < 2
    return (
        negated + last, ~negated, negated * 3, last & negated, last | True, negated ^ last,
        negated + 1, last / 2, (negated == last) + 0, strong + negated, strong & last,
        negated + x, -last,
    )


def conversions(v, y, k):
    items = v.tolist()
    return (
        v[0].item() * y, float(v[1]) * y, int(v[0]) + k, round(v[1]) + k, bool(v[0]) + True,
        items[0] + items[1] * y, np.shape(v), np.ndim(v), np.size(v, 0),
    )


def largest_double(n, k):
    c = 0
    for i in range(n):
        c = max(c, i * 2)  # two Python ints (NumPy recursed without end here)
    return c + k, divmod(c, 3), abs(-c) + k, math.isnan(c / 2) + math.isfinite(c * 1.0)


def rhs(t, y, k):
    return -k * y + np.sin(t)


def integrate(y0, k):
    t, y, h, steps = 0.0, y0, 0.1, 0
    while t < 1.0:
        h = min(h, 1.0 - t)
        full = y + h * rhs(t + h / 2, y + h / 2 * rhs(t, y, k), k)
        half = y + h / 2 * rhs(t, y, k)
        half = half + h / 2 * rhs(t + h / 2, half, k)
        if abs(full - half) > 1e-4:
            h = h / 2
            continue
        t, y, steps = t + h, full, steps + 1
    return y, steps, (steps in (1, 2)) + (k in (3.0, 4.0))


def _batched(function):
    return pcbatch.Context().batch(function)


@backends.backend_param
@pytest.mark.parametrize(("program", "big"), [(factorial, 25), (doubled, 70)])
def test_a_python_int_past_int64_is_an_overflow_error_at_the_line(program, big, backend_name):
    n = np.array([5, big, 3])
    assert program(big) == program(big)  # Python's exact int: no error per example
    with pytest.raises(OverflowError, match="int64") as info:
        _batched(program)(n, backend=backends.backend(backend_name))
    line = inspect.getsourcelines(program)[1] + 3
    assert f"{__file__}:{line}" in str(info.value)
    results, status = _batched(program)(n, backend=backends.backend(backend_name),
                                         return_status=True)
    np.testing.assert_array_equal(
        np.asarray(status) == pcbatch.LaneStatus.ERROR, [False, True, False]
    )
    for got, want in zip(backends.leaves(results), backends.leaves(program(5))):
        assert np.asarray(got)[0] == want


@backends.backend_param
def test_python_ints_within_int64_and_numpy_ints_that_wrap(backend_name):
    backend = backends.backend(backend_name)
    n = np.array([5, 20, 0, 61])  # 3 * 2**61 still fits
    want = _batched(doubled)(n, dry_run=True)
    backends.assert_identical(_batched(doubled)(n, backend=backend), want)
    n = np.array([5, 25, 0])
    want = np.array([wrapping_factorial(k) for k in n])  # NumPy's int64 wraps
    backends.assert_identical(_batched(wrapping_factorial)(n, backend=backend), want)


@backends.backend_param
def test_python_bools_compute_as_ints(backend_name):
    n, x = np.array([1, 3, 0]), np.array([0.5, 1.5, 2.0])
    batched = _batched(python_bools)
    want = batched(n, x, dry_run=True)
    per_example = [python_bools(*row) for row in zip(n, x)]
    backends.assert_identical(want, tuple(np.stack(parts) for parts in zip(*per_example)))
    backends.assert_identical(batched(n, x, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_python_scalars_from_conversions_take_the_arrays_dtype(backend_name):
    v = np.array([[1.5, -2.25], [0.1, 0.2], [-3.0, 7.5]], np.float32)
    y = np.array([2.0, 3.0, 0.5], np.float32)
    k = np.array([1, -2, 3], np.int8)
    batched = _batched(conversions)
    want = batched(v, y, k, dry_run=True)
    assert [np.asarray(w).dtype for w in want[:6]] == [np.float32] * 2 + [np.int8] * 2 + [
        np.int64, np.float32]
    backends.assert_identical(batched(v, y, k, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_builtins_of_python_ints_stay_python_ints(backend_name):
    n, k = np.array([0, 3, 5]), np.array([1, 2, 3], np.int16)
    batched = _batched(largest_double)
    want = batched(n, k, dry_run=True)
    assert [type(largest_double(*row)[3]) for row in zip(n, k)] == [int] * 3  # not bool
    np.testing.assert_array_equal(want[0], [1, 6, 11])
    assert np.asarray(want[0]).dtype == np.int16 and np.asarray(want[3]).dtype == np.int64
    backends.assert_identical(batched(n, k, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_numpy_functions_of_python_floats_are_numpy_scalars(backend_name):
    y0 = np.array([1.0, 0.5, -2.0], np.float32)
    k = np.array([0.5, 3.0, 10.0], np.float32)
    batched = _batched(integrate)
    want = batched(y0, k, dry_run=True)
    per_example = [integrate(*row) for row in zip(y0, k)]
    backends.assert_identical(want, tuple(np.stack(parts) for parts in zip(*per_example)))
    assert np.asarray(want[0]).dtype == np.float64 and np.asarray(want[2]).dtype == np.int64
    got = batched(y0, k, backend=backends.backend(backend_name))
    backends.assert_identical(got[1:], want[1:])
    backends.assert_close(got[0], want[0], backend_name)


def rounded_to_digits(x, y):
    f = float(x)
    cents = (np.where(np.isfinite(x), x, 0.0) * 100).astype(np.int64)
    return (round(f, 2), round(f, 1), round(f, -1), round(f, 5), round(f, 2) * y, round(x, 2),
            np.round(x, 2), np.round(x, -1), np.round(cents, -2))


@backends.backend_param
def test_round_of_a_python_float_to_digits_is_pythons(backend_name):
    """Python rounds a float's exact binary value: ``round(2.675, 2)`` is 2.67 (2.675 is
    2.67499999...). NumPy scales first, and gave 2.68 on every backend, silently. A NumPy
    float64 (``round(x, 2)`` of an argument's item) rounds as NumPy does, as per example;
    JAX multiplied by 0.01 for the division by 100 there, one ulp off NumPy's."""
    rng = np.random.default_rng(0)
    values = [2.675, 0.285, -1.005, 1.005, 0.125, 34.99999999999999, 25.0, 35.0, 1e15,
              -0.0, np.inf, np.nan, 4.5e14 + 0.0625, 1.0000000000000002]
    values += list(np.round(rng.uniform(-100, 100, 200), 3) + rng.choice([0, 5e-15], 200))
    values += list(rng.integers(-10**6, 10**6, 200) / 200)
    x = np.array(values)
    y = np.full(len(x), 1.5, np.float32)
    batched = _batched(rounded_to_digits)
    want = batched(x, y, dry_run=True)
    assert np.asarray(want[0])[0] == 2.67 and np.asarray(want[5])[0] == 2.68
    assert np.asarray(want[4]).dtype == np.float32  # a Python float beside float32
    backends.assert_identical(batched(x, y, backend=backends.backend(backend_name)), want)

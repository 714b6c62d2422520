"""Item assignment beyond one item per example, as NumPy writes it per example.

Slices whose bounds are known when compiling (``w[1:] = v[:-1]``, ``w[::-1] = v``,
``m[k, 1:] = 0``, ``w[K:] *= 2`` with a global ``K``): every example writes the same
items; a value that does not fit them is NumPy's broadcast error at the line, before
anything runs. A slice alone in the index with per-example bounds (``w[:n] = 0.0``) is a
mask along the first axis (`runtime.slice_mask`); beside another index part, refused.

A boolean mask (``w[w < 0] = 0.0``; of leading axes, rows): the items where the
example's mask holds get the value, converted into the array's dtype as NumPy converts
it (`pcbatch.passes.masked_items`); a value per True (``w[m] = u[m]``) is refused at the
line, saying to write ``np.where``. Both were refused at the line before."""


from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from tests import backends

K = 2


def shifted(v):
    w = v.copy()
    w[1:] = v[:-1]
    w[0] = 0.0
    return w


def filled_in_parts(v, x):
    w = np.zeros(5)
    w[:3] = v
    w[3:] = x
    return w


def reversed_and_strided(v):
    w = np.empty_like(v)
    w[::-1] = v
    w[::2] += 10.0
    w[-K:] *= 2
    w[K:K] = -1.0  # no items
    w[9:] = -2.0  # past the end: no items
    w[0:2:-1] = -3.0  # backward from 0 to 2: no items (Torch refused any negative step)
    return w


def rows_and_columns(m, k, v):
    w = m.copy()
    w[k, 1:] = 5.0
    w[1:, 0] = m[:-1, 0]
    w[::-1, 2] = v
    w[k, ::-2] = v[:2]
    return w


def shifted_in_a_loop(v, n):
    w = v.copy()
    for _ in range(n):
        w[1:] = w[:-1] + 1
    return w


def into_small_ints(v):
    w = np.zeros(3, dtype=np.int8)
    w[1:] = v[:2]
    w[:1] = v[2:].reshape(1, 1)  # a value's leading unit axes are dropped, as NumPy does
    return w


def clamped(v):
    w = v.copy()
    w[w < 0] = 0.0
    w[np.isnan(w)] = -1
    return w


def rows_chosen(m, x):
    w = m.copy()
    w[w[:, 0] > 2] = x
    w[np.array([True, False, True])] = m[1]
    return w


def masked_into_small_ints(v, k):
    w = v.astype(np.int8)
    w[w > 3] = k
    w[w < 0] = 2.7  # a float stored into int8: truncated, as NumPy stores it
    return w


def bounded_per_example_alone(v, a, b, s):
    w = v.copy()
    w[:a] = -1.0
    w[b:] = 5  # a Python int into floats
    w[a:b:s] = w[0]
    h = len(v) // 2  # a length computed in the function: per example to the compiler
    w[h::s] = 7.0
    return w


def augmented_through_masks(v, n, k):
    w = v.copy()
    w[w > 0] += 1
    w[np.isnan(w)] *= 0
    w[:n] += 1.0
    w[n:] -= w[0]
    w[k] += 10.0  # an integer index: the item, as before
    return w


def augmented_small_ints(v, n):
    h = v.astype(np.int8)
    h[h > 2] += 100
    h[:n] -= 1
    return h


def rows_per_example(m, n):
    w = m.copy()
    w[n:] = m[0]
    return w


def in_a_loop(v, n):
    w = v.copy()
    for i in range(n):
        w[w > i] = w.sum()
    return w


V = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [-1.0, 0.5, 7.0]])
M = np.arange(27.0).reshape(3, 3, 3)
MASKED_V = np.array([[1.0, -2.0, 3.0], [-1.0, np.nan, 5.0], [0.0, -0.0, np.inf]])
CASES = {
    "shifted": (shifted, (V,)),
    "filled_in_parts": (filled_in_parts, (V, np.array([7.0, 8.0, 9.0]))),
    "reversed_and_strided": (reversed_and_strided, (np.arange(15.0).reshape(3, 5),)),
    "rows_and_columns": (rows_and_columns, (M, np.array([0, 2, -1]), V)),
    "shifted_in_a_loop": (shifted_in_a_loop, (V, np.array([0, 3, 1]))),
    "into_small_ints": (into_small_ints, (np.array([[300, 2, 3], [-1, 5, 6], [7, 8, -9]]),)),
    "clamped": (clamped, (MASKED_V,)),
    "rows_chosen": (rows_chosen, (M, np.array([7.0, 8.0, -9.0]))),
    "masked_into_small_ints": (masked_into_small_ints, (
        np.array([[1, 5, 9], [4, 0, -2], [7, 7, 7]]), np.array([-1, 100, 3]))),
    "in_a_loop": (in_a_loop, (MASKED_V, np.array([0, 3, 1]))),
    "bounded_per_example_alone": (bounded_per_example_alone, (
        np.arange(18.0).reshape(3, 6), np.array([0, -2, 10]), np.array([-100, 3, 1]),
        np.array([2, -1, 3]))),
    "rows_per_example": (rows_per_example, (M, np.array([0, -1, 3]))),
    "augmented_through_masks": (augmented_through_masks, (
        MASKED_V, np.array([0, 2, -1]), np.array([1, -1, 0]))),
    "augmented_small_ints": (augmented_small_ints, (
        np.array([[1, 5, 9], [4, 0, -2], [7, 7, 7]]), np.array([0, 2, 3]))),
}


def zero_step(v, s):
    w = v.copy()
    w[1::s] = 0.0  # MARK: zero step
    return w


@backends.backend_param
def test_a_zero_step_of_a_slice_is_pythons_value_error_for_those_examples(backend_name):
    batched = pcbatch.Context().batch(zero_step)
    with pytest.raises(ValueError, match="slice step cannot be zero") as e:
        batched(V, np.array([1, 0, 2]), backend=backends.backend(backend_name))
    assert f"{__file__}:{_line(zero_step, 'MARK: zero step')}" in str(e.value)


@backends.backend_param
@pytest.mark.parametrize("case", CASES)
def test_the_items_are_written_as_numpy_writes_them_per_example(case, backend_name):
    function, args = CASES[case]
    batched = pcbatch.Context().batch(function)
    want = batched(*args, dry_run=True)
    got = batched(*args, backend=backends.backend(backend_name))
    backends.assert_identical(np.asarray(got), np.asarray(want))


def too_long(v):
    w = np.zeros(2)
    w[:] = v  # MARK: too long
    return w


def bounded_per_example(m, n):
    w = m.copy()
    w[0, :n] = 0.0  # MARK: per example
    return w


def out_of_int8(v):
    w = v.astype(np.int8)
    w[w > 3] = 300  # MARK: out of int8
    return w


def a_value_per_true(v):
    w = v.copy()
    w[w > 0] = 2 * w  # MARK: per true
    return w


def an_operand_per_true(v):
    w = v.copy()
    w[w > 0] += v  # MARK: operand per true
    return w


def _line(function, marker: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(function)
    return next(first + i for i, line in enumerate(lines) if marker in line)


@backends.backend_param
def test_a_value_that_does_not_fit_the_items_is_numpys_error_at_the_line(backend_name):
    batched = pcbatch.Context().batch(too_long)
    message = r"from shape \(3,\) into shape \(2,\)"
    with pytest.raises(pcbatch.TypeInferenceError, match=message) as e:
        batched(V, backend=backends.backend(backend_name))
    assert f"{__file__}:{_line(too_long, 'MARK: too long')}" in str(e.value)


def test_a_slice_bounded_per_example_beside_another_index_is_refused_at_the_line():
    batched = pcbatch.Context().batch(bounded_per_example)
    with pytest.raises(pcbatch.AutobatchSyntaxError, match="bounds known when compiling") as e:
        batched(M, np.array([1, 2, 0]))
    assert e.value.lineno == _line(bounded_per_example, "MARK: per example")


@backends.backend_param
def test_a_python_int_the_dtype_cannot_hold_is_numpys_overflow_error(backend_name):
    batched = pcbatch.Context().batch(out_of_int8)
    with pytest.raises(OverflowError):
        batched(np.array([[1, 5], [0, 2]]), backend=backends.backend(backend_name))


PER_TRUE = {
    "a_value_per_true": (a_value_per_true, r"np\.where\(m, u, w\)", "MARK: per true"),
    "an_operand_per_true": (an_operand_per_true, r"np\.where\(mask, w \+ x, w\)",
                            "MARK: operand per true"),
}


@backends.backend_param
@pytest.mark.parametrize("case", PER_TRUE)
def test_one_value_per_true_is_refused_at_the_line_saying_what_to_write(case, backend_name):
    function, words, marker = PER_TRUE[case]
    batched = pcbatch.Context().batch(function)
    with pytest.raises(pcbatch.TypeInferenceError, match=words) as e:
        batched(MASKED_V, backend=backends.backend(backend_name))
    assert f"{__file__}:{_line(function, marker)}" in str(e.value)

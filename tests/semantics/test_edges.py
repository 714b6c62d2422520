"""NumPy's meaning at its edges, on every backend (issue 24; programs in ``edges_src``).

- Division: ``//``, ``%``, ``divmod`` and ``np.fmod`` of integers by zero are 0 in NumPy
  (JAX gave -1 or -2, TensorFlow the dividend), and of floats by zeros and infinities
  follow NumPy's floor division to the sign of zero (TensorFlow's ``inf // 2`` was inf,
  ``1.0 // -inf`` -0.0; TensorFlow had no ``fmod``).
- Indices: ``v[k]`` or ``buf[k] = x`` with ``k`` out of bounds for some example is
  NumPy's IndexError at the line (JAX and TensorFlow read a clamped item and dropped the
  write, silently; every backend wrapped ``buf[-4] = x`` of a 3-vector to ``buf[-1]``).
- An operand Python evaluates for some examples only (``y if n > 2 else -1``) reading a
  local those examples never assigned: Python reads it for none of them, and the
  batched run raised UnboundLocalError for all.
"""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from tests import backends
from tests.semantics import edges_src as src
from tests.tiers import in_turn


def _batched(function):
    return pcbatch.Context().batch(function)


def _pairs(dividends, divisors, dtype) -> tuple:
    pairs = list(itertools.product(dividends, divisors))
    return np.array([p[0] for p in pairs], dtype), np.array([p[1] for p in pairs], dtype)


def _assert_identical(got, want) -> None:
    backends.assert_identical(got, want, zero_signs=True)


INT_DIVISIONS = [
    pytest.param([7, -7, 0, 3, np.iinfo(np.int64).min], [0, 2, -2, -1], np.int64, id="int64"),
    pytest.param([7, -7, 0, 3, 2**31 - 1], [0, 2, -2, -1], np.int32, id="int32"),
    pytest.param([7, -7, 0, -128, 127], [0, 2, -2, -1], np.int8, id="int8"),
    pytest.param([7, -7, 0, 300], [0, 2, -3], np.int16, id="int16"),
    pytest.param([7, 0, 255], [0, 2, 7], np.uint8, id="uint8"),
]
FLOATS = [1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 5.5, -5.5]
FLOAT_DIVISIONS = [
    pytest.param(FLOATS, [0.0, -0.0, 2.0, -2.0, np.inf, -np.inf, np.nan], np.float64, id="f64"),
    pytest.param(FLOATS, [0.0, -0.0, 2.0, -np.inf, 0.75], np.float32, id="f32"),
]


@pytest.mark.parametrize(
    ("dividends", "divisors", "dtype", "backend_name"),
    in_turn(INT_DIVISIONS + FLOAT_DIVISIONS, backends.BACKEND_NAMES),
)
def test_division_by_zeros_and_infinities_is_numpys(dividends, divisors, dtype, backend_name):
    a, b = _pairs(dividends, divisors, dtype)
    batched = _batched(src.divisions)
    with np.errstate(all="ignore"):
        want = batched(a, b, dry_run=True)
        _assert_identical(want, [np.floor_divide(a, b), np.remainder(a, b), *np.divmod(a, b),
                                 np.fmod(a, b)])
        got = batched(a, b, backend=backends.backend(backend_name))
    _assert_identical(got, want)


@backends.backend_param
def test_booleans_and_a_literal_zero_divisor(backend_name):
    backend = backends.backend(backend_name)
    t, f = np.array([True, False, True]), np.array([True, True, False])
    with np.errstate(all="ignore"):
        _assert_identical(
            _batched(src.divisions)(t, f, backend=backend),
            _batched(src.divisions)(t, f, dry_run=True),
        )
        n = np.array([7, -7, 0])
        batched = _batched(src.divided_by_a_literal_zero)
        _assert_identical(batched(n, backend=backend), batched(n, dry_run=True))


# -- indices out of bounds ---------------------------------------------------------

V = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
M = np.arange(18.0).reshape(3, 2, 3)

#: (program, arguments in bounds, arguments with example 1 out of bounds, line in body)
OUT_OF_BOUNDS = {
    "read_at": ((V, [0, -1, 2]), (V, [0, 3, 2]), 1),
    "read_at_negative": ((V, [-3, -1, 1]), (V, [0, -4, 1]), 1),
    "read_at_row_and_column": ((M, [0, 1, -1], [2, 0, 1]), (M, [0, 1, 0], [2, 3, 1]), 1),
    "read_at_row": ((M, [1, -2, 0], [0, 0, 0]), (M, [1, 2, 0], [0, 0, 0]), 1),
    "read_a_column": ((M, [0, 2, -3]), (M, [0, 3, 1]), 1),
    "sum_of_the_first": ((V, [3, 0, 2]), (V, [3, 4, 2]), 3),
    "read_in_a_plain_helper": ((V, [1, 2, -2]), (V, [1, 5, 0]), 1),
    "write_at": (([1.0, 2.0, 3.0], [0, 2, -1]), ([1.0, 2.0, 3.0], [0, 3, 1]), 2),
    "write_at_negative": (([1.0, 2.0, 3.0], [-3, 2, 0]), ([1.0, 2.0, 3.0], [0, -4, 1]), 2),
    "add_at": (([1.0, 2.0, 3.0], [1, 1, -2]), ([1.0, 2.0, 3.0], [1, 7, 0]), 2),
}
_ALIASES = {"read_at_negative": "read_at", "read_at_row": "read_at_row_and_column",
            "write_at_negative": "write_at"}


def _program(case: str):
    return getattr(src, _ALIASES.get(case, case))


@pytest.mark.parametrize(
    ("case", "backend_name"), in_turn([(c,) for c in OUT_OF_BOUNDS], backends.BACKEND_NAMES)
)
def test_an_index_out_of_bounds_is_numpys_index_error_at_the_line(case, backend_name):
    program = _program(case)
    fine, bad, body_line = OUT_OF_BOUNDS[case]
    fine, bad = [np.asarray(a) for a in fine], [np.asarray(a) for a in bad]
    batched = _batched(program)
    backend = backends.backend(backend_name)
    backends.assert_close(batched(*fine, backend=backend), batched(*fine, dry_run=True),
                          backend_name)
    with pytest.raises(IndexError, match="out of bounds"):
        program(*(a[1] for a in bad))  # Python, on the example alone
    with pytest.raises(IndexError, match="out of bounds") as info:
        batched(*bad, backend=backend)
    line = inspect.getsourcelines(program)[1] + body_line
    text = " ".join([str(info.value), *getattr(info.value, "__notes__", [])])
    if backend_name in backends.COMPILED_NAMES or program is not src.read_in_a_plain_helper:
        assert f"{src.__file__}:{line}" in text or f"line {line}" in text, text
    results, status = batched(*bad, backend=backend, return_status=True)
    np.testing.assert_array_equal(
        np.asarray(status) == pcbatch.LaneStatus.ERROR, [False, True, False]
    )
    others = [0, 2]
    want = batched(*(a[others] for a in bad), dry_run=True)
    backends.assert_close(np.asarray(results)[others], want, backend_name)


@backends.backend_param
@pytest.mark.parametrize("name", ["read_past_the_end", "read_constant_indices"])
def test_a_constant_index_out_of_bounds_is_refused_before_running(name, backend_name):
    """``v[3]`` of a 3-vector: IndexError for every example (JAX read the last item)."""
    with pytest.raises(IndexError):
        getattr(src, name)(V[0])
    with pytest.raises((IndexError, pcbatch.TypeInferenceError), match="out of bounds"):
        _batched(getattr(src, name))(V, backend=backends.backend(backend_name))


# -- operands Python skips ------------------------------------------------------------

SKIPPED_OPERANDS = [
    ("assigned_then_conditional", [1, 3, 5]),
    ("assigned_on_both_paths", [1, 3, 7]),
    ("loop_variable_behind_and", [0, 1, 3]),
    ("loop_local_in_a_chain", [4, 9, -1]),
    ("returned_inside_the_branch", [1, 3, 5]),
]


@pytest.mark.parametrize(
    ("name", "n", "backend_name"), in_turn(SKIPPED_OPERANDS, backends.BACKEND_NAMES)
)
def test_an_operand_python_skips_may_name_an_unassigned_local(name, n, backend_name):
    batched = _batched(getattr(src, name))
    n = np.array(n)
    want = batched(n, dry_run=True)
    _assert_identical(want, np.array([getattr(src, name)(k) for k in n]))
    _assert_identical(batched(n, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_an_operand_python_evaluates_reading_an_unassigned_local_raises(backend_name):
    """``n > 2 or y``: Python reads ``y`` where ``n <= 2``, which never assigned it."""
    program = src.read_by_or_when_unassigned
    with pytest.raises(UnboundLocalError):
        program(1)
    batched = _batched(program)
    assert np.asarray(batched(np.array([3, 4]), backend=backends.backend(backend_name))).all()
    with pytest.raises(UnboundLocalError) as info:
        batched(np.array([3, 1]), backend=backends.backend(backend_name))
    assert f"{src.__file__}:{inspect.getsourcelines(program)[1] + 3}" in str(info.value)


# -- results whose length depends on the values ---------------------------------------

RAGGED = ["count_by_where", "count_by_nonzero", "sum_of_flat_indices", "distinct_count",
          "masked_sum"]
W = np.array([[3.0, -1.0, 2.0], [0.5, -0.5, -7.0], [1.0, 1.0, 1.0]])


@backends.backend_param
@pytest.mark.parametrize("name", RAGGED)
def test_a_result_as_long_as_the_values_select_is_per_example_or_refused(name, backend_name):
    """``np.where(c)``, ``np.nonzero``, ``np.unique``, ``v[mask]``: NumPy and Torch run the
    line one example at a time (the one-argument ``np.where`` gave the batch's row
    indices there, silently: 1 where Python counts 2); JAX and TensorFlow refuse it at
    the line, saying what to write (TensorFlow's ``v[mask]`` summed other items,
    silently)."""
    batched = _batched(getattr(src, name))
    want = batched(W, dry_run=True)
    _assert_identical(want, np.array([getattr(src, name)(w) for w in W]))
    backend = backends.backend(backend_name)
    if backend_name in backends.EAGER_NAMES:
        with pytest.warns(PerExampleFallbackWarning):
            _assert_identical(batched(W, backend=backend), want)
        return
    with pytest.raises(pcbatch.TypeInferenceError, match="np.count_nonzero") as info:
        batched(W, backend=backend)
    assert f"{src.__file__}:{inspect.getsourcelines(getattr(src, name))[1] + 1}" in str(
        info.value
    )


@backends.backend_param
def test_solve_invert_and_factor_per_example_matrices(backend_name):
    """``np.linalg.solve(m, b)``: type inference ran it on matrices of ones and of zeros
    only, both singular, so NumPy and Torch refused the line; TensorFlow had no
    counterpart of ``solve``, ``inv`` or ``cholesky``."""
    m = np.array([[[2.0, 1.0], [1.0, 3.0]], [[4.0, 0.0], [0.0, 1.0]], [[1.0, 0.5], [0.5, 1.0]]])
    b = np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.0]])
    batched = _batched(src.solved)
    want = batched(m, b, dry_run=True)
    for got, expected in zip(batched(m, b, backend=backends.backend(backend_name)), want):
        backends.assert_close(got, expected, backend_name)


NARROW = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]


@pytest.mark.parametrize(
    ("dtype", "backend_name"),
    in_turn([pytest.param(d, id=np.dtype(d).name) for d in NARROW], backends.BACKEND_NAMES),
)
def test_sums_and_means_of_narrow_integers_widen_as_numpy(dtype, backend_name):
    """NumPy sums and multiplies booleans and narrow integers in int64 (uint64), and
    averages them in float64: JAX's ``cumsum``/``cumprod`` kept int8 and wrapped
    (100 + 27 + 3 = -126), its ``mean``/``average`` were float32, and
    TensorFlow's ``trace`` kept int8, silently."""
    if backend_name == "torch" and np.dtype(dtype).kind == "u":
        pytest.skip("torch holds no uint64 (nor uint16/uint32) values: refused at the call")
    v = np.array([[100, 27, 3], [5, 120, 7], [1, 0, 1]]).astype(dtype)
    _assert_same_dtypes_and_close(src.sums_and_means, v, backend_name)


@pytest.mark.parametrize(
    ("dtype", "backend_name"),
    in_turn([pytest.param(d, id=np.dtype(d).name)
             for d in (np.int8, np.uint8, np.int16, np.int32, np.int64)],
            backends.BACKEND_NAMES),
)
def test_float_functions_of_integers_compute_in_numpys_loop_dtype(dtype, backend_name):
    """``np.sqrt(int8)`` is float16 in NumPy, ``np.sqrt(int32)`` float64: JAX computed
    both in float32; TensorFlow failed on ``np.floor`` and ``np.isnan`` of integers."""
    v = np.array([[1, 2, 3], [5, 4, 7], [0, 9, 100]]).astype(dtype)
    _assert_same_dtypes_and_close(src.float_functions_of, v, backend_name)


def _assert_same_dtypes_and_close(program, v, backend_name) -> None:
    """The dtypes of the per-example run, and its values to a few units in the last
    place (each library has its own exp and log)."""
    batched = _batched(program)
    want = batched(v, dry_run=True)
    got = batched(v, backend=backends.backend(backend_name))
    for g, w in zip(backends.leaves(got), backends.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"dtype {g.dtype} != {w.dtype}"
        rtol = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6}.get(w.dtype, 1e-12)
        np.testing.assert_allclose(g, w, rtol=rtol)


@backends.backend_param
def test_float16_functions_round_as_numpy(backend_name):
    """NumPy computes float16 in float32 and rounds once: JAX's ``np.exp2`` of float16 3
    gave 8.01."""
    h = np.array([[1.0, 2.0, 3.0], [5.0, 4.0, 7.0], [0.5, 0.25, 10.0]], np.float16)
    batched = _batched(src.float16_functions_of)
    _assert_identical(batched(h, backend=backends.backend(backend_name)),
                      batched(h, dry_run=True))


@backends.backend_param
def test_a_singular_matrix_is_numpys_lin_alg_error(backend_name):
    """``np.linalg.solve`` of a singular matrix: NumPy raises LinAlgError for that example
    (JAX and TensorFlow returned inf or nan for it, silently); with return_status the
    others keep their results."""
    m = np.array([[[2.0, 1.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.5], [0.5, 1.0]]])
    b = np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.0]])
    with pytest.raises(np.linalg.LinAlgError):
        src.solved(m[1], b[1])
    batched = _batched(src.solved)
    backend = backends.backend(backend_name)
    with pytest.raises(np.linalg.LinAlgError) as info:
        batched(m, b, backend=backend)
    text = " ".join([str(info.value), *getattr(info.value, "__notes__", [])])
    assert f"{src.__file__}:{inspect.getsourcelines(src.solved)[1] + 1}" in text, text
    results, status = batched(m, b, backend=backend, return_status=True)
    np.testing.assert_array_equal(
        np.asarray(status) == pcbatch.LaneStatus.ERROR, [False, True, False]
    )
    want = batched(m[[0, 2]], b[[0, 2]], dry_run=True)
    for got, expected in zip(results, want):
        backends.assert_close(np.asarray(got)[[0, 2]], expected, backend_name)


@backends.backend_param
def test_int_of_a_float_past_int64s_range_is_refused(backend_name):
    """``int(1e20)`` is Python's exact int, which an int64 batch cannot hold: the cast gave
    the smallest or largest int64, silently. Now an OverflowError at the line for that
    example (``LaneStatus.ERROR`` with ``return_status=True``); ``-2**63`` itself fits."""
    x = np.array([1e20, 3.5, -(2.0**63), -1e19])
    assert src.as_python_ints(x[0])[0] == 10**20
    batched = _batched(src.as_python_ints)
    backend = backends.backend(backend_name)
    with pytest.raises(OverflowError, match="past int64's range") as info:
        batched(x, backend=backend)
    assert f"{src.__file__}:{inspect.getsourcelines(src.as_python_ints)[1] + 1}" in str(
        info.value
    )
    results, status = batched(x, backend=backend, return_status=True)
    np.testing.assert_array_equal(
        np.asarray(status) == pcbatch.LaneStatus.ERROR, [True, False, False, True]
    )
    fine = [src.as_python_ints(v) for v in x[[1, 2]]]  # (3, 4) and (-2**63, -2**63)
    for k, got in enumerate(results):
        np.testing.assert_array_equal(np.asarray(got)[[1, 2]], [f[k] for f in fine])


@backends.backend_param
def test_membership_in_a_written_out_tuple(backend_name):
    """``n in (1, 2, 3)``: JAX and TensorFlow refused it (a per-example value used as a
    Python bool); now each example's bool, as Python's ``==`` with each item gives."""
    n, x = np.array([1, 2, 4, 3]), np.array([0.5, 2.0, 0.25, 1.0])
    batched = _batched(src.membership)
    want = batched(n, x, dry_run=True)
    _assert_identical(want, [np.array(r) for r in zip(*map(src.membership, n, x))])
    _assert_identical(batched(n, x, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_membership_of_a_vector_is_pythons_error(backend_name):
    with pytest.raises(ValueError):
        src.vector_in_a_tuple(V[0])
    with pytest.raises((ValueError, pcbatch.TypeInferenceError), match="single value"):
        _batched(src.vector_in_a_tuple)(V, backend=backends.backend(backend_name))


@backends.backend_param
def test_a_constant_array_indexed_per_example(backend_name):
    """``COEF[i]`` in a loop, ``TABLE[k]``: NumPy's own indexing cannot take a JAX or
    TensorFlow value, so JAX and TensorFlow refused the line; out of bounds is NumPy's
    IndexError on every backend."""
    backend = backends.backend(backend_name)
    x, k = np.array([0.5, 2.0, -1.0]), np.array([0, 2, 1])
    for program, args in [(src.polynomial, (x,)), (src.looked_up, (k,))]:
        batched = _batched(program)
        _assert_identical(batched(*args, backend=backend), batched(*args, dry_run=True))
    with pytest.raises(IndexError, match="out of bounds"):
        _batched(src.looked_up)(np.array([0, 3, 1]), backend=backend)


@backends.backend_param
def test_an_array_filled_with_a_per_example_value(backend_name):
    """``np.full(3, x)``: NumPy copies ``x`` into an empty array, which JAX and
    TensorFlow values cannot be copied into (the line was refused)."""
    x, n = np.array([0.5, 2.0, -1.0], np.float32), np.array([1, 2, 3])
    batched = _batched(src.filled)
    _assert_identical(batched(x, n, backend=backends.backend(backend_name)),
                      batched(x, n, dry_run=True))


@backends.backend_param
def test_argmax_and_argmin_find_the_first_nan_as_numpy(backend_name):
    """TensorFlow's argmax skipped NaN: ``[2.5, 2.5, nan, 1.0]`` gave 0 where NumPy gives
    2, silently."""
    v = np.array([[2.5, 2.5, np.nan, 1.0], [1.0, 3.0, 3.0, -1.0], [np.nan, np.nan, 0.0, 0.0],
                  [-0.0, 0.0, -1.0, -1.0]])
    m = np.array([[[1.0, np.nan], [2.0, 2.0]], [[0.0, 1.0], [1.0, 0.0]],
                  [[5.0, 4.0], [3.0, np.nan]], [[1.0, 1.0], [1.0, 1.0]]])
    n = np.array([[1, 3, 3], [-1, -5, -5], [0, 0, 0], [7, 2, 9]], np.int8)
    b = np.array([[False, True, True], [False, False, False], [True, False, True],
                  [False, False, True]])
    batched = pcbatch.Context().batch(src.arg_extrema)
    want = batched(v, m, n, b, dry_run=True)
    np.testing.assert_array_equal(want[0], [2, 1, 0, 0])
    backends.assert_identical(batched(v, m, n, b, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_ufunc_reduce_accumulate_and_outer(backend_name):
    """JAX and TensorFlow refused them ("returned NotImplemented"): their NumPy has no
    ufunc methods. Now the functions that compute them, NaN and int dtypes as NumPy's."""
    v = np.array([[3.0, 1.0, 2.0, -4.0], [-1.0, -5.0, 0.0, 0.5], [2.5, 2.5, np.nan, 1.0]])
    m = v.reshape(3, 2, 2)
    n = np.array([[100, 100, 1], [-5, 3, 2], [0, 0, 0]], np.int8)
    b = np.array([[False, True], [False, False], [True, True]])
    batched = pcbatch.Context().batch(src.ufunc_methods)
    want = batched(v, m, n, b, dry_run=True)
    assert np.asarray(want[7]).dtype == np.int64  # add.reduce of int8: NumPy's int64
    backends.assert_identical(batched(v, m, n, b, backend=backends.backend(backend_name)), want)


@backends.backend_param
@pytest.mark.parametrize("length", [8, 2], ids=["longer_than_the_batch", "as_long_as_the_batch"])
def test_powers_of_float_vectors(backend_name, length):
    """``v ** w`` of float vectors failed on JAX and TensorFlow ("incompatible shapes"; a
    loop carry that changed shape where the batch was as long as the vectors): the
    integer-power check's flags had the vectors' shape, not one per example."""
    v = np.array([[1.0, 2.0, 3.0, 0.5, 4.0, 1.5, 2.0, 3.0],
                  [2.0, 1.0, 0.5, 3.0, 2.0, 1.0, 0.5, 3.0]])[:, :length]
    w = v[::-1] - 1
    batched = pcbatch.Context().batch(src.float_vector_powers)
    backends.assert_close(batched(v, w, backend=backends.backend(backend_name)),
                          batched(v, w, dry_run=True), backend_name)


@backends.backend_param
def test_numpy_ufuncs_at_their_edges(backend_name):
    """Silent differences found by a sweep of NumPy's functions over nan, -0.0, inf and
    small dtypes: TensorFlow's heaviside(nan) was 1, its angle float32 and 0 for -0.0
    and nan, its shifts by a negative count or the bit width not NumPy's 0 (or -1); JAX
    and TensorFlow computed float_power of float32 in float32, angle of int8 in float64
    (NumPy: float16), np.round of booleans as booleans (NumPy: float16), np.square of
    booleans in int32 (NumPy: int8)."""
    x = np.array([[np.nan, -0.0, 0.0, 2.0, -3.0], [1.0, -1.0, np.inf, -np.inf, 0.5]])
    n = np.array([[-128, 127, 0, -1, 5], [1, 2, 3, 4, -5]], np.int8)
    k = np.array([[3, -2, 1, 9, 8], [0, 1, -2, 7, 2]], np.int8)
    b = np.array([[True, False, True, True, False], [False] * 5])
    u = np.array([[0, 255, 1, 128, 7], [5, 4, 3, 2, 1]], np.uint8)
    s = np.array([[3, 9, 1, 8, 2], [0, 7, 200, 1, 2]], np.uint8)
    batched = pcbatch.Context().batch(src.numpy_ufunc_edges)
    want = batched(x, n, k, b, u, s, dry_run=True)
    got = batched(x, n, k, b, u, s, backend=backends.backend(backend_name))
    backends.assert_identical(got, want, zero_signs=True)


@backends.backend_param
def test_degrees_radians_and_nan_to_num(backend_name):
    """TensorFlow's NumPy has neither ``degrees``/``radians`` nor ``nan_to_num``: they
    were refused there; now NumPy's values and dtypes on every backend."""
    x = np.array([[np.nan, -0.0, np.inf, 2.0, -np.inf], [1.0, -1.0, 0.5, 3.0, 0.25]])
    n = np.array([[1, -2, 3, 4, 5], [0, 0, 1, 1, 2]], np.int8)
    batched = pcbatch.Context().batch(src.degrees_and_nan_to_num)
    backends.assert_close(batched(x, n, backend=backends.backend(backend_name)),
                          batched(x, n, dry_run=True), backend_name)

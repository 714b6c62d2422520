"""Ordinary per-example programs, as a user new to pcbatch writes them (issue 24).

Differential: each program of ``outsider_src`` batched gives exactly what
``dry_run=True`` gives (the plain function on each example: values and dtypes), on
every backend, or is rejected before anything runs with an error at its line that says
what to write instead. Compiled backends take the exact programs in turn
(`tests.tiers.in_turn`): one compile per program.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from pcbatch.errors import AutobatchSyntaxError, TypeInferenceError
from tests import backends
from tests.semantics import outsider_src as src
from tests.tiers import in_turn

INPUTS = {
    "x": np.array([2.5, -1.5, 0.25, 4.0]),
    "f": np.array([2.5, -1.5, 0.25, np.inf, np.nan, -0.0], np.float32),
    "n": np.array([3, -2, 0, 7]),
    "v": np.array([[0.3, -1.2, 2.5], [1.0, 0.0, -0.5], [-2.5, 0.7, 0.7], [0.25, 3.5, -4.0]]),
    "b": np.array([True, False, True, False]),
    "u8": np.array([[1, 2, 250], [3, 4, 5], [0, 0, 0], [255, 255, 255]], np.uint8),
    "i16": np.array([[1, -2, 30000], [3, 4, 5], [-32768, 0, 1], [7, 7, 7]], np.int16),
    "h": np.array([[1.5, 2, 250], [3, 4, 5], [0.1, 0.2, 0.3], [-1, 65504, 1]], np.float16),
    "i8": np.array([-128, 127, 0, -1], np.int8),
}

EXACT = """math_constants builtins_of_several divmod_unpacked pow_of_two conversions
while_true_break helper_with_keyword annotated_accumulator float32_sum_of_uint8
float32_sum_of_int16 float32_sum_of_float16 early_return_in_nested_loops
builtin_sum_of_vector array_of_a_list array_of_float32_items assign_into_a_copy
smallest_from_infinity bool_flag bool_operators negative_modulo float_floor_division
loop_over_len round_builtin big_python_int stack_with_number bool_arithmetic
module_constant_mode nan_checks scalar_alias_then_add item_read_before_assignment
own_view_then_add literal_beside_a_value literal_result_meets_uint8 max_of_zero_and_value
value_or_zero return_inside_while_true list_of_values_indexed conversions_of_bool
large_product math_tests_of_a_value integer_power_past_the_bit_width modular_pow_by_squaring
break_in_nested_loops swap_by_unpacking divmod_of_floats divmod_negative_divisor abs_of_int8
floor_and_mod_of_negative_floats clip_with_none truthiness_of_floats
nan_is_not_equal_to_itself int_of_bool is_not_none_in_a_chain early_return_in_a_loop
keyword_only_helper star_args_helper lambda_helper reduce_with_operator
comprehension_then_array square_root_by_power bit_operations mixed_number_max
value_or_default round_to_tens bool_of_nan_float while_with_two_exits ternary_on_int_zero
nested_ternary powers_past_the_bit_width_in_helpers where_with_ints_out_of_range
clip_with_bounds_out_of_range weak_accumulator_of_float32 uint8_plus_a_counter
int16_with_a_while_counter int8_abs_and_negation mixed_literals_with_float32
tuple_default array_default_indexed helper_returning_a_tuple max_of_int_and_float
bool_plus_bool negative_int_floor_by_float float_mod_negatives int_float_comparisons
augmented_items float32_constant_cast astype_int32_then_divide signs_and_isclose
weak_int_division int_of_division nested_while_continue float_sqrt_power weak_float_steps
chained_mixed float_literal_beside_a_value float_of_a_string sum_of_a_list slices
arange_times int_power_half weak_divmod min_with_zero comparisons_with_inf
tuple_of_mixed_return bool_sum rate_or_zero while_else for_else math_sqrt_of_value
math_floor_of_value math_pow_of_values while_else_returns tuple_comparisons
best_by_tuple enumerate_range local_lambda nested_function""".split()  # noqa: SIM905

#: Python would share one array between two names, one changed in place: rejected (at
#: type inference, when the value is known to be an array), naming the line
SHARED = """alias_then_add parameter_alias_then_add view_then_assign_item row_view_then_add
asarray_then_assign_item""".split()  # noqa: SIM905

#: rejected at the function's line, before anything runs: words of the message
REJECTED = {
    "string_flag_local": "boolean or int flag",
    "fstring_length": "pcbatch.host_callback",
    "str_of_value": "pcbatch.host_callback",
    "math_gamma_of_value": r"math\.gamma\(\)",
    "match_statement": "if/elif",
    "starred_unpacking": "unpack each element",
    "global_counter": "pass the value as an argument",
    "walrus": "assign in a statement",
    "list_append": "acc = np.zeros",
    "dict_of_values": "acc = np.zeros",
    "modular_pow": "square-and-multiply",
    "nonlocal_counter": "nonlocal is not supported",
}


def _arguments(function) -> list:
    parameters = inspect.signature(function).parameters.values()
    return [INPUTS[p.name] for p in parameters if p.default is inspect.Parameter.empty]


def _assert_same(actual, expected) -> None:
    """Values and dtypes, as dry_run gives them (the compiled backends run in float64)."""
    actual, expected = backends.leaves(actual), backends.leaves(expected)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)


def _per_example(function, args) -> list:
    """The plain function on each example alone (the oracle of dry_run itself)."""
    results = [function(*(a[i] for a in args)) for i in range(len(args[0]))]
    if isinstance(results[0], tuple):
        return [np.stack([np.asarray(r[k]) for r in results]) for k in range(len(results[0]))]
    return [np.stack([np.asarray(r) for r in results])]


@pytest.mark.parametrize(
    ("name", "backend_name"), in_turn([(n,) for n in EXACT], backends.BACKEND_NAMES)
)
def test_batched_gives_what_dry_run_gives(name, backend_name):
    function = getattr(src, name)
    args = _arguments(function)
    batched = pcbatch.Context().batch(function)
    with np.errstate(all="ignore"):
        if _installed_numpy_raises(function, args, backend_name):
            return
        expected = batched(*args, dry_run=True)
        _assert_same(expected, _per_example(function, args))
        actual = batched(*args, backend=backends.backend(backend_name))
    _assert_same(actual, expected)


def _installed_numpy_raises(function, args, backend_name) -> bool:
    """Whether ``function`` raises OverflowError per example with the installed NumPy
    (NumPy 2.0's np.clip with a bound past the dtype's range; later ones ignore it):
    then the batched run must raise too."""
    try:
        _per_example(function, args)
    except OverflowError:
        batched = pcbatch.Context().batch(function)
        with pytest.raises((OverflowError, TypeInferenceError), match="out of bounds|int8"):
            batched(*args, backend=backends.backend(backend_name))
        return True
    return False


@backends.backend_param
@pytest.mark.parametrize("name", REJECTED)
def test_rejected_at_the_line_saying_what_to_write(name, backend_name):
    function = getattr(src, name)
    batched = pcbatch.Context().batch(function)
    with pytest.raises(AutobatchSyntaxError, match=REJECTED[name]) as info:
        batched(*_arguments(function), backend=backends.backend(backend_name))
    assert info.value.filename == src.__file__
    body = inspect.getsourcelines(function)[1]
    assert body < info.value.lineno < body + 10


@backends.backend_param
@pytest.mark.parametrize("name", SHARED)
def test_an_array_shared_by_two_names_is_rejected_at_the_line(name, backend_name):
    function = getattr(src, name)
    batched = pcbatch.Context().batch(function)
    with pytest.raises(TypeInferenceError, match="share the array") as info:
        batched(*_arguments(function), backend=backends.backend(backend_name))
    body = inspect.getsourcelines(function)[1]
    lines = [f"{src.__file__}:{body + k}" for k in range(1, 4)]
    assert any(line in str(info.value) for line in lines), str(info.value)
    assert "np.array(" in str(info.value)  # what to write instead


#: Python raises TypeError on each example (a number is not iterable): so does pcbatch,
#: at the line, before anything runs. TensorFlow's elementwise shortcut once ran
#: ``any(v[0])`` on the batch's vector and gave each example a boolean.
ITERATES_A_NUMBER = """any_of_a_number all_of_a_number sum_of_a_number min_of_a_number
max_of_a_number sorted_number len_of_a_number list_of_a_number tuple_of_a_number
iter_of_a_number""".split()  # noqa: SIM905


@backends.backend_param
@pytest.mark.parametrize("name", ITERATES_A_NUMBER)
def test_iterating_a_number_is_pythons_type_error_at_the_line(name, backend_name):
    function = getattr(src, name)
    with pytest.raises(TypeError):
        function(*(a[0] for a in _arguments(function)))  # Python's own verdict
    batched = pcbatch.Context().batch(function)
    with pytest.raises(TypeError, match="a number is not iterable") as info:
        batched(*_arguments(function), backend=backends.backend(backend_name))
    body = inspect.getsourcelines(function)[1]
    assert f"{src.__file__}:{body + 1}" in str(info.value)


#: Python compares per-example values as one bool inside a builtin (``sorted``, ``key=``):
#: NumPy and Torch run that line one example at a time (right, with a warning); JAX and
#: TensorFlow reject it at the line, saying what to write
ONE_EXAMPLE_AT_A_TIME = ["median_of_three", "max_with_key"]


@backends.backend_param
@pytest.mark.parametrize("name", ONE_EXAMPLE_AT_A_TIME)
def test_a_builtin_comparing_values_runs_per_example_or_is_rejected(name, backend_name):
    function = getattr(src, name)
    batched = pcbatch.Context().batch(function)
    args = _arguments(function)
    if backend_name in backends.EAGER_NAMES:
        with pytest.warns(PerExampleFallbackWarning):
            actual = batched(*args, backend=backends.backend(backend_name))
        _assert_same(actual, _per_example(function, args))
        return
    with pytest.raises(TypeInferenceError, match="np.sort") as info:
        batched(*args, backend=backends.backend(backend_name))
    body = inspect.getsourcelines(function)[1]
    assert f"{src.__file__}:{body + 1}" in str(info.value)


@backends.backend_param
def test_item_assignment_to_a_tuple_is_pythons_type_error_at_the_line(backend_name):
    """``t[0] += 1.0`` on a tuple: Python's TypeError (it was an IndexError about
    broadcasting shapes), saying what to write."""
    function = src.augmented_tuple_item
    with pytest.raises(TypeError, match="does not support item assignment"):
        function(1.0)
    batched = pcbatch.Context().batch(function)
    with pytest.raises(TypeError, match=r"does not support item assignment .*t = \(t\[0\]") as info:
        batched(INPUTS["x"], backend=backends.backend(backend_name))
    assert f"{src.__file__}:{inspect.getsourcelines(function)[1] + 2}" in str(info.value)


@backends.backend_param
def test_int_or_round_of_nan_or_inf_is_pythons_error(backend_name):
    """``int(f)``, ``round(f)``: Python raises for nan (ValueError) and inf (OverflowError);
    the batch gave the smallest int64 for them, silently. Now the error names the line,
    and with return_status those examples fail, the others keep Python's values."""
    function = src.int_and_round_of_a_float
    f = INPUTS["f"]  # 2.5, -1.5, 0.25, inf, nan, -0.0
    with pytest.raises(OverflowError):
        function(f[3])
    with pytest.raises(ValueError):
        function(f[4])
    batched = pcbatch.Context().batch(function)
    backend = backends.backend(backend_name)
    line = f"{src.__file__}:{inspect.getsourcelines(function)[1] + 1}"
    with pytest.raises((ValueError, OverflowError), match="cannot convert float") as info:
        batched(f, backend=backend)
    assert line in str(info.value)
    results, status = batched(f, backend=backend, return_status=True)
    failed = np.asarray(status) == pcbatch.LaneStatus.ERROR
    np.testing.assert_array_equal(failed, ~np.isfinite(f))
    finite = np.isfinite(f)
    expected = _per_example(function, [f[finite]])
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(np.asarray(got)[finite], want)


@backends.backend_param
def test_an_integer_to_a_negative_power_is_numpys_error(backend_name):
    """``n ** (n - 2)`` with ``n - 2 < 0``: NumPy's ValueError per example. JAX gave a
    wrong number silently, TensorFlow a graph error; now the error names the line, and
    with return_status those examples fail, the others keep their values."""
    function = src.integer_powers
    n, x = np.array([3, 1, 0, 7]), INPUTS["x"]
    with pytest.raises(ValueError):
        function(n[1], x[1])
    batched = pcbatch.Context().batch(function)
    backend = backends.backend(backend_name)
    with pytest.raises(ValueError, match="negative integer powers") as info:
        batched(n, x, backend=backend)
    assert f"{src.__file__}:{inspect.getsourcelines(function)[1] + 2}" in str(info.value)
    results, status = batched(n, x, backend=backend, return_status=True)
    failed = np.asarray(status) == pcbatch.LaneStatus.ERROR
    np.testing.assert_array_equal(failed, n < 2)
    expected = _per_example(function, [n[n >= 2], x[n >= 2]])
    for got, want in zip(results, expected):
        np.testing.assert_allclose(np.asarray(got)[n >= 2], want, rtol=1e-12)
    ok = np.array([2, 5, 3, 4])
    _assert_same(batched(ok, x, backend=backend), batched(ok, x, dry_run=True))


@backends.backend_param
def test_an_integer_to_a_negative_power_in_a_plain_helper_is_numpys_error(backend_name):
    """``np.power(n, k)``, ``n ** k``, ``pow(n, k)`` inside plain helpers with ``k < 0``:
    JAX gave a wrong number silently, TensorFlow a graph error naming no line of
    yours. Now NumPy's ValueError on every backend, naming the helper's line (JAX,
    TensorFlow; on NumPy and Torch the traceback's) and the batched function's call."""
    function = src.integer_powers_in_plain_helpers
    n, x = np.array([3, 1, 0, 7]), INPUTS["x"]
    with pytest.raises(ValueError):
        function(n[1], x[1])
    batched = pcbatch.Context().batch(function)
    backend = backends.backend(backend_name)
    with pytest.raises(ValueError, match="negative integer powers") as info:
        batched(n, x, backend=backend)
    text = " ".join([str(info.value), *getattr(info.value, "__notes__", [])])
    call = f"{src.__file__}:{inspect.getsourcelines(function)[1] + 3}"
    assert call in text, text
    ok = np.array([2, 5, 3, 4])
    _assert_same(batched(ok, x, backend=backend), batched(ok, x, dry_run=True))
    if backend_name in backends.EAGER_NAMES:
        return  # NumPy's own error, raised at once (with return_status too)
    helper = f"{src.__file__}:{inspect.getsourcelines(src.power_of)[1] + 1}"
    assert helper in text, text
    results, status = batched(n, x, backend=backend, return_status=True)
    failed = np.asarray(status) == pcbatch.LaneStatus.ERROR
    np.testing.assert_array_equal(failed, n < 2)
    expected = _per_example(function, [n[n >= 2], x[n >= 2]])
    for got, want in zip(results, expected):
        np.testing.assert_allclose(np.asarray(got)[n >= 2], want, rtol=1e-12)


@backends.backend_param
def test_a_float_literal_beside_a_value_keeps_its_float64_value(backend_name):
    """``return n * 2, 2.6``: TensorFlow made the 2.6 float32 first (2.5999999046)."""
    function = src.float_literal_beside_a_value
    batched = pcbatch.Context().batch(function)
    n = INPUTS["n"]
    actual = batched(n, backend=backends.backend(backend_name))
    _assert_same(actual, batched(n, dry_run=True))
    np.testing.assert_array_equal(np.asarray(actual[1]), np.full(len(n), 2.6))


@backends.backend_param
def test_clip_bounds_by_keyword(backend_name):
    """``np.clip(x, a_min=..., a_max=...)``: fitting out-of-range int bounds once dropped
    keyword bounds of floats (the corpus caught it); every backend, dry_run's values."""
    function = src.clip_with_keyword_bounds
    batched = pcbatch.Context().batch(function)
    args = _arguments(function)
    if _installed_numpy_raises(function, args, backend_name):
        return
    actual = batched(*args, backend=backends.backend(backend_name))
    _assert_same(actual, batched(*args, dry_run=True))


#: Python numbers (literals, counters, arithmetic on them) divided by zero: Python's
#: ZeroDivisionError on every example that divides (it was inf or 0, silently)
ZERO_DIVISIONS = ["zero_division_of_python_ints", "zero_floor_division_of_python_ints",
                  "zero_division_of_a_python_float", "rate_of_python_counters",
                  "float_of_a_value_by_zero", "int_of_a_value_dividing"]


@backends.backend_param
@pytest.mark.parametrize("name", ZERO_DIVISIONS)
def test_python_numbers_divided_by_zero_raise_zero_division_error(name, backend_name):
    function = getattr(src, name)
    args = _arguments(function)
    with pytest.raises(ZeroDivisionError):  # Python's verdict on the third example
        function(*(a[2] for a in args))
    batched = pcbatch.Context().batch(function)
    with pytest.raises(ZeroDivisionError, match="Test the divisor first") as info:
        batched(*args, backend=backends.backend(backend_name))
    body = inspect.getsourcelines(function)[1]
    lines = [f"{src.__file__}:{body + k}" for k in range(1, 10)]
    assert any(line in str(info.value) for line in lines), str(info.value)


#: Python floats' powers where NumPy's differ: (function, Python's error for its failing
#: examples, words of pcbatch's message)
FLOAT_POWERS = [
    ("reciprocal_of_a_python_float", ZeroDivisionError, "cannot be raised to a negative"),
    ("power_of_ten_of_a_python_float", OverflowError, "past float's range"),
    ("root_of_a_python_float", ValueError, "complex number"),
]


@backends.backend_param
@pytest.mark.parametrize(("name", "error", "words"), FLOAT_POWERS)
def test_python_float_powers_fail_where_python_does(name, error, words, backend_name):
    """``0.0 ** -1`` raises ZeroDivisionError, ``10.0 ** 500.0`` OverflowError, and
    ``(-1.5) ** 0.5`` is complex in Python, which a batch cannot hold: each at the line,
    where NumPy's inf or nan came back silently."""
    function = getattr(src, name)
    (x,) = _arguments(function)
    batched = pcbatch.Context().batch(function)
    with pytest.raises(error, match=words) as info:
        batched(x, backend=backends.backend(backend_name))
    lines, first = inspect.getsourcelines(function)
    line = first + next(k for k, text in enumerate(lines) if "**" in text and '"' not in text)
    assert f"{src.__file__}:{line}" in str(info.value), str(info.value)
    fine = np.array([0.5, 1.0])  # every example's power is a float
    _assert_same(batched(fine, backend=backends.backend(backend_name)),
                 batched(fine, dry_run=True))


@backends.backend_param
def test_python_float_powers_where_python_gives_a_float(backend_name):
    batched = pcbatch.Context().batch(src.powers_of_python_floats)
    x = np.array([2.5, -1.5, 0.0, 4.0, -0.5])
    _assert_same(batched(x, backend=backends.backend(backend_name)), batched(x, dry_run=True))


@backends.backend_param
def test_a_string_default_runs_the_branch_python_takes(backend_name):
    """``mode="fast"``: text is fixed for the call, and the program compiled for it."""
    batched = pcbatch.Context().batch(src.string_default)
    b = backends.backend(backend_name)
    for options in ({}, {"mode": "slow"}, {"mode": "fast"}):
        expected = batched(INPUTS["x"], dry_run=True, **options)
        _assert_same(batched(INPUTS["x"], backend=b, **options), expected)


@backends.backend_param
def test_a_none_default_or_a_number_for_it(backend_name):
    """``if tol is None: tol = 1e-8``: not passed, None is fixed for the call and the
    branch rebinds ``tol``; passed a number, ``tol is None`` is False for every example,
    as in Python."""
    batched = pcbatch.Context().batch(src.none_default)
    b = backends.backend(backend_name)
    for options in ({}, {"tol": None}, {"tol": 0.5}):
        expected = batched(INPUTS["x"], dry_run=True, **options)
        _assert_same(batched(INPUTS["x"], backend=b, **options), expected)


CALLS = [
    ("factorial", (np.array([0, 1, 5, 7]),)),
    ("literal_pairs", (INPUTS["x"], np.array([0, 1, 2, 3]))),
    ("calls_with_keywords", (INPUTS["x"], np.array([0, 1, 5, 7]))),
    ("calls_with_keywords", (np.array(1.5), np.array([0, 3]))),  # a 0-d array is shared
    ("calls_with_keywords", (1.5, 3)),  # Python numbers: a batch of one
    ("calls_with_keywords", (np.array([1.5]), np.array([3]))),  # a batch of one
    ("calls_with_keywords", (np.zeros(0), np.zeros(0, np.int64))),  # an empty batch
    ("halvings", (INPUTS["x"] * 7,)),
]


@backends.backend_param
def test_batched_calls_with_keywords_and_defaults(backend_name):
    """Recursion passing a default by keyword, batched calls with keyword and keyword-only
    arguments; batches of size 4, 1 and 0, 0-d arrays and Python numbers: one Context,
    one compile per backend."""
    for name, args in CALLS:
        function = getattr(src, name)
        expected = function(*args, dry_run=True)
        actual = function(*args, backend=backends.backend(backend_name))
        _assert_same(actual, expected)


NORMS = [
    ("vector_norms", np.array([[1.0, -2, 3], [4, 5, 6], [-1, -1, -1], [0.5, 0, 2]])),
    ("vector_norms", np.array([[1, -2, 3], [0, 0, 0]])),  # ints: float64 norms
    ("matrix_norms", np.arange(36.0).reshape(4, 3, 3) - 10),
    ("norms_over_axes", np.random.RandomState(0).normal(size=(3, 2, 3, 4))),
]


@backends.backend_param
@pytest.mark.parametrize(("name", "x"), NORMS, ids=["vectors", "int_vectors", "matrices", "axes"])
def test_norms_of_every_order(name, x, backend_name):
    batched = pcbatch.Context().batch(getattr(src, name))
    actual = batched(x, backend=backends.backend(backend_name))
    for got, want in zip(backends.leaves(actual), backends.leaves(batched(x, dry_run=True))):
        backends.assert_close(got, want, backend_name)


@backends.backend_param
def test_a_value_whose_shape_differs_by_example_is_refused_saying_what_to_write(backend_name):
    """NumPy and Torch stacked the examples' ``v[v > 0]`` and failed with NumPy's "all
    input arrays must have the same shape"; now every backend says what to write."""
    function = src.mean_of_the_positive_items
    batched = pcbatch.Context().batch(function)
    with pytest.raises((ValueError, TypeError), match="count_nonzero") as info:
        batched(INPUTS["v"], backend=backends.backend(backend_name))
    lines, first = inspect.getsourcelines(function)
    line = first + next(k for k, text in enumerate(lines) if "# ERROR" in text)
    assert f"outsider_src.py:{line}" in str(info.value) + "".join(
        getattr(info.value, "__notes__", [])
    )


@backends.backend_param
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_unsigned_arithmetic_as_numpy(dtype, backend_name):
    n = np.array([[0, 1, 3], [200, 7, 255], [2**8 - 2, 5, 6]]).astype(dtype)
    if dtype is np.uint64:
        n[2, 0] = 2**63 + 5
    batched = pcbatch.Context().batch(src.unsigned_arithmetic)
    if backend_name == "torch" and dtype is np.uint64:  # Torch has no uint64 arithmetic
        with pytest.raises(TypeError, match="torch has no full support"):
            batched(n, backend=backends.backend(backend_name))
        return
    with np.errstate(over="ignore"):
        want = batched(n, dry_run=True)
    got = batched(n, backend=backends.backend(backend_name))
    backends.assert_identical(got, want)


@backends.backend_param
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8])
def test_powers_of_integer_vectors(dtype, backend_name):
    # two examples of three items: the check once broadcast the batch's two exponents
    # against each example's three items
    v = np.array([[0, 1, 3], [2, 7, 5]]).astype(dtype)
    k = np.array([0, 3]).astype(dtype)
    batched = pcbatch.Context().batch(src.int_vector_powers)
    backends.assert_identical(
        batched(v, k, backend=backends.backend(backend_name)), batched(v, k, dry_run=True)
    )
    square = pcbatch.Context().batch(src.square_of_an_int_vector)
    backends.assert_identical(
        square(v, backend=backends.backend(backend_name)), square(v, dry_run=True)
    )


@backends.backend_param
def test_a_negative_integer_power_fails_only_its_own_example(backend_name):
    """As many examples as items (3 x 3): the check's flags once lined up the batch's
    exponents with an example's items, so every example failed with one."""
    v = np.arange(9).reshape(3, 3)
    k = np.array([2, -1, 3])
    batched = pcbatch.Context().batch(src.int_vector_powers)
    results, status = batched(v, k, backend=backends.backend(backend_name), return_status=True)
    assert [pcbatch.LaneStatus(s).name for s in np.asarray(status)] == ["OK", "ERROR", "OK"]
    np.testing.assert_array_equal(np.asarray(results[1])[[0, 2]], [v[0] ** 2, v[2] ** 3])

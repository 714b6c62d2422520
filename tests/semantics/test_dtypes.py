"""Python scalars are weak, as in NumPy 2 (NEP 50): literals, ``range`` counters and
Python arithmetic on them take the dtype of the arrays they meet (defect D8).

The oracle is the plain (undecorated) function applied to each example, every example
a NumPy scalar of the input's dtype. Each example's value must match; the batched
result's dtype must be NumPy 2's ``result_type`` of every example's result, Python
scalars weak (docs/semantics/dtypes.md): the dtype of an example whose result is an
array, and the literal converted to it for one whose result is a Python scalar.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import pcbatch
from pcbatch.backends import per_example
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from tests import backends, tiers

ctx = pcbatch.Context()


@ctx.batch
def acc_int(x):
    acc = 0
    for _ in range(3):
        acc = acc + x
    return acc


@ctx.batch
def acc_float(x):
    acc = 0.0
    for _ in range(3):
        acc = acc + x
    return acc


@ctx.batch
def acc_upto(x, n):
    acc = 0
    for _ in range(n):
        acc = acc + x
    return acc


@ctx.batch
def add_counter(x, n):
    for i in range(n):
        x = x + i
    return x


@ctx.batch
def counter_times(x, n):
    acc = 0
    for i in range(n):
        acc = acc + i * x
    return acc


@ctx.batch
def weak_sum_then_add(x, n):
    k = 0
    for i in range(n):
        k = k + i
    return x + k


@ctx.batch
def counter_from_input(x, n):
    total = 0
    for i in range(n, n + 3):
        total = total + i
    return total + x


@ctx.batch
def times_literal(x):
    two = 2.0
    return x * two


@ctx.batch
def halve(x):
    d = 2
    return x / d


@ctx.batch
def literal_if(x):
    y = 1 if x > 2 else 2.5
    return y * x


@ctx.batch
def literal_if_stored(x):
    y = 1 if x > 2 else 2.5
    return y


@ctx.batch
def literal_select_inline(x):
    return (1 if x > 2 else 2.5) * x


@ctx.batch
def return_literal_or_x(x):
    if x > 4:
        return 3
    return x


@ctx.batch
def return_float_literal_or_x(x):
    if x > 4:
        return 2.5
    return x


@ctx.batch
def compare_big_literal(x):
    big = 300
    return x < big


@ctx.batch
def compare_inline(x):
    return (x < 300) & (x > -200)


@ctx.batch
def negate_counter(x, n):
    acc = x
    for i in range(n):
        acc = acc - i
    return acc


@ctx.batch
def index_with_counter(v):
    s = 0
    for i in range(3):
        s = s + v[i]
    return s


@ctx.batch
def wrap_then_halve(x, n):
    for i in range(n):
        x = (x + i) // 2
    return x


@ctx.batch
def mixed_operands(x, n):
    a = x.astype(np.int8)
    acc = 0.0
    for i in range(n):
        acc = i * a + np.float32(0.5)
    return acc


@ctx.batch
def scale_by(x, k=3):
    return x * k


@ctx.batch
def call_with_literal(x):
    return scale_by(x, 2) + scale_by(x)


@ctx.batch
def weak_only_division(x, n):
    h = 0
    for i in range(n):
        h = h + i / 2
    return h * x


FLOATS = ("float32", "float16")
INTS = ("int32", "uint8", "int8")
ALL = (*FLOATS, *INTS, "bool")

# program -> (dtypes, whether it takes a trip count n)
TABLE = {
    acc_int: (ALL, False),
    acc_float: (ALL, False),
    acc_upto: (FLOATS + INTS, True),
    add_counter: (ALL, True),
    counter_times: (FLOATS + INTS, True),
    weak_sum_then_add: (FLOATS + INTS, True),
    counter_from_input: (FLOATS + INTS, "small"),
    times_literal: (ALL, False),
    halve: (ALL, False),
    literal_if: (FLOATS + INTS, False),
    literal_if_stored: (FLOATS + INTS, False),
    literal_select_inline: (FLOATS + INTS, False),
    return_literal_or_x: (FLOATS + INTS, False),
    return_float_literal_or_x: (FLOATS + INTS, False),
    compare_big_literal: (FLOATS + INTS, False),
    compare_inline: (FLOATS + INTS, False),
    negate_counter: (("float32", "int32", "int8"), True),
    wrap_then_halve: (("uint8", "int8", "int32"), True),
    mixed_operands: (("int32", "float32"), "small"),
    call_with_literal: (ALL, False),
    weak_only_division: (FLOATS + INTS, True),
}


def _inputs(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([True, False, True, True, False])
    if dtype == "uint8":
        return np.array([250, 3, 100, 255, 0], np.uint8)
    if dtype == "int8":
        return np.array([120, -3, 5, -128, 0], np.int8)
    if dtype == "int32":
        return np.array([7, -3, 2, 2**31 - 5, 0], np.int32)
    return np.array([1.1, -2.5, 3.3, 6.0, 0.1], dtype)


def _cases():
    for program, (dtypes, takes_n) in TABLE.items():
        for dtype in dtypes:
            yield pytest.param(program, dtype, takes_n, id=f"{program.name}-{dtype}")


def _arguments(dtype: str, takes_n) -> list:
    x = _inputs(dtype)
    if not takes_n:
        return [x]
    trips = np.array([10, 2, 0, 3, 1]) if takes_n is True else np.array([25, 1, 7, 0, 2])
    if takes_n == "small":
        trips = trips.astype(np.int16)
    return [x, trips]


def _per_example(program, args: list) -> list:
    """The plain function on each example (NumPy scalars); batched functions it calls run
    as plain Python too, as inside ``dry_run``."""
    size = len(args[0])
    pcbatch.api._dry_run.depth = getattr(pcbatch.api._dry_run, "depth", 0) + 1
    try:
        with np.errstate(over="ignore"):
            return [program.python_function(*(a[i] for a in args)) for i in range(size)]
    finally:
        pcbatch.api._dry_run.depth -= 1


def _tolerance(dtype: np.dtype) -> float:
    return {"float16": 1e-3, "float32": 1e-6}.get(np.dtype(dtype).name, 1e-12)


def assert_matches_python(actual, expected: list, backend_name: str) -> None:
    """Each example's value, and NumPy 2's result_type of every example's result."""
    actual = np.asarray(actual)
    want = np.result_type(*expected)  # Python scalars weak (NEP 50)
    assert actual.dtype == want, f"dtype {actual.dtype}, Python gives {want}"
    for i, e in enumerate(expected):
        e = np.asarray(e).astype(want)
        if want.kind in "fc":
            rtol = 0 if backend_name in backends.EAGER_NAMES else _tolerance(want)
            np.testing.assert_allclose(actual[i], e, rtol=rtol, err_msg=f"example {i}")
        else:
            assert actual[i] == e, f"example {i}: {actual[i]!r} != {e!r}"


# Every case on NumPy; on JAX and TensorFlow the fast tier takes the cases in turn (tests/tiers.py).
@pytest.mark.parametrize(
    ("program", "dtype", "takes_n", "backend_name"),
    tiers.in_turn(list(_cases()), backends.BACKEND_NAMES),
)
def test_weak_scalars_match_python(program, dtype, takes_n, backend_name):
    args = _arguments(dtype, takes_n)
    expected = _per_example(program, args)
    actual = program(*args, backend=backends.backend(backend_name))
    assert_matches_python(actual, expected, backend_name)


@backends.backend_param
def test_counter_indexes_a_vector(backend_name):
    v = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
    actual = index_with_counter(v, backend=backends.backend(backend_name))
    assert_matches_python(actual, _per_example(index_with_counter, [v]), backend_name)


@backends.backend_param
def test_zero_trip_loop_returns_the_literal_in_the_loops_dtype(backend_name):
    """The one unavoidable difference: with no trips Python returns the int 0, but the
    batch has one dtype, the one the loop gives (docs/semantics/dtypes.md)."""
    x = np.array([1.5, 2.5], np.float32)
    actual = acc_upto(x, np.array([0, 0]), backend=backends.backend(backend_name))
    assert np.asarray(actual).dtype == np.float32
    np.testing.assert_array_equal(actual, [0.0, 0.0])
    assert acc_upto.python_function(x[0], 0) == 0  # an int in Python


@ctx.batch
def literal_too_big(x):
    if x > 0:  # noqa: SIM108 - an assignment on each arm, as written
        y = 300
    else:
        y = x
    return y


@ctx.batch
def return_too_big(x):
    if x > 0:
        return 300
    return x


@ctx.batch
def add_one(y):
    return y + 1


@ctx.batch
def pass_too_big(x):
    return add_one(x) + add_one(70000)


@pytest.mark.parametrize(
    ("program", "x", "literal", "dtype"),
    [
        (literal_too_big, np.array([1, 2], np.uint8), 300, "uint8"),
        (return_too_big, np.array([1, 2], np.int8), 300, "int8"),
        (pass_too_big, np.array([1, 2], np.int16), 70000, "int16"),
        (return_too_big, np.array([1, 2], np.float16), None, None),  # 300 fits float16
    ],
)
def test_literal_that_the_merged_dtype_cannot_hold_is_an_error_at_its_line(
    program, x, literal, dtype
):
    if literal is None:
        assert program(x).dtype == x.dtype
        return
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        program(x)
    message = str(info.value)
    assert f"literal {literal}" in message and dtype in message
    source, first = inspect.getsourcelines(program.python_function)
    line = first + next(i for i, text in enumerate(source) if str(literal) in text)
    assert f"test_dtypes.py:{line}" in message


LIMIT = 300


@ctx.batch
def negative_literal_in_a_loop(v):
    m = -1
    for a in v:
        if a > 200:
            m = a
    return m


@ctx.batch
def negative_literal_in_a_conditional_expression(v):
    return v[0] if v[0] > 200 else -1


@ctx.batch
def global_constant_too_big(v):
    m = LIMIT
    if v[0] > 0:
        m = v[1]
    return m


@ctx.batch
def constant_arithmetic_too_big(v):
    return v[0] if v[0] > 0 else 2 ** 9


@ctx.batch
def max_default_too_big(v):
    return max((a for a in v if a > 200), default=-1)


@pytest.mark.parametrize(
    ("program", "literal", "marker", "named"),
    [
        (negative_literal_in_a_loop, -1, "m = -1", "'m'"),
        (negative_literal_in_a_conditional_expression, -1, "else -1", "the result"),
        (global_constant_too_big, 300, "m = LIMIT", "'m'"),
        (constant_arithmetic_too_big, 512, "2 ** 9", "the result"),
        (max_default_too_big, -1, "default=-1", "max(...) or min(...)"),
    ],
)
@backends.backend_param
def test_a_negative_or_computed_literal_is_checked_as_a_literal(
    program, literal, marker, named, backend_name
):
    # they were computed by a primitive, not held as literals: uint8 made -1 255, silently
    v = np.array([[1, 250, 3], [2, 2, 9]], np.uint8)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        program(v, backend=backends.backend(backend_name))
    message = str(info.value)
    assert f"literal {literal}" in message and "uint8" in message and named in message
    source, first = inspect.getsourcelines(program.python_function)
    line = first + next(i for i, text in enumerate(source) if marker in text)
    assert f"test_dtypes.py:{line}" in message


HUGE = 2 ** 70


@ctx.batch
def held_huge_literal(x):
    m = 2 ** 63
    return x + m


@ctx.batch
def held_huge_global(x):
    m = HUGE
    return x + m


@ctx.batch
def huge_literal_in_place(x):
    return x + 2 ** 70 + HUGE


@ctx.batch
def int64_extremes(x):
    top = 2 ** 63 - 1
    bottom = -2 ** 63
    return x + top, x + bottom


@pytest.mark.parametrize(
    "program, shown", [(held_huge_literal, "2 ** 63 is 9223372036854775808"),
                       (held_huge_global, "HUGE is 1180591620717411303424")]
)
def test_a_variable_cannot_hold_an_int_past_int64(program, shown):
    # it was held as an int64 and wrapped: m = 2 ** 63; x + m gave -9.2e18, silently
    with pytest.raises(pcbatch.AutobatchSyntaxError) as info:
        program(np.array([1.0, 2.0]))
    message = str(info.value)
    assert shown in message and "int64" in message and "2.0 ** 63" in message
    source, first = inspect.getsourcelines(program.python_function)
    assert f"line {first + 2})" in message


@backends.backend_param
def test_ints_past_int64_inside_an_expression_and_int64s_extremes_are_pythons(
    backend_name
):
    backend = backends.backend(backend_name)
    x = np.array([1.0, 2.0])
    for program in (huge_literal_in_place, int64_extremes):
        backends.assert_identical(program(x, backend=backend), program.python_function(x))


@ctx.batch
def float_range(x):
    s = 0
    for i in range(x):
        s = s + i
    return s


@backends.backend_param
def test_range_of_floats_is_an_error_at_its_line(backend_name):
    """Python's range takes integers only (was: a float counter, silently)."""
    with pytest.raises(pcbatch.TypeInferenceError, match="range.. arguments must be integers"):
        float_range(np.array([2.5, 3.0]), backend=backends.backend(backend_name))
    np.testing.assert_array_equal(
        float_range(np.array([3, 4], np.uint8), backend=backends.backend(backend_name)), [3, 6]
    )


# -- Python numbers passed as arguments, or taken from defaults -----------------------
# Each is the same Python number in every example, so it is weak too: ``x * 2`` on
# float32 x is float32, as the undecorated function gives (was: int64, so float64).


@ctx.batch
def times_k(x, k):
    return x * k


@ctx.batch
def times_default(x, k=2):
    return x * k


@ctx.batch
def default_or_x(x, k=0):
    y = k
    if x > 1:
        y = x
    return y


@ctx.batch
def loop_with_defaults(x, n=3, flag=True, pair=(2, 0.5)):
    s = x
    for _ in range(n):
        if flag:
            s = s + pair[0] * pair[1]
    return s


def _per_example_with(program, x: np.ndarray, *scalars) -> list:
    """The plain function per example, the Python numbers passed as they are."""
    pcbatch.api._dry_run.depth = getattr(pcbatch.api._dry_run, "depth", 0) + 1
    try:
        with np.errstate(over="ignore"):
            return [program.python_function(xi, *scalars) for xi in x]
    finally:
        pcbatch.api._dry_run.depth -= 1


NUMBER_CASES = [
    pytest.param(times_k, (2,), id="times_k-int"),
    pytest.param(times_k, (2.5,), id="times_k-float"),
    pytest.param(times_k, (True,), id="times_k-bool"),
    pytest.param(times_default, (), id="times_default"),
    pytest.param(default_or_x, (), id="default_or_x"),
    pytest.param(loop_with_defaults, (), id="loop_with_defaults"),
]


def _number_cases():
    for case in NUMBER_CASES:
        for dtype in ("float32", "float16", "int8", "uint8"):
            yield pytest.param(*case.values, dtype, id=f"{case.id}-{dtype}")


# Every case on NumPy and Torch; on JAX and TensorFlow the fast tier takes the cases in
# turn (tests/tiers.py).
@pytest.mark.parametrize(
    ("program", "scalars", "dtype", "backend_name"),
    tiers.in_turn(list(_number_cases()), backends.BACKEND_NAMES),
)
def test_python_number_arguments_and_defaults_are_weak(program, scalars, dtype, backend_name):
    if program is times_k and isinstance(scalars[0], float) and dtype in INTS:
        dtype = "float16"  # an int array times 2.5 is float64 either way; keep it small
    x = _inputs(dtype)
    expected = _per_example_with(program, x, *scalars)
    actual = program(x, *scalars, backend=backends.backend(backend_name))
    assert_matches_python(actual, expected, backend_name)
    with np.errstate(over="ignore"):
        dry = program(x, *scalars, dry_run=True)
    assert dry.dtype == np.asarray(actual).dtype


@backends.backend_param
def test_a_numpy_scalar_argument_stays_strong_and_compiles_apart(backend_name):
    """``np.int64(2)`` is a strong int64 per example: float32 * int64 is float64. The same
    function called first with the Python int must not reuse that program."""
    x = np.array([1.5, 2.5], np.float32)
    backend = backends.backend(backend_name)
    assert np.asarray(times_k(x, 3, backend=backend)).dtype == np.float32
    strong = times_k(x, np.int64(3), backend=backend)
    assert np.asarray(strong).dtype == np.float64
    assert times_k.python_function(x[0], np.int64(3)).dtype == np.float64
    assert np.asarray(times_k(x, 3, backend=backend)).dtype == np.float32


@ctx.batch
def add_counter_to_small(x, n):
    s = x
    for i in range(n):
        s = x + i
    return s


@ctx.batch
def add_number(x, k):
    return x + k


@backends.backend_param
def test_a_python_int_out_of_the_arrays_range_is_an_overflow_error(backend_name):
    """NumPy 2 raises for ``uint8_x + 256`` (a Python int it cannot convert)."""
    x = np.array([1, 2], np.uint8)
    with pytest.raises(OverflowError, match="Python integer 256 out of bounds for uint8"):
        add_counter_to_small.python_function(x[0], 300)
    backend = backends.backend(backend_name)
    # NumPy names the number, as NumPy does; a compiled machine names the line.
    line = inspect.getsourcelines(add_counter_to_small.python_function)[1] + 4
    eager = backend_name in backends.EAGER_NAMES
    message = "256 out of bounds for uint8" if eager else f"test_dtypes.py:{line}"
    with pytest.raises(OverflowError, match=message):
        np.asarray(add_counter_to_small(x, np.array([300, 3]), backend=backend))
    with pytest.raises(OverflowError, match="out of bounds"):
        np.asarray(add_number(x, 300, backend=backend))
    # return_status: the example that overflows is an ERROR, the other one is exact.
    result, status = add_counter_to_small(
        x, np.array([300, 3]), backend=backend, return_status=True
    )
    assert [pcbatch.LaneStatus(s) for s in np.asarray(status)] == [
        pcbatch.LaneStatus.ERROR, pcbatch.LaneStatus.OK,
    ]
    assert np.asarray(result)[1] == 4
    # In range, nothing is raised and the values are exact.
    np.testing.assert_array_equal(add_counter_to_small(x, np.array([256, 3]), backend=backend),
                                  [0, 4])


@ctx.batch
def int8_made_in_the_line(x, k):
    return x.astype(np.int8) + k


@ctx.batch
def uint8_made_in_a_loop(x, n):
    s = x.astype(np.uint8)
    for i in range(n):
        s = x.astype(np.uint8) * i
    return s


def _per_example(function, args: list) -> list:
    """The plain function on each example: its result, or the exception type it raised."""
    outcomes = []
    for row in range(len(args[0])):
        example = [a[row] if isinstance(a, np.ndarray) else a for a in args]
        try:
            with np.errstate(over="ignore"):  # a NumPy scalar's product warns where it wraps
                outcomes.append(function.python_function(*example))
        except OverflowError:
            outcomes.append(OverflowError)
    return outcomes


@backends.backend_param
@pytest.mark.parametrize(("function", "args"), [
    (int8_made_in_the_line, [np.array([1.5, 2.5]), 300]),
    (int8_made_in_the_line, [np.array([1.5, -2.5]), -130]),
    (uint8_made_in_a_loop, [np.array([1.5, 2.5, 3.0]), np.array([3, 300, 256])]),
])
def test_a_python_int_meeting_an_int_array_made_in_the_same_line(function, args, backend_name):
    """The narrow int array is made inside the primitive (no input of it is narrow):
    JAX and TensorFlow probe the conversion there too, as NumPy 2 raises per example."""
    backend = backends.backend(backend_name)
    expected = _per_example(function, args)
    assert OverflowError in expected
    with pytest.raises(OverflowError):
        np.asarray(function(*args, backend=backend))
    result, status = function(*args, backend=backend, return_status=True)
    for row, want in enumerate(expected):
        lane = pcbatch.LaneStatus(np.asarray(status)[row])
        if want is OverflowError:
            assert lane == pcbatch.LaneStatus.ERROR, row
        else:
            assert lane == pcbatch.LaneStatus.OK, row
            assert np.asarray(result)[row] == want and np.asarray(result).dtype == want.dtype


@backends.backend_param
def test_a_python_int_in_range_of_an_int_array_made_in_the_line_is_exact(backend_name):
    x = np.array([1.5, -2.5, 126.0])
    result = int8_made_in_the_line(x, 1, backend=backends.backend(backend_name))
    expected = _per_example(int8_made_in_the_line, [x, 1])
    np.testing.assert_array_equal(result, expected)  # 126 + 1 = 127, the int8 maximum
    assert np.asarray(result).dtype == np.int8


@ctx.batch
def to_int8(x):
    return x.astype(np.int8)


@ctx.batch
def to_uint8(x):
    return x.astype(np.uint8)


@backends.backend_param
def test_a_float_cast_to_a_narrow_int_is_exact_in_range(backend_name):
    """Truncation toward zero, as C casts; out of range see the next test."""
    backend = backends.backend(backend_name)
    x = np.array([-128.9, -2.7, -0.5, 0.5, 2.7, 127.9])
    for function in (to_int8, to_uint8):
        inputs = x if function is to_int8 else np.abs(x) + 127.0
        result = function(inputs, backend=backend)
        np.testing.assert_array_equal(result, _per_example(function, [inputs]))
        assert np.asarray(result).dtype == function.python_function(inputs[0]).dtype


@backends.backend_param
def test_a_float_cast_out_of_a_narrow_ints_range_is_the_backends_own(backend_name):
    """NumPy leaves such a cast undefined (a C cast; no error, a RuntimeWarning at most).
    Documented (docs/semantics/dtypes.md): no error on any backend, int8 results, and
    on the NumPy backend the plain function's own values."""
    x = np.array([300.7, -1e10, np.nan, 3.0])
    with np.errstate(invalid="ignore"):
        result = np.asarray(to_int8(x, backend=backends.backend(backend_name)))
        expected = _per_example(to_int8, [x])
    assert result.dtype == np.int8 and result[3] == 3
    if backend_name == "numpy":
        np.testing.assert_array_equal(result, expected)


@ctx.batch
def int8_scalar_type(x, k):
    return np.int8(x) + k


@backends.backend_param
def test_a_numpy_scalar_type_called_on_a_per_example_value(backend_name):
    """``np.int8(v)`` converts as ``v.astype(np.int8)``, batched on every backend (NumPy
    ran it one example at a time; JAX and TensorFlow rejected it); a Python int the
    int8 cannot hold beside it is NumPy 2's OverflowError."""
    x = np.array([1.5, 2.5])
    backend = backends.backend(backend_name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerExampleFallbackWarning)
        result = int8_scalar_type(x, 3, backend=backend)
    np.testing.assert_array_equal(result, _per_example(int8_scalar_type, [x, 3]))
    assert np.asarray(result).dtype == np.int8
    with pytest.raises(OverflowError):
        int8_scalar_type(x, 300, backend=backend)


@ctx.batch
def literal_meets_int8_made_in_the_line(x):
    return x.astype(np.int8) + 300


@backends.backend_param
def test_a_literal_out_of_the_range_of_an_int_array_made_in_the_line(backend_name):
    """Every example raises OverflowError: rejected before anything runs, at the line."""
    with pytest.raises(OverflowError):
        literal_meets_int8_made_in_the_line.python_function(np.float64(1.5))
    line = inspect.getsourcelines(literal_meets_int8_made_in_the_line.python_function)[1] + 2
    with pytest.raises(pcbatch.TypeInferenceError,
                       match=rf"(?s)test_dtypes.py:{line}.*OverflowError.*astype\(np.int64\)"):
        literal_meets_int8_made_in_the_line(np.array([1.5, 2.5]),
                                            backend=backends.backend(backend_name))


@ctx.batch
def stores_a_number(x, k):
    buf = np.zeros(2, np.int8)
    buf[0] = k
    return buf + x.astype(np.int8)


@ctx.batch
def stores_a_counter(x, n):
    buf = np.zeros(2, np.int8)
    for i in range(n):
        buf[0] = i
    return buf + x.astype(np.int8)


@backends.backend_param
def test_item_assignment_of_a_python_int_out_of_the_arrays_range(backend_name):
    """``buf[0] = k`` into an int8 ``buf``: NumPy 2 raises OverflowError for k = 300
    (it wrapped to 44 on every backend); per example, at the line."""
    backend = backends.backend(backend_name)
    x = np.array([1.5, 2.5])
    with pytest.raises(OverflowError):
        stores_a_number.python_function(x[0], 300)
    with pytest.raises(OverflowError):
        np.asarray(stores_a_number(x, 300, backend=backend))
    n = np.array([3, 300])
    expected = _per_example(stores_a_counter, [x, n])
    assert expected[1] is OverflowError
    line = inspect.getsourcelines(stores_a_counter.python_function)[1] + 4
    message = "out of bounds for int8" if backend_name == "numpy" else f"test_dtypes.py:{line}"
    with pytest.raises(OverflowError, match=message):
        np.asarray(stores_a_counter(x, n, backend=backend))
    result, status = stores_a_counter(x, n, backend=backend, return_status=True)
    assert [pcbatch.LaneStatus(s) for s in np.asarray(status)] == [
        pcbatch.LaneStatus.OK, pcbatch.LaneStatus.ERROR,
    ]
    np.testing.assert_array_equal(np.asarray(result)[0], expected[0])


@backends.backend_param
def test_item_assignment_of_a_python_int_in_range_is_exact(backend_name):
    x = np.array([1.5, 2.5])
    result = stores_a_number(x, 100, backend=backends.backend(backend_name))
    np.testing.assert_array_equal(result, _per_example(stores_a_number, [x, 100]))
    assert np.asarray(result).dtype == np.int8


@ctx.batch
def where_with_a_number(x, k):
    return np.where(x > 2, x.astype(np.int8), k)


@backends.backend_param
def test_np_where_with_a_python_int_out_of_range_casts_as_numpy(backend_name):
    """NumPy up to 2.4's ``np.where`` casts 300 to int8 (44) per example, unlike its
    arithmetic; so does every backend (pcbatch raised OverflowError, Torch at no line of
    yours). NumPy 2.5's raises OverflowError, and so does every backend then."""
    x = np.array([1.5, 2.5])
    if not per_example.NUMPY_WHERE_WRAPS:
        with pytest.raises(OverflowError, match="300 out of bounds for int8"):
            where_with_a_number.python_function(x[0], 300)
        with pytest.raises(OverflowError, match="out of bounds") as raised:
            where_with_a_number(x, 300, backend=backends.backend(backend_name))
        told = " ".join([str(raised.value), *getattr(raised.value, "__notes__", [])])
        assert "in where_with_a_number" in told  # the user's line
    else:
        assert where_with_a_number.python_function(x[0], 300) == 44
    for k in (300, 3) if per_example.NUMPY_WHERE_WRAPS else (3,):
        result = where_with_a_number(x, k, backend=backends.backend(backend_name))
        np.testing.assert_array_equal(result, _per_example(where_with_a_number, [x, k]))
        assert np.asarray(result).dtype == np.int8

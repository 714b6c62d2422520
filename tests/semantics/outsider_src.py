"""Per-example programs as a user new to pcbatch writes them (tests/semantics/test_outsider.py).

Each function is written for ONE example; parameters by name: ``x`` a float scalar (``f``
float32, with inf and nan),
``n`` an int scalar, ``v`` a float vector (3,), ``b`` a bool scalar, ``u8``, ``i16``
and ``h`` vectors (3,) of uint8, int16 and float16. The ``ctx`` functions at the end
call each other (recursion with a default, batched calls with keywords).
"""

import functools
import math
import operator

import numpy as np

import pcbatch

MODE = "fast"

# -- exact -----------------------------------------------------------------------


def math_constants(x):
    return x * math.pi + math.e - math.floor(2.5) + math.sqrt(2.0)


def builtins_of_several(x):
    return max(x, 0.0, x * 2), min(x, -x, 1.0), abs(x - 3.0)


def divmod_unpacked(n):
    q, r = divmod(n, 3)
    return q, r


def pow_of_two(n, x):
    return pow(n, 2), pow(2.0, n), pow(x, 2)


def conversions(x):
    return int(x), float(int(x)), bool(x > 0)


def while_true_break(n):
    k = 0
    while True:
        k = k + 1
        if k > abs(n):
            break
    return k


def scaled(value, scale=1.0):
    return value * scale


def helper_with_keyword(x):
    return scaled(x, scale=3.0)


def annotated_accumulator(x):
    acc: float = 0.0
    for _ in range(3):
        acc = acc + x
    return acc


def float32_sum_of_uint8(u8):
    acc = np.float32(0)
    for i in range(3):
        acc += u8[i]
    return acc


def float32_sum_of_int16(i16):
    acc = np.float32(0)
    for i in range(3):
        acc = acc + i16[i] * 2
    return acc


def float32_sum_of_float16(h):
    acc = np.float32(0)
    for i in range(3):
        acc += h[i]
    return acc


def early_return_in_nested_loops(n):
    for i in range(4):
        for j in range(4):
            if i * j > n:
                return i * 10 + j
    return -1


def builtin_sum_of_vector(v):
    return sum(v)


def array_of_a_list(x):
    values = [x, x * 2, 1.0]
    return np.array(values)


def array_of_float32_items(x):
    y = x.astype(np.float32)
    return np.array([y, 1.0]), np.array([y, y]), np.asarray([[y, y], [y, 2.0]])


def assign_into_a_copy(v):
    w = np.array(v)
    w[0] = 5.0
    w[-1] += v[1]
    return w


def smallest_from_infinity(v):
    best = math.inf
    for i in range(3):
        if v[i] < best:
            best = v[i]
    return best


def bool_flag(b, x):
    if b:
        return x
    return -x


def bool_operators(b):
    return (not b), b and True, b + 1


def negative_modulo(n):
    return n % -3, -n // 2, n % 3


def float_floor_division(x):
    return x // 0.5, x % 1.0


def loop_over_len(v):
    t = 0.0
    for i in range(len(v)):
        t = t + v[i] * i
    return t


def round_builtin(x):
    return round(x), round(x, 1), abs(int(x))


def big_python_int(n):
    return n + 2**40


def stack_with_number(x):
    return np.stack([x, x + 1.0])


def bool_arithmetic(n):
    return n * True + (n > 0)


def module_constant_mode(x):
    if MODE == "fast":
        return x * 2
    return x + 1


def nan_checks(x):
    return np.isnan(x), np.isinf(x), np.sqrt(np.abs(x))


def scalar_alias_then_add(x):
    t = 0
    for i in range(3):
        t = t + i
    best = t
    best += 1
    return best, t


def item_read_before_assignment(v):
    buf = np.zeros(3)
    s = buf[0]
    buf[0] = 5.0
    return s + v[0]


def own_view_then_add(v):
    w = v * 2
    w = w[::-1]
    w += 1
    return w


def literal_beside_a_value(x):
    return 3, x


def literal_result_meets_uint8(x, u8):
    k, y = literal_beside_a_value(x)
    return k + u8, y


def max_of_zero_and_value(n):
    return max(0, n - 3)


def value_or_zero(x):
    return x if x > 0 else 0


def return_inside_while_true(n):
    k = 0
    while True:
        k += 1
        if k >= 3:
            return k * n


def list_of_values_indexed(x):
    values = [x, x + 1.0, x + 2.0]
    return values[1] + values[-1]


def conversions_of_bool(n):
    positive = n > 0
    return int(positive), float(positive), positive * 2.5


def large_product(n):
    return n * 10**17


def math_tests_of_a_value(f):
    near = math.isclose(f, 0.25) or math.isclose(f, 2.5000001, rel_tol=1e-6)
    return math.isnan(f), math.isinf(f), math.isfinite(f), near, math.fabs(f) * f


def modular_pow_by_squaring(n):
    """What the rejection of pow(n, 5, 7) says to write."""
    r, b, e = 1, n % 7, 5
    while e > 0:
        if e % 2 == 1:
            r = r * b % 7
        b = b * b % 7
        e = e // 2
    return r


def integer_power_past_the_bit_width(n):
    """NumPy wraps ``b ** e`` over all of e's bits (JAX's power read the low six)."""
    e = n * n * 7 + 60
    return (n + 3) ** e, 3**e, np.power(n - 5, e)


# -- exact: a second round of ordinary programs ---------------------------------------


def break_in_nested_loops(n):
    hits = 0
    for i in range(4):
        for j in range(4):
            if j > i + n:
                break
            hits += 1
    return hits


def swap_by_unpacking(x, n):
    a, b = x, n * 1.5
    a, b = b, a
    return a - b


def divmod_of_floats(x):
    q, r = divmod(x, 0.75)
    s, t = divmod(x, -0.75)
    return q, r, s, t


def divmod_negative_divisor(n):
    q, r = divmod(n, -3)
    s, t = divmod(-n, 4)
    return q, r, s, t


def abs_of_int8(i8):
    return abs(i8), -i8, i8 // -1


def floor_and_mod_of_negative_floats(x):
    return x // -0.75, x % -0.75, -x // 0.3, -x % 0.3


def clip_with_none(v):
    return np.clip(v, None, 1.0), np.clip(v, 0.0, None)


def truthiness_of_floats(f):
    """nan is true, -0.0 false, as in Python."""
    return f if f else np.float32(7.0), bool(f), not f


def nan_is_not_equal_to_itself(f):
    return f != f, 0.0 <= f <= 1.0, f == f


def int_of_bool(b, n):
    return int(True) + n, int(b) * 3, b + b


def is_not_none_in_a_chain(x):
    return -1.0 < x is not None


def early_return_in_a_loop(n, x):
    for i in range(5):
        if i * x > 2.0:
            return i
    return -1


def _affine(x, *, scale=2.0, shift=-1.0):
    return x * scale + shift


def keyword_only_helper(x):
    return _affine(x), _affine(x, shift=0.5), _affine(x, scale=-1.0, shift=2.0)


def _total(*values):
    result = 0.0
    for value in values:
        result = result + value
    return result


def star_args_helper(x, n):
    return _total(x, n, 1.0), _total(x)


SQUARE = lambda y: y * y  # noqa: E731


def lambda_helper(x):
    return SQUARE(x) + 1.0


def tuple_comparisons(x, n):
    """Python compares tuples item by item: the first items that differ decide."""
    y = x * 0.0 + 2.5
    return (
        (x, n) < (y, 3), (x, n) <= (y, 3), (x, n) > (y, 3), (x, n) >= (y, 3),
        (x, n) == (y, 3), (x, n) != (y, 3), (x,) < (x, n), (n, x) == (n,),
        (np.sin(x), n) < (np.sin(y), n + 1),
    )


def best_by_tuple(v):
    """The index of the smallest item, the last one on ties (a key of two items)."""
    best = 0
    for i in range(1, len(v)):
        if (v[i], -i) < (v[best], -best):
            best = i
    return best


def local_lambda(x):
    f = lambda t: t * t - 2  # noqa: E731 - as a user writes it
    return f(x)


def reduce_with_operator(x, n):
    return functools.reduce(operator.mul, (x, 2.0, n), 1.0)


def comprehension_then_array(x):
    powers = [x**i for i in range(4)]
    return np.array(powers), sum(powers)


def square_root_by_power(x):
    return x**0.5, abs(x) ** 0.5


def bit_operations(n):
    return n & 1, n >> 1, ~n, n ^ 3, n | 4, n << 2


def mixed_number_max(x, n):
    return max(x, n), min(n, 0)


def value_or_default(x):
    return x or 1.0, x and 2.0


def round_to_tens(x):
    return round(x, -1), round(x * 10) / 10


def median_of_three(x):
    return sorted((x, 1.0, -x))[1]


def max_with_key(x):
    return max(x, -2.0, key=abs)


def bool_of_nan_float(f):
    if f:  # nan and inf are true
        return 1
    return 0


def while_with_two_exits(n):
    k = 0
    found = False
    while k < 10:
        if k * k > n:
            found = True
            break
        k += 1
    return k, found


def ternary_on_int_zero(n):
    return (10 // n) if n else 0


def nested_ternary(x):
    return 1 if x > 1 else (0 if x > -1 else -1)


# -- rejected: Python would share an array between two names ------------------------


def alias_then_add(v):
    y = v * 1
    z = y
    y += 1
    return z


def parameter_alias_then_add(v):
    z = v
    v += 1
    return z


def view_then_assign_item(v):
    buf = np.zeros(3)
    w = buf[::-1]
    w[0] = 5.0
    return buf + v


def row_view_then_add(v):
    m = np.zeros((2, 3))
    row = m[0]
    row += v
    return m


def asarray_then_assign_item(v):
    w = np.array(v)
    z = np.asarray(w)
    z[0] = 9.0
    return w


# -- rejected at the line: (function, words of the message) ------------------------


def string_flag_local(x):
    mode = "fast"
    if x > 0:
        mode = "slow"
    if mode == "fast":
        return x * 2
    return x + 1


def fstring_length(n):
    return len(f"{n}")


def str_of_value(n):
    return len(str(n))


def math_sqrt_of_value(x):
    return math.sqrt(abs(x))


def math_floor_of_value(x):
    return math.floor(x)


def math_pow_of_values(x, n):
    return math.pow(x, n) + math.atan2(n, x)


def math_gamma_of_value(x):
    return math.gamma(x)


def match_statement(n):
    match n:
        case 0:
            return 10
        case _:
            return n


def enumerate_range(n):
    t = 0
    for i, j in enumerate(range(3)):
        t = t + i * j
    return t + n


def starred_unpacking(n):
    first, *rest = (n, n + 1, n + 2)
    return first + rest[0]


def nested_function(x):
    def square(y):
        return y * y

    return square(x)


COUNTER = 0


def global_counter(x):
    global COUNTER
    COUNTER += 1
    return x


def walrus(n):
    if (m := n * 2) > 3:
        return m
    return n


def list_append(x):
    acc = []
    for i in range(3):
        acc.append(x * i)
    return np.array(acc)


def dict_of_values(x):
    d = {"a": x, "b": 2.0}
    return d["a"] * d["b"]


# -- rejected: iterating a number, which Python refuses too (TypeError) -----------


def any_of_a_number(v):
    return any(v[0])


def all_of_a_number(v):
    return all(v[0])


def sum_of_a_number(x):
    return sum(x)


def min_of_a_number(v):
    return min(v[1])


def max_of_a_number(x):
    return max(x)


def sorted_number(v):
    return sorted(v[0])[0]


def len_of_a_number(x):
    return len(x)


def list_of_a_number(v):
    return list(v[2])[0]


def tuple_of_a_number(x):
    return tuple(x)[0]


def iter_of_a_number(v):
    return next(iter(v[0]))


def modular_pow(n):
    return pow(n, 5, 7)


def none_default(x, tol=None):
    if tol is None:
        tol = 1e-8
    return x + tol


def while_else(n):
    k = 0
    while k < n:
        k += 1
    else:
        k = -k
    return k


def for_else(n):
    t = 0
    for i in range(3):
        if i == n:
            break
    else:
        t = 1
    return t


def while_else_returns(n):
    """Every path returns: in the loop, or in its ``else`` (no break)."""
    i = 0
    while i < n:
        if i * i == n:
            return i
        i += 1
    else:
        return -1


def nonlocal_counter(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()
    return x + count


def augmented_tuple_item(x):
    t = (x, 1.0)
    t[0] += 1.0
    return t


def int_and_round_of_a_float(f):
    return int(f * 2), round(f) + 1


def integer_powers(n, x):
    """Integers to negative integer powers raise (NumPy, per example); floats do not."""
    return n ** (n - 2), x ** (n - 2), 2 ** n if n >= 0 else 0, pow(n, n - 3) if n != 2 else 0


def power_of(base, exponent):
    return np.power(base, exponent)


def star_power(base, exponent):
    return base ** exponent


def builtin_power(base, exponent):
    return pow(base, exponent)


def integer_powers_in_plain_helpers(n, x):
    """The same powers inside plain helpers: JAX gave a wrong number for ``k < 0``."""
    k = n - 2
    return power_of(n, k), star_power(n, k), builtin_power(n, k), power_of(x, k)


def powers_past_the_bit_width_in_helpers(n):
    """Exponents of 64 and more inside plain helpers (JAX's power reads six bits)."""
    e = n * n * 7 + 60
    return power_of(n + 3, e), star_power(3, e), builtin_power(n - 5, e), star_power(n, 2)


def where_or_300(c, v):
    return np.where(c, v, 300)


def where_with_ints_out_of_range(b, i8):
    """np.where casts a Python int its array's dtype cannot hold (300 is 44 in int8);
    Torch raised OverflowError, JAX and TensorFlow refused it."""
    k = 300
    return np.where(b, i8, 300), np.where(b, -200, i8), np.where(b, i8, k), where_or_300(b, i8)


def clip_with_bounds_out_of_range(i8):
    """np.clip ignores a Python int bound past the dtype's range on its own side."""
    lo = -300
    return np.clip(i8, -300, 300), np.clip(i8, lo, 3), np.clip(i8.astype(np.uint8), -1, 7)


# -- weak Python scalars beside narrow dtypes (also inside jax.jit, tf.function, vmap) --


def weak_accumulator_of_float32(f):
    acc = 0.0
    for i in range(3):
        acc = acc + f * i
    return acc


def uint8_plus_a_counter(u8):
    x = u8[0]
    for i in range(50):
        x = x + i
    return x


def int16_with_a_while_counter(i16):
    x = i16[0]
    k = 0
    while k < 5:
        x = x * 3 + k
        k = k + 1
    return x, k


def int8_abs_and_negation(i8):
    return abs(i8), -i8, i8 // 2, i8 + 1


def mixed_literals_with_float32(f):
    """``f ** 2`` of a float32 ``f`` is float32 (it was float64 on every backend)."""
    k = 2
    return f * 2 + 1, 3 * f - 0.5, (f + 1) / 2, f ** 2, f ** k, 1 + 2.5 * f, f > 1


def clip_with_keyword_bounds(x, i8):
    """Bounds by keyword (a_min=, a_max=): one out of int8's range on its own side."""
    return np.clip(x, a_min=-1.0, a_max=1.0), np.clip(i8, a_min=-300, a_max=3), np.clip(x, None, 0)


def string_default(x, mode="fast"):
    if mode == "fast":
        return x * 2
    return x + 1


# -- a third round: defaults, helpers, mixed numbers (issue 24) ---------------------


def tuple_default(x, offsets=(1.0, 2.0)):
    return x + offsets[0] * offsets[1]


def array_default_indexed(x, w=np.array([0.5, 0.25])):  # noqa: B008 - what users write
    return x * w[0] + w[1]


def split_parts(x):
    return x // 1, x % 1


def helper_returning_a_tuple(x):
    whole, frac = split_parts(x)
    return whole * 2 + frac


def max_of_int_and_float(n):
    return max(n, 2.5), min(n, 1.5), abs(n - 5)


def bool_plus_bool(x):
    return (x > 0) + (x > 1), (x > 0) * 2.5, True + 1, (x > 0) - 0


def negative_int_floor_by_float(n):
    return n // 2.5, n % -1.5, -7 // 2.0, n // -2


def float_mod_negatives(x):
    return x % -2.0, -x % 3, x // -0.75


def int_float_comparisons(n, x):
    return n < x, n == 3.0, n >= x * 2, 3 < x  # noqa: SIM300


def augmented_items(x):
    buf = np.zeros(3)
    buf[1] += x
    buf[2] -= 2 * x
    buf[1] *= 3
    return buf


def float32_constant_cast(f):
    return np.float32(0.1) + f, f * np.float32(2)


def astype_int32_then_divide(x):
    return (x * 10).astype(np.int32) // 3, x.astype(np.int32) % 4


def signs_and_isclose(n, x):
    return np.sign(n), np.sign(x), np.isclose(x, 2.5), np.isclose(x, -1.5, atol=0.1)


def weak_int_division(n):
    k = 3
    return k / 2, k // 2, -k // 2, -k % 2, k / 2 * n


def int_of_division(n):
    return int(n / 2), round(n / 3), round(2.567, 1)


def nested_while_continue(n):
    total = 0
    i = 0
    while i < 4:
        i = i + 1
        if i == 2:
            continue
        j = 0
        while j < i:
            j = j + 1
            if j > abs(n):
                break
            total = total + j
    return total


def float_sqrt_power(x):
    return abs(x) ** 0.5, x ** 2.0, 2.0 ** x


def weak_float_steps(n):
    t = 0.0
    for _ in range(4):
        t = t + 0.1
    return t, t * n


def chained_mixed(n, x):
    return 0 <= n < 5 and x > 0


def zero_division_of_python_ints(n):
    """Python numbers divided by zero: Python's ZeroDivisionError (it was inf, silently)."""
    k = 0
    for i in range(2):
        k = k + i - i
    return n + 1 / k


def zero_floor_division_of_python_ints(n):
    k = 0
    for i in range(2):
        k = k * i
    return n + 7 // k


def zero_division_of_a_python_float(n):
    t = 0.0
    return n + 1.0 / t


def float_of_a_value_by_zero(x):
    """``float(x)`` is a Python float: divided by a zero literal, Python raises (it was
    inf, silently)."""
    y = float(x)
    return y / 0.0 if y < 1.0 else y % 2.0


def int_of_a_value_dividing(n):
    k = int(n)
    return 10 // k if k >= 0 else k


def reciprocal_of_a_python_float(x):
    """0.0 ** -1 of Python floats: ZeroDivisionError (it was inf, silently)."""
    y = float(x) - 0.25
    return y**-1


def power_of_ten_of_a_python_float(x):
    """Python's float power past float's range: OverflowError (it was inf, silently)."""
    return 10.0 ** (float(x) * 200.0)


def root_of_a_python_float(x):
    """A negative Python float to a fractional power is complex in Python (it was nan)."""
    return float(x) ** 0.5


def powers_of_python_floats(x):
    y = float(x)
    return y**2, 2.0**y, (abs(y) + 1.0) ** -0.5, (-2.0) ** 3.0, y**-2 if y != 0 else 0.0


def float_literal_beside_a_value(n):
    """TensorFlow made the literal float32 first: 2.5999999046 in a float64 result."""
    return n * 2, 2.6, round(2.567, 1)


def float_of_a_string(x):
    best = float("inf")
    if x < best:
        best = x
    return best, float("-inf") < x


def sum_of_a_list(x):
    """A list of values given to np.mean, np.max: JAX and TensorFlow failed there."""
    return sum([x, 2 * x, 3]), np.mean([x, 1.0]), np.max([x, -x])


def slices(v):
    return v[-1], v[::-1], v[1:].sum(), v[:2] * 2


def arange_times(x):
    return np.arange(3) * x, np.linspace(0.0, 1.0, 3) + x


def int_power_half(n):
    return abs(n) ** 0.5, n ** 2.0, float(n) ** 2


def weak_divmod(n):
    q, r = divmod(-7, 2)
    return q * n, r, abs(-3) + n, int(-2.5) + n


def min_with_zero(x):
    return min(x, 0), max(0, x), min(x, 0.0) * 2


def comparisons_with_inf(x):
    return x < math.inf, x > -math.inf, math.isinf(math.inf)


def tuple_of_mixed_return(n, x):
    if n > 0:
        return n, x
    return 0, 0.0


def bool_sum(b):
    return b + b, b * 3, sum([b, True, False])


def rate_of_python_counters(n):
    """Python ints alone divided: Python's ZeroDivisionError where no trial ran."""
    hits = 0
    trials = 0
    for i in range(abs(n)):
        trials = trials + 1
        if i % 2 == 0:
            hits = hits + 1
    return hits / trials


def rate_or_zero(n):
    hits = 0
    trials = 0
    for i in range(abs(n)):
        trials = trials + 1
        if i % 2 == 0:
            hits = hits + 1
    return hits / trials if trials > 0 else 0.0


# -- batched functions calling each other ------------------------------------------

ctx = pcbatch.Context()


@ctx.batch
def factorial(n, acc=1):
    if n <= 1:
        return acc
    return factorial(n - 1, acc=acc * n)


@ctx.batch
def scale_by(x, factor=1.0, *, shift=0.0):
    return x * factor + shift


@ctx.batch
def calls_with_keywords(x, n):
    return scale_by(x, factor=2.0, shift=0.5) + factorial(n), factorial(acc=2, n=n)


@ctx.batch
def literal_pairs(x, d):
    """Literals beside a value, through recursion (TensorFlow made them int32)."""
    if d <= 0:
        return 1, x
    k, y = literal_pairs(x, d - 1)
    return 3, y + k


@ctx.batch
def halvings(x, count=0):
    """Recursion with a default parameter passed by keyword."""
    if abs(x) < 1.0:
        return count
    return halvings(x / 2, count=count + 1)


def vector_norms(v):
    """``np.linalg.norm(v, np.inf)``: ``ord`` by position was dropped on NumPy (the
    2-norm came back, silently); TensorFlow refused every ``ord``."""
    return (np.linalg.norm(v), np.linalg.norm(v, 1), np.linalg.norm(v, np.inf),
            np.linalg.norm(v, ord=-np.inf), np.linalg.norm(v, 0), np.linalg.norm(v, 3))


def matrix_norms(m):
    return (np.linalg.norm(m), np.linalg.norm(m, "fro"), np.linalg.norm(m, 1),
            np.linalg.norm(m, -np.inf), np.linalg.norm(m, 2), np.linalg.norm(m, "nuc"),
            np.linalg.norm(m, axis=1), np.linalg.norm(m, np.inf, keepdims=True))


def norms_over_axes(t):
    return (np.linalg.norm(t, axis=(0, 2)), np.linalg.norm(t, -2, axis=(1, 2)),
            np.linalg.norm(t, "nuc", (0, 1)), np.linalg.norm(t, 3, axis=-1),
            np.linalg.norm(t, np.inf, axis=(2, 1), keepdims=True), np.linalg.norm(t, keepdims=True))


def mean_of_the_positive_items(v):
    """``v[v > 0]`` kept in a variable: each example's has its own length."""
    positive = v[v > 0]  # ERROR
    return positive.mean() if len(positive) > 0 else 0.0


def unsigned_arithmetic(n):
    """Unsigned ints (pixels, counts): TensorFlow's kernels lack -n, abs and sign of them
    (refused), and ``n ** 2`` of an int vector failed on JAX and TensorFlow ("incompatible
    shapes": the negative-power check broadcast a batch of exponents against vectors)."""
    return -n, abs(n), np.sign(n), n**2, n**3, abs(n - 5), np.square(n), n // 3, n % 3


def int_vector_powers(v, k):
    return v**2, v**k, pow(v, 3), 2**k


def square_of_an_int_vector(v):
    return v**2

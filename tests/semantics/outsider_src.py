"""Per-example programs as a user new to pcbatch writes them (tests/semantics/test_outsider.py).

Each function is written for ONE example; parameters by name: ``x`` a float scalar (``f``
float32, with inf and nan),
``n`` an int scalar, ``v`` a float vector (3,), ``b`` a bool scalar, ``u8``, ``i16``
and ``h`` vectors (3,) of uint8, int16 and float16. The ``ctx`` functions at the end
call each other (recursion with a default, batched calls with keywords).
"""

import math

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


def string_default(x, mode="fast"):
    if mode == "fast":
        return x * 2
    return x + 1


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

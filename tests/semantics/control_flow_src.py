"""Programs for tests/semantics/test_control_flow.py: each one's plain Python per example
is the oracle. Lines matter to the error tests (they look up their line by a marker)."""

from __future__ import annotations

import numpy as np

import pcbatch

ctx = pcbatch.Context()


# -- for / range --------------------------------------------------------------------
@ctx.batch
def rebind_stop(n):
    t = 0
    for _ in range(n):
        t += 1
        n = n - 1
    return t


@ctx.batch
def rebind_start_and_step(a, s):
    t = 0
    for i in range(a, 40, s):
        t += i
        a = a + 5
        s = s + 1
    return t


@ctx.batch
def rebind_loop_variable(n):
    t = 0
    for i in range(n):
        t += i
        i = i + 100
    return t, i


@ctx.batch
def loop_variable_is_the_bound(n):
    t = 0
    for n in range(n):  # noqa: B020 - the point: range() read n once
        t = t * 2 + n
    return t


@ctx.batch
def loop_variable_after(n):
    i = -1
    for i in range(n):  # noqa: B007 - the loop variable after the loop is the point
        pass
    return i


@ctx.batch
def counting_down(n, s):
    t = 0
    for i in range(n, -3, -s):
        t = t * 3 + i
    return t


@ctx.batch
def dynamic_step(n, s):
    t = 0
    for i in range(n, 10, s):  # MARK: dynamic step
        t += i
    return t


@ctx.batch
def for_with_break_and_continue(n, s):
    t, i = 0, -1
    for i in range(0, n, s):
        n = n + 1
        if i % 3 == 1:
            continue
        if t > 12:
            break
        t += i
    return t, i


@ctx.batch
def step_in_a_branch(n, s):
    t = 0
    if n > 0:
        for i in range(n, 10, s):
            t += i
    return t


# -- for over sequences (rewritten into range loops: pcbatch/frontend/desugar.py) -------
COEFFICIENTS = [1, 2.5, -1.0]
TABLE = np.array([1.0, 2.0, 4.0])


@ctx.batch
def over_items(v):
    s = 0.0
    for a in v:
        s = s + a * a
    return s


@ctx.batch
def over_rows(m):
    s = 0.0
    for row in m:
        s = s + row[0] - row[1]
    return s


@ctx.batch
def over_enumerate(v, k):
    s = 0.0
    for i, a in enumerate(v):
        s = s + i * a
    t = 0
    for i, _ in enumerate(v, k):
        t = t + i
    for i, a in enumerate(start=-1, iterable=v):  # keywords, in any order
        s = s + i * a
    return s, t


@ctx.batch
def over_zip(v, w):
    s = 0.0
    for a, b in zip(v, w):
        s = s + a * b
    for a, b in zip(v, w[:2]):  # the shorter decides
        s = s + a - b
    return s


@ctx.batch
def over_enumerate_of_zip(v, w):
    s = 0.0
    for i, (a, b) in enumerate(zip(v, w)):
        s = s + i * a + b
    return s


@ctx.batch
def over_reversed(v):
    out = 0.0
    for a in reversed(v):
        out = out * 10 + a
    return out


@ctx.batch
def over_a_reversed_range(n):
    out = 0
    for i in reversed(range(n)):
        out = out * 3 + i
    return out


@ctx.batch
def over_a_reversed_range_with_a_step(a, b, s):
    last, count = -99, 0
    for i in reversed(range(a, b, s)):  # MARK: reversed range
        last, count = i, count + 1
    return last, count


@ctx.batch
def over_a_reversed_range_of_small_ints(n):
    out = n
    for i in reversed(range(n)):
        out = out + i  # Python ints beside uint8: NumPy's rule keeps uint8
    return out


@ctx.batch
def over_an_enumerated_range(n):
    out = 0
    for j, i in enumerate(range(2, n, 3)):
        out += j * 10 + i
    return out


@ctx.batch
def over_a_range_zipped_with_rows(v, n):
    out = 0.0
    for i, a in zip(range(n), v):
        out += i * a
    for i, a in zip(reversed(range(len(v))), v):
        out = out * 2 + i * a
    return out


@ctx.batch
def over_a_tuple(x):
    s = x
    for c in (1, 2.5, x):  # each item its own type: Python's 1 and 2.5 are weak
        s = s * c
    return s


@ctx.batch
def over_a_global_list(x):
    s = x
    for c in COEFFICIENTS:
        s = s + c
    return s


@ctx.batch
def over_a_global_array(x):
    s = x
    for c in TABLE:  # NumPy's float64 items
        s = s * c
    return s


@ctx.batch
def over_items_with_break_and_continue(v):
    n = 0
    for a in v:
        if a == 0:
            continue
        if a < 0:
            break
        n += 1
    return n, a


@ctx.batch
def over_nested(m):
    s = 0.0
    for row in m:
        for a in row:
            s = s + a
    return s


@ctx.batch
def over_a_rebound_sequence(v):
    s = 0.0
    for a in v:  # the loop keeps the array it started on
        v = v * 2
        s = s + a
    return s + v[0]


@ctx.batch
def over_an_array_changed_in_place(v):
    u = np.array(v)
    s = 0.0
    for a in u:  # NumPy's iterator reads the live array
        u[len(u) - 1] = 100.0
        s = s + a
    return s


@ctx.batch
def over_a_tuple_evaluated_first(x):
    s = 0.0
    for c in (x, x + 1):  # the tuple is built before the body rebinds x
        x = x * 10
        s = s + c
    return s, x


@ctx.batch
def over_a_tuple_variable(x, n):
    pair = (x, n)  # a float and an int: each item keeps its type
    s = 0.0
    k = 0
    for a in pair:
        s = s + a
        k = k + a // 2
    return s, k


@ctx.batch
def over_no_items(v):
    b = -1.0
    for a in v[:0]:  # no trip: b stays, a stays unbound
        b = a
    return b


@ctx.batch
def over_pairs(x):
    s = 0.0
    for a, b in ((1, 2.0), (x, 3)):
        s = s + a * b
    return s


@ctx.batch
def choosing_between_tuples(n):
    a = (n, 1)
    b = (2.0, n)
    t = a if n > 1 else b  # item by item: t[1] is an int for every example
    return t[1]


@ctx.batch
def enumerate_counts_in_python_ints(v):
    acc = v[0]
    for i, a in enumerate(v):  # uint8 + Python int stays uint8 and wraps
        acc = acc + i + a
    return acc


# -- short-circuits -------------------------------------------------------------------
@ctx.batch
def fact(n):
    if n == 0:
        return 1
    return n * fact(n - 1)


@ctx.batch
def half(n):
    return n // 2


@ctx.batch
def power_and(n):
    return n >= 0 and 2 ** n > 5


@ctx.batch
def power_or(n):
    return n < 0 or 2 ** n > 5


@ctx.batch
def power_ternary(n):
    x = 2 ** n if n >= 0 else 0
    return x


@ctx.batch
def power_return_ternary(n):
    return 0 if n < 0 else 2 ** n


@ctx.batch
def guarded_division(a, b):
    return a // b if b != 0 else 0


@ctx.batch
def guarded_modulo(a, b):
    return b != 0 and a % b == 0


@ctx.batch
def not_of_short_circuit(n):
    return not (n > 0 and 10 // n > 2)


@ctx.batch
def nested_ternaries(n):
    return 10 // n if n > 0 else (-10 // (n + 1) if n < -1 else 7)


@ctx.batch
def chain_with_recursion(n):
    return 0 <= n < fact(n) + 1


@ctx.batch
def chain_with_power(n):
    return 0 <= n < 2 ** n


@ctx.batch
def chain_three(n):
    return 0 < n <= 10 // n < 4


def draw(n):
    """A plain helper with a side effect: Python calls it once per chain."""
    draw.calls += 1
    return n


draw.calls = 0


@ctx.batch
def chain_with_a_plain_call_in_the_middle(n):
    return -1 <= draw(n) < 3


@ctx.batch
def or_value(a, b):
    x = a or b
    return x


@ctx.batch
def and_value(a, b):
    return a and b


@ctx.batch
def or_value_with_call(a, b):
    return a or fact(b)


@ctx.batch
def or_reading_its_target(n):
    n = n % 2 or half(n)
    return n


@ctx.batch
def and_reading_its_target(n):
    n = n % 3 and fact(n)
    return n


@ctx.batch
def short_circuit_in_while(n):
    i = 0
    while i < n and 100 // (n - i) > 30:
        i += 1
    return i


@ctx.batch
def short_circuit_in_if(n):
    if n != 0 and 12 % n == 0:
        return 1
    return 0


@ctx.batch
def short_circuit_in_elif(n):
    if n < 0:
        r = -1
    elif n == 0 or 7 // n == 1:
        r = 2
    else:
        r = 3
    return r


@ctx.batch
def pure_short_circuits(a, b):
    # names, constants, comparisons, +, -, *: the eager per-example selection
    x = a + 1 if a > b else b - 1
    y = a > 0 and b < 3 or a == b
    z = not a < b <= a * 2
    return x, y, z


# -- rejected: decorated by the test with a context of its own -----------------------
def literal_zero_step(n):
    t = 0
    for i in range(0, n, 0):  # ERROR
        t += i
    return t


def literal_negative_zero_step(n):
    t = 0
    for i in range(n, 0, -0):  # ERROR
        t += i
    return t


def over_a_number(x):
    s = 0.0
    for a in x:  # ERROR
        s = s + a
    return s


def zip_strict(v, w):
    s = 0.0
    for a, b in zip(v, w, strict=True):  # ERROR
        s = s + a * b
    return s


def over_a_rebound_array_changed_in_place(v):
    v = np.array(v)
    s = 0.0
    for a in v:  # ERROR
        v[0] = 1.0
        v = v * 2
        s = s + a
    return s


def over_a_view_of_an_array_changed_in_place(v):
    u = np.array(v)
    s = 0.0
    for a in u[1:]:  # ERROR
        u[2] = 1.0
        s = s + a
    return s


def a_row_changed_in_place(m):
    s = 0.0
    for row in m:  # ERROR
        row[0] = 0.0
        s = s + np.sum(row)
    return s


def choosing_a_tuple_or_a_number(n):
    a = (n, 1)
    b = n
    t = a if n > 1 else b  # ERROR
    return t


def zip_of_rows(m):
    s = 0.0
    for a, b in zip(*m):  # ERROR
        s = s + a * b
    return s


# -- sum / any / all of a comprehension ---------------------------------------------
@ctx.batch
def sum_of_a_generator(v):
    return sum(a * 2.0 for a in v if a > 0)


@ctx.batch
def sum_of_a_list_with_a_start(v, w):
    return sum([a * b for a, b in zip(v, w)], 0.5)


@ctx.batch
def sum_of_nested_generators(v):
    s = sum(i * a * b for i, a in enumerate(v) for b in v if b != a)
    return s


@ctx.batch
def sum_over_a_counted_range(n):
    return sum(k * k for k in range(n) if k % 2)


@ctx.batch
def comprehension_names_do_not_leak(v):
    a = 100.0
    s = sum(a for a in v)
    return s + a


@ctx.batch
def any_and_all_in_tests(v, x):
    if x > 1.0:
        return 0
    elif any(a < x for a in v):
        return 1
    if all(a > -5.0 for a in v):
        return 2
    return 3


@ctx.batch
def any_stops_at_the_first_true_item(v, ks):
    # ks[1] is out of range: Python never indexes with it, as v[ks[0]] > 0
    return any(v[k] > 0.0 for k in ks)


@ctx.batch
def reductions_in_one_statement(v, w):
    t = 1.0
    t += sum(a for a in v) - sum(b * b for b in w)
    return t


@ctx.batch
def a_comprehension_behind_and(v, x):
    return x > 0 and sum(a for a in v) > 1  # ERROR comprehension


@ctx.batch
def sum_of_rows_from_an_array(m):
    return sum((row for row in m), np.zeros(2))


@ctx.batch
def sum_of_rows_from_zero(m):
    return sum(row for row in m)  # ERROR sum of rows


# -- max / min of a comprehension ---------------------------------------------------
@ctx.batch
def max_of_a_generator(v):
    return max(a * 2.0 for a in v if a > -2.5)


@ctx.batch
def min_of_a_list_with_a_default(v):
    m = min([abs(a) for a in v if a > 0], default=-1)
    return m


@ctx.batch
def max_over_a_counted_range(n):
    return max((k * (5 - k) for k in range(n)), default=-100)


@ctx.batch
def max_of_comparisons(v):
    return max(a > 1 for a in v)  # a bool, as Python's


@ctx.batch
def max_and_min_keep_pythons_first_item(v):
    # Python compares item > best: a NaN first stays; a NaN later is never greater
    return max(a for a in v), min(a for a in v)


@ctx.batch
def max_of_pairs_of_items(v, w):
    best = max(a * b for a in v for b in w if a != b)
    return best


@ctx.batch
def reductions_over_constants_of_per_example_items(x):
    # the items are per example although the sequences are constants
    first = any(x > k for k in range(3))
    low = min((x * k for k in (2, -1, 1) if x * k < 1.0), default=9.0)
    return first, low, sum(x for k in range(4) if x > k)


@ctx.batch
def max_with_a_key(v):
    return max((a for a in v), key=abs)  # ERROR key


@ctx.batch
def max_of_no_items(v):
    return max(a for a in v if a > 10.0)  # ERROR empty


@ctx.batch
def branch_on_a_shape(v):
    if v.ndim == 2:
        return v.trace()  # not a vector's method
    return v.sum()


@ctx.batch
def branch_on_a_dtype(v):
    """A variable holds one dtype too: the side Python does not run is not compiled, so
    its dtype does not widen the result (``v // 2`` of int8 was float64, and of int64
    past 2**53 rounded)."""
    if v.dtype.kind == "f":
        return v * 0.5
    if np.issubdtype(v.dtype, np.bool_):
        return v
    return v // 2


@ctx.batch
def dtype_tests_in_conditional_expressions(v):
    top = np.iinfo(v.dtype).max if v.dtype.kind in "iu" else np.finfo(v.dtype).max
    return (v // 3 if np.issubdtype(v.dtype, np.integer) else v * 2), top


@ctx.batch
def dtype_of_a_python_number(n):
    k = 0
    for i in range(n):
        k = k + i
    if k.dtype == np.int64:  # ERROR: a Python int has no dtype
        return n
    return -n


@ctx.batch
def shape_tests_in_an_elif_chain(v):
    if len(v) > 5:
        r = v[5]
    elif np.ndim(v) == 1 and v.shape[0] >= 2:
        r = v[1] * 10.0
    else:
        r = v[0]
    return r


@ctx.batch
def shape_test_in_a_called_function(v):
    return branch_on_a_shape(v) + np.size(v)


@ctx.batch
def shape_and_value_test(v, k):
    if v.size == 4 and k > 0:  # reads k's value: decided per example
        return v[3]
    return v[0] - 1.0


@ctx.batch
def shape_tests_in_conditional_expressions(v):
    t = v.trace() if v.ndim == 2 else v.sum()
    return t + (v[1, 0] if np.ndim(v) > 1 else v[0])


@ctx.batch
def shape_test_short_circuits_as_python_does(x):
    if x.ndim > 0 and len(x) > 2:  # len() of a number would raise: Python never calls it
        return x[2]
    return np.sum(x)


@ctx.batch
def search_with_for_else(v, target):
    """``for ... else``: the clause runs where the loop ended without a break."""
    for k, a in enumerate(v):
        if a == target:
            index = k
            break
    else:
        index = -1
    return index


@ctx.batch
def nested_loops_with_else(v):
    """An inner loop's ``else`` holds the outer loop's ``break``; ``while ... else``."""
    found = -1
    for i in range(len(v)):
        for j in range(i):
            if v[i] + v[j] == 0:
                break
        else:
            continue
        found = i
        break
    else:
        found = -2
    k = 0
    while k < len(v) and v[k] >= 0:
        k += 1
        if k > 5:
            break
    else:
        k = -k
    return found, k


LIMIT = 10.0


@ctx.batch
def checked_sqrt(x):
    """``raise`` in a branch: the examples that take it fail with the user's exception."""
    if x < 0:
        raise ValueError("x must not be negative")  # ERROR raise
    return np.sqrt(x)


@ctx.batch
def asserted_below_the_limit(x):
    assert x < LIMIT, "x is too large"  # ERROR assert
    return x * 2


@ctx.batch
def raises_in_a_while_loop(n):
    k = 0
    while k < n:
        k += 1
        if k > 5:
            raise RuntimeError("more than five steps")  # ERROR loop
    return k


@ctx.batch
def validated_helper(t):
    if t > 3:
        raise ValueError("the helper takes at most 3")  # ERROR helper
    return t + 1


@ctx.batch
def calls_the_validated_helper(x):
    return validated_helper(x) * 2

"""Per-example programs at the edges of NumPy's meaning (tests/semantics/test_edges.py):
division by zero and by infinities, indices out of bounds, and operands Python skips
that read a local some examples never assigned. Line numbers matter to the tests: each
function's checked line is its first body line unless the test says otherwise."""

import numpy as np


def divisions(a, b):
    return a // b, a % b, divmod(a, b), np.fmod(a, b)


def divided_by_a_literal_zero(a):
    return a // 0, a % 0


def read_at(v, k):
    return v[k]


def read_at_row_and_column(m, i, j):
    return m[i, j] + m[i][j]


def read_a_column(m, j):
    return m[:, j]


def read_several(v, ks):
    return v[ks]


def sum_of_the_first(v, n):
    total = 0.0
    for i in range(n):
        total += v[i]  # line 3 of the body
    return total


def item_of(v, k):
    return v[k] * 2.0


def read_in_a_plain_helper(v, k):
    return item_of(v, k)


def write_at(x, k):
    buffer = np.zeros(3)
    buffer[k] = x  # line 2 of the body
    return buffer


def add_at(x, k):
    buffer = np.ones(3)
    buffer[k] += x  # line 2 of the body
    return buffer


def read_past_the_end(v):
    return v[3]


def read_constant_indices(v):
    return v[np.array([0, 5])]


# -- operands Python evaluates for some examples only --------------------------------


def assigned_then_conditional(n):
    if n > 2:
        y = n * 2
    return y if n > 2 else -1


def assigned_on_both_paths(n):
    if n > 2:
        y = n * 2
    else:
        y = 0
    return y if n > 5 else -1


def loop_variable_behind_and(n):
    for i in range(n):
        last = i
    return n > 0 and last > 1


def loop_local_in_a_chain(n):
    negative = n < 0
    while n > 0:
        k = n
        n -= 3
    return (k > 1) if not negative and n < 0 else 0 < n < 2


def returned_inside_the_branch(n):
    if n > 2:
        y = n * 2
        return y if y > 7 else 0
    return 1


def read_by_or_when_unassigned(n):
    if n > 2:
        y = n
    return n > 2 or y  # line 3 of the body


# -- results whose length depends on the values --------------------------------------


def count_by_where(v):
    return np.where(v > 0)[0].size


def count_by_nonzero(v):
    return np.nonzero(v > 0)[0].size + len(np.argwhere(v > 0))


def sum_of_flat_indices(v):
    return np.flatnonzero(v > 0).sum()


def distinct_count(v):
    return np.unique(v).size


def masked_sum(v):
    return v[v > 0].sum()


# -- linear algebra of per-example matrices -------------------------------------------


def solved(m, b):
    x = np.linalg.solve(m, b)
    factor = np.linalg.cholesky(m)
    return x, np.linalg.inv(m) @ b, factor @ factor.T, np.linalg.solve(m, np.eye(2))


# -- sums and means of narrow integers --------------------------------------------------


def sums_and_means(v):
    m = np.stack([v, v[::-1], v])
    return (np.sum(v), v.prod(), np.cumsum(v), v.cumprod(), np.trace(m), np.mean(v),
            np.var(v), np.average(v), m.cumsum(axis=1))


def float_functions_of(v):
    return np.sqrt(v), np.exp(v), np.arctan2(v, v + 1), np.floor(v), np.isnan(v), np.rint(v)


def float16_functions_of(h):
    return np.exp2(h), np.log2(h + 1), np.logaddexp(h, h), h * h / 3


def as_python_ints(x):
    return int(x), round(x)


def membership(n, x):
    picked = 0
    for i in range(5):
        if i in (1, 3) and n not in [2, 4]:
            picked += i
    return n in (1, 2, 3), x in (0.5, n), picked, n in ()


def vector_in_a_tuple(v):
    return v in (1.0, 2.0)


# -- constant arrays indexed per example, arrays filled per example --------------------

COEF = np.array([1.0, -2.0, 0.5])
TABLE = np.arange(12.0).reshape(3, 4)


def polynomial(x):
    total = 0.0
    for i in range(3):
        total += COEF[i] * x**i
    return total


def looked_up(k):
    return COEF[k], TABLE[k], TABLE[k, k + 1], TABLE[:, k]


def filled(x, n):
    return np.full(3, x), np.full((2, 2), n, dtype=np.float32), np.full(2, 0.5) * x


def arg_extrema(v, m, n, b):
    """NaN first, then the first extreme item, along any axis, of floats, ints, bools."""
    return (
        np.argmax(v), np.argmin(v), v.argmax(), v.argmin(), np.argmax(m, axis=0),
        np.argmin(m, axis=1), np.argmax(m), np.argmax(n), np.argmin(n), np.argmax(b),
        np.argmax(m, axis=1, keepdims=True), m.argmax(axis=-1),
    )


def ufunc_methods(v, m, n, b):
    """``reduce``, ``accumulate`` and ``outer`` of ufuncs, default axis 0 as NumPy's."""
    return (
        np.minimum.reduce(v), np.maximum.accumulate(v), np.add.reduce(v),
        np.multiply.reduce(m, axis=1), np.add.accumulate(m, axis=1),
        np.maximum.reduce(m, axis=None), np.logical_or.reduce(b), np.add.reduce(n),
        np.multiply.outer(v[:2], v[1:3]), np.subtract.outer(v[:2], m[0]).sum(),
        np.minimum.accumulate(m, axis=0), np.add.reduce(m, axis=0, keepdims=True),
        np.maximum.accumulate(n),
    )


def float_vector_powers(v, w):
    """Powers of per-example float vectors: element by element, as NumPy's."""
    return np.power(v, w), v ** w, v ** 2.0, 2.0 ** w, pow(v, w), v ** w[0]


def numpy_ufunc_edges(x, n, k, b, u, s):
    """NumPy's meaning where JAX's or TensorFlow's NumPy differed: heaviside of nan,
    float_power's float64, angle's pi for -0.0 and its loop dtypes, booleans in int8 or
    float16 loops, shifts by counts outside the bit width."""
    return (
        np.heaviside(x, 0.5), np.float_power(x.astype(np.float32), 2), np.angle(x),
        np.angle(n), np.angle(b), np.angle(x, deg=True), np.round(b), np.square(b),
        n << k, n >> k, u >> s, u << s, b << b,
    )


def degrees_and_nan_to_num(x, n):
    return (
        np.degrees(x), np.radians(x), np.nan_to_num(x),
        np.nan_to_num(x.astype(np.float32), nan=-1.0, posinf=9.0), np.nan_to_num(n),
        np.degrees(n),
    )

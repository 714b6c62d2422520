"""Per-example programs whose values' shapes depend on the path or on the values
(tests/semantics/test_shapes.py). Line numbers matter to the tests: each function's
docstring-free body is checked by offset from its ``def``."""

import numpy as np


def vector_or_its_first_item(v, c):
    w = v[:1]
    if c > 0:
        w = v * 2
    return w.sum()


def product_from_a_scalar(v, n):
    acc = 1.0
    for _ in range(n):
        acc = acc * v
    return np.sum(acc)


def product_from_ones(v, n):
    acc = np.ones_like(v)
    for _ in range(n):
        acc = acc * v
    return np.sum(acc)


def prefix_sum(v, k):
    return v[:k].sum()


def window_from(v, k):
    return np.sum(v[k : k + 2])


def tail_after_a_loop(v, n):
    k = 3
    for _ in range(n):
        v = v * 2
    return v[k:]


def tail_from_a_literal(v, n):
    for _ in range(n):
        v = v * 2
    return v[3:], v[::-1], v[1:-1:2]


def masked_prefix_sum(v, k):
    return np.sum(np.where(np.arange(len(v)) < k, v, 0.0))


def zero_a_prefix(v, k):
    buf = v.copy()
    buf[:k] = 0.0
    return buf

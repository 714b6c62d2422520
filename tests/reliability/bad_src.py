"""Batched functions that misuse pcbatch at run time, with known line numbers.

Each function's offending line carries a ``# BAD`` marker; tests find that line
and check the error names it. Functions live in a file (not in the test) because
pcbatch compiles from source.
"""

import numpy as np

import pcbatch
from pcbatch.ir.types import TensorType

# Recursive functions must be batched where their own name resolves, so they get a
# context of their own here; the others are batched by the tests, each in a new one.
rec = pcbatch.Context()


def add(x, y):
    return x + y


def halve_until_small(x):
    n = 0
    while x > 1.0 and n < 60:
        x = x / 2.0
        n = n + 1
    return x, n


def countdown(n):
    total = 0
    while n > 0:
        total = total + n
        n = n - 1
    return total


def never_ends(n):
    while n > -1:  # BAD
        n = n + 1  # BAD
    return n


@rec.batch
def recurses_forever(n):
    if n < -100:  # BAD
        return n
    return recurses_forever(n + 1)  # BAD


@rec.batch
def deep(n):
    if n <= 0:
        return n
    return 1 + deep(n - 1)  # BAD


@rec.batch
def offset(n):
    return n + 0


@rec.batch
def deep_then_call(n):
    # Its base case calls another function: with the base-case test threaded into the
    # recursive call, that call's target block ends in a call of ``offset``.
    if n <= 0:
        return offset(n) + 1
    return 1 + deep_then_call(n - 1)  # BAD


def float_result(x):
    return x * 1.5  # BAD


def int_result_types(arg_types):
    return [TensorType(np.int64, ())]


def plain_factorial(n):
    if n <= 1:
        return 1
    return n * plain_factorial(n - 1)


def calls_plain_recursive(n):
    return plain_factorial(n) + 0  # BAD


def arity_mismatch(x):
    if x > 0:
        return x, x  # BAD
    return x  # BAD


def reshapes_wrongly(x):
    return np.reshape(x, (3,))  # BAD


def checked_log(x):
    if np.any(x <= 0.0):
        raise ValueError("checked_log of a non-positive value")
    return np.log(x)


def logs(x):
    return checked_log(x) * 2.0  # BAD


def nan_loop(x):
    steps = 0
    while x > 0.5 and steps < 10:
        x = x * 0.5
        steps = steps + 1
    return x, steps


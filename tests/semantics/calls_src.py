"""Batched functions for tests/semantics/test_calls.py (compiled from this file's source).

Functions decorated here run; the undecorated ones below are batched by each test in a
Context of their own, and ``# ERROR`` marks the line their error must point at."""

from __future__ import annotations

import numpy as np

import pcbatch

ctx = pcbatch.Context()

NOTHING = None


# -- defaults (D5) -------------------------------------------------------------------
@ctx.batch
def weighted(x, w=np.array([1.0, 2.0, 3.0])):  # noqa: B008 - the case under test
    return np.sum(x * w)


@ctx.batch
def scaled(x, k=2.5):
    return x * k


@ctx.batch
def paired(x, pair=(np.array([1.0, 2.0]), 3.0)):  # noqa: B008 - the case under test
    return np.sum(x * pair[0]) + pair[1]


@ctx.batch
def list_weighted(x, w=[1.0, 2.0, 3.0]):  # noqa: B006 - the case under test
    return np.sum(np.multiply(x, w))


@ctx.batch
def calls_list_weighted(x):
    return list_weighted(x)


@ctx.batch
def calls_weighted(x):
    return weighted(x) + weighted(x, np.array([0.0, 0.0, 1.0]))


# -- keyword-only and positional-only parameters (D6) ---------------------------------
@ctx.batch
def kwonly(x, *, m, k=2.0):
    return x * k + m


@ctx.batch
def posonly(a, b=10.0, /, c=1.0):
    return a * b + c


@ctx.batch
def calls_kwonly(x):
    return kwonly(x, m=1.0) + posonly(x, c=0.5)


# -- parameters named like call options (D7) -------------------------------------------
@ctx.batch
def count_up(a, max_steps=3):
    x = a
    for _ in range(max_steps):
        x = x + 1.0
    return x


@ctx.batch
def offset(x, backend=1.0, schedule=0.0):
    return x + backend + schedule


@ctx.batch
def widened(x, width=1.0):
    return x * width


# -- lists and tuples (D16) -----------------------------------------------------------
@ctx.batch
def doubled(x):
    return x * 2


@ctx.batch
def fib(n):
    if n <= 1:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch
def summed(p):
    a, b = p
    return a + b


# -- None (D4) ------------------------------------------------------------------------
@ctx.batch
def tests_is_none(x):
    if x is None:
        return x + 1.0
    if x is not None:
        return x * 2.0
    return x


@ctx.batch
def tests_global_none(x):
    if NOTHING is None:
        return x - 1.0
    return x


@ctx.batch
def optional_tol(x, tol=None):
    if tol is None:
        return x
    return x + tol


@ctx.batch
def uses_none_statically(x):
    y = x[None] * 2.0
    return np.sum(y, axis=None) + np.reshape(y, (-1,))[0]


def none_assigned(x):
    y = None  # ERROR
    if y is None:
        return x
    return x + 1


def none_returned(x):
    return None  # ERROR


def none_in_branch(x):
    y = x if x > 0 else None  # ERROR
    return y


def none_in_tuple(x):
    t = (x, None)  # ERROR
    return t[0]


def none_global(x):
    y = NOTHING  # ERROR
    return y


def none_test(x):
    if None:  # ERROR
        return x
    return x + 1


ctx_none_passed = pcbatch.Context()


@ctx_none_passed.batch
def plus(x, y):
    return x + y


@ctx_none_passed.batch
def none_passed(x):
    return plus(x, None)  # ERROR


ctx_none_default = pcbatch.Context()


@ctx_none_default.batch
def with_tol(x, tol=None):
    if tol is None:
        return x
    return x + tol


@ctx_none_default.batch
def none_default_used(x):
    return with_tol(x)  # ERROR


def identity_of_arrays(x):
    y = x + 1
    if x is y:  # ERROR
        return x
    return y


def identity_with_true(x):
    b = x > 0
    if b is True:  # ERROR
        return x
    return -x


def none_of_expression(x):
    if x + 1 is None:  # ERROR
        return x
    return -x


def _nothing(x):
    return None


def helper_returns_none(x):
    y = _nothing(x)  # ERROR
    return y + 1


#: what `noisy_helper` was called with: a side effect (docs/semantics.md, plain helpers)
helper_calls: list = []


def noisy_helper(v):
    helper_calls.append(1)
    return v * 2.0


@ctx.batch
def calls_noisy_helper(x):
    y = noisy_helper(x)
    if y > 1.0:
        y = noisy_helper(y)
    return y


def fib_by_global_name(n):
    if n <= 1:
        return n
    return fib_by_global_name(n - 1) + fib_by_global_name(n - 2)


fib_uncurried = ctx.batch_uncurried(fib_by_global_name)

other_ctx = pcbatch.Context()


@other_ctx.batch
def doubled_elsewhere(x):
    return x * 2


def calls_another_context(x):
    return doubled_elsewhere(x) + 1  # ERROR


def calls_through_an_attribute(x):
    return pcbatch_module_of_this_file.doubled(x) + 1  # ERROR


import tests.semantics.calls_src as pcbatch_module_of_this_file  # noqa: E402 - for the case above

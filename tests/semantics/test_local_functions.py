"""Functions defined inside a batched function (``def g(t): ...``, ``f = lambda t: ...``
at the top level of its body) are lifted into batched functions of their own
(`pcbatch.frontend.local_functions`): their own control flow runs per example, and the
enclosing function's variables they read are the values at each call, as Python's
closures read them. They were refused at the line ("nested def is not supported")."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pcbatch
from tests import backends


def bisection(a, b):
    f = lambda t: t * t - 2.0  # noqa: E731 - as a user writes it
    lo, hi = a, b
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        if f(mid) * f(lo) <= 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def reads_a_changing_variable(x, c):
    def scaled(t, k=2):
        if t > c:  # c as it is at each call
            return t * k
        return -t

    total = 0.0
    for i in range(3):
        c = c + 1
        total += scaled(x + i)
    return total, scaled(x, k=5)


def calls_a_sibling(x, a):
    square = lambda t: t * t + a  # noqa: E731

    def both(t):
        return square(t) + square(-t)

    return both(x)


def recursive(n):
    def factorial(k):
        if k <= 1:
            return 1
        return k * factorial(k - 1)

    return factorial(n)


def returns_a_pair(x, mode="abs"):
    def pair(t):
        return (abs(t) if mode == "abs" else t), t * 2  # a text argument: a constant

    a, b = pair(x)
    return a + b


def a_comprehension_inside(v, a):
    def total(u):
        return sum(a * b for b in u)  # b is the comprehension's own

    s = total(v)
    b = 5.0
    return s + b


CASES = {
    "a_comprehension_inside": (a_comprehension_inside,
                               (np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([2.0, 3.0]))),
    "bisection": (bisection, (np.array([0.0, 1.0, -3.0]), np.array([2.0, 1.5, 3.0]))),
    "reads_a_changing_variable": (reads_a_changing_variable,
                                  (np.array([0.5, 3.0, -1.0]), np.array([1.0, 0.0, 5.0]))),
    "calls_a_sibling": (calls_a_sibling, (np.array([0.5, 3.0]), np.array([1.0, -2.0]))),
    "recursive": (recursive, (np.array([0, 1, 5, 10]),)),
    "returns_a_pair": (returns_a_pair, (np.array([1.5, -2.0]),)),
}


@backends.backend_param
@pytest.mark.parametrize("case", CASES)
def test_a_local_function_runs_as_python_runs_it_per_example(case, backend_name):
    function, args = CASES[case]
    batched = pcbatch.Context().batch(function)
    want = batched(*args, dry_run=True)
    got = batched(*args, backend=backends.backend(backend_name))
    for g, w in zip(backends.leaves(got), backends.leaves(want)):
        backends.assert_close(g, w, backend_name)


def defined_in_a_branch(x):
    if x > 0:

        def g(t):  # MARK
            return t

        return g(x)
    return x


def passed_as_a_value(v):
    key = lambda a: -a  # noqa: E731
    return sorted(v, key=key)[0]  # MARK


def called_before_its_definition(x):
    y = g(x)  # noqa: F821 - as Python reads it: a NameError when it runs  # MARK

    def g(t):
        return t

    return y


def rebinds_its_name(x):
    g = lambda t: t  # noqa: E731
    g = 3  # MARK
    return x + g


def shadows_what_its_callee_reads(x):
    y = x + 1.0
    scale = lambda t: t * y  # noqa: E731 - reads the enclosing y

    def g(y):  # its own y would be passed on as the enclosing one  # MARK
        return scale(y) + y

    return g(x)


REFUSED = {
    "shadows_what_its_callee_reads": (shadows_what_its_callee_reads, "rename one of them"),
    "defined_in_a_branch": (defined_in_a_branch, "top level of the function's body"),
    "passed_as_a_value": (passed_as_a_value, "used as a value"),
    "called_before_its_definition": (called_before_its_definition, "before its definition"),
    "rebinds_its_name": (rebinds_its_name, "is a local function here"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_what_a_local_function_cannot_do_is_refused_at_its_line(case):
    function, words = REFUSED[case]
    with pytest.raises(pcbatch.AutobatchSyntaxError, match=words) as info:
        pcbatch.Context().batch(function)(np.array([[1.0, 2.0], [3.0, 4.0]]))
    lines, first = inspect.getsourcelines(function)
    assert info.value.lineno == next(first + i for i, t in enumerate(lines) if "# MARK" in t)

"""Batched functions taking None and text arguments, and branching on global constants
(`pcbatch.frontend.statics`); lines marked ``# ERROR`` are where a rejection points."""

from __future__ import annotations

import numpy as np

import pcbatch

ctx = pcbatch.Context()

SHIFT = None
WIDE = False
SETTINGS = np  # a module: its attributes are read as globals are


def _scaled(x, how):
    """A plain helper taking a text option."""
    return x * 2.0 if how == "double" else x


@ctx.batch
def root(a, tol=None, method="newton", max_iter=100):
    if tol is None:
        tol = 1e-10
    x = a
    if method == "newton":
        for _ in range(max_iter):
            step = (x * x - a) / (2.0 * x)
            x = x - step
            if abs(step) < tol:
                break
    elif method == "bisect":
        lo, hi = 0.0, max(a, 1.0)
        while hi - lo > tol:
            mid = 0.5 * (lo + hi)
            if mid * mid > a:
                hi = mid
            else:
                lo = mid
        x = 0.5 * (lo + hi)
    else:
        x = np.sqrt(a)
    return x


@ctx.batch
def helper_option(x, how="double"):
    return _scaled(x, how) + 1.0


@ctx.batch
def folded_or(x, scale=None):
    scale = scale or 3
    factor = 2 if scale is None else scale
    return x * factor + (1 if scale is not None and x > 0 else 0)


@ctx.batch
def countdown(n, mode="down", acc=0):
    if n <= 0:
        return acc
    if mode == "down":
        return countdown(n - 1, mode, acc + 1)
    return countdown(n - 1, acc=acc + 2, mode=mode)


@ctx.batch
def text_methods(x, method="LU"):
    if method.lower() == "lu":
        return x + 1.0
    if method.startswith("ch") and x > 0:
        return x * 2.0
    return x


@ctx.batch
def checked_method(x, method="a"):
    assert method in ("a", "b", "c"), f"unknown method {method!r}"
    for _ in range(2):
        x = x + 1.0
    if method == "a":
        return x
    elif method == "b":
        return -x
    raise NotImplementedError(f"method {method!r} is planned")


@ctx.batch
def global_none(x):
    return x if SHIFT is None else x + SHIFT


@ctx.batch
def global_flag_dtype(n):
    if WIDE:  # noqa: SIM108 - a statement if, as written
        k = 1.5
    else:
        k = 2
    return n * k


@ctx.batch
def module_attribute(x):
    if SETTINGS.pi > 3:
        return x + 1
    return x - 1


def rebound_in_loop(x, tol=None):
    for i in range(3):
        tol = 0.1 * i  # ERROR
        x = x + tol
    return x


def rebound_in_branch(x, tol=None):
    if x > 0:  # noqa: SIM108
        tol = 1.0  # ERROR
    else:
        tol = 2.0
    return x + tol


def returned(x, method="a"):
    return method  # ERROR


def held(x, tol=None):
    t = tol  # ERROR  # noqa: F841
    return x


def computed(x, tol=None):
    return x + tol  # ERROR


ctx_callee = pcbatch.Context()


@ctx_callee.batch
def callee(x, flag):
    return x + flag


@ctx_callee.batch
def passes_text(x, how="up"):
    return callee(x, how)  # ERROR


ctx_other_value = pcbatch.Context()


@ctx_other_value.batch
def recurses_with_another_value(n, mode="down"):
    if n <= 0:
        return 0
    return 1 + recurses_with_another_value(n - 1)  # ERROR


def unassigned_for_this_value(x, method="b"):
    if method == "a":
        y = x
    return y  # ERROR


def raise_after_a_per_example_return(x, method="a"):
    if x > 0:
        return x
    if method == "a":
        raise ValueError("negative")  # ERROR
    return x


def raise_in_a_loop(x, method="a"):
    for _ in range(3):
        if method == "a":
            raise ValueError("in a loop")  # ERROR
    return x


def raise_with_a_per_example_value(x, method="a"):
    if method == "a":
        raise ValueError(x)  # ERROR
    return x


ctx_raising_callee = pcbatch.Context()


@ctx_raising_callee.batch
def raising_callee(x):
    if SHIFT is None:
        raise ValueError("only where called")  # ERROR
    return x


@ctx_raising_callee.batch
def calls_a_raising_callee(x):
    if x > 100.0:
        return raising_callee(x)
    return x


DEBUG = False


@ctx.batch
def library_version_check(v):
    """The version check a library user writes: np.trapz is gone from NumPy 2.x."""
    if hasattr(np, "trapezoid"):  # noqa: SIM108 - a statement if, as written
        area = np.trapezoid(v)
    else:
        area = np.trapz(v)  # noqa: NPY201 - never runs on NumPy 2
    return area + (np.trapezoid(v) if hasattr(np, "trapezoid") else np.trapz(v))  # noqa: NPY201


@ctx.batch
def debugging_left_in(n):
    """Dead code under a global flag: Python never runs it, so it may hold what a batched
    function cannot (print, try, an import)."""
    t = 0
    for i in range(n):
        if DEBUG:
            import sys

            try:  # noqa: SIM105 - the try a user writes
                print(i, file=sys.stderr)
            except OSError:
                pass
        t += i
    return t if not DEBUG else print(t)

"""Batched functions with inexact float arithmetic, for the determinism tests."""

import numpy as np

import pcbatch

ctx = pcbatch.Context()


@ctx.batch
def wiggle(x, n):
    """A recursive walk whose floats go through sin, exp and reductions over an event."""
    if n <= 0:
        return np.sum(np.sin(x) * np.exp(-x * x)), x
    s, y = wiggle(np.cos(x) * 1.3 + 0.1 * n, n - 1)
    total = 0.0
    for i in range(n):
        total = total + np.mean(np.tanh(y * (i + 1))) / (1.0 + i)
        if total > 0.7:
            break
    return s * 0.5 + total, y / (1.0 + np.abs(y))


@ctx.batch
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@ctx.batch
def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)

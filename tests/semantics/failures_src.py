"""Batched functions for tests/semantics/test_failures.py (compiled from this file)."""

import pcbatch

ctx = pcbatch.Context()


@ctx.batch
def fib(n):
    if n <= 1:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch
def halved(x, n):
    """x / 2**n, through n nested calls (not tail calls: each needs a stack level)."""
    if n <= 0:
        return x
    return 0.5 * halved(x, n - 1)


@ctx.batch
def collatz(x):
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def collatz_plain(x):
    """The oracle: the undecorated function, one example."""
    return collatz.python_function(x)


def fib_plain(n):
    """The oracle: fib written plainly (the undecorated fib calls the batched one)."""
    return n if n <= 1 else fib_plain(n - 1) + fib_plain(n - 2)


@ctx.batch
def fib_pair(n):
    """(fib(n), fib(n) / 2): two results of two dtypes."""
    if n <= 1:
        return n, 0.5 * n
    a, b = fib_pair(n - 1)
    c, d = fib_pair(n - 2)
    return a + c, b + d

"""Example programs written with the DSL: used by the demo, the benchmarks and the tests.

Each ``build_*`` returns a structured `Program`; ``*_one`` is the same
computation for one example in plain Python, for checking.
"""

from __future__ import annotations

import numpy as np

from pcbatch import dsl
from pcbatch.ir.nodes import Program

__all__ = [
    "build_collatz",
    "build_fib",
    "build_nuts_tree",
    "build_tree",
    "collatz",
    "collatz_one",
    "context",
    "fib",
    "fib_one",
    "fib_peer",
    "is_even",
    "is_odd",
    "nuts_tree_one",
    "trajectories",
]

MOD = 65536  # keeps the tree program's integers small and its results exact


def add(a, b):
    """The addition of `build_fib`, a named function so profiles can count it."""
    return np.add(a, b)


def build_fib() -> Program:
    """``fib(n) = 1 if n <= 2 else fib(n - 1) + fib(n - 2)``: a doubly recursive function."""
    mb = dsl.ModuleBuilder()
    fib = mb.declare("fib", params=("n",), returns=1)
    with mb.define(fib) as f:
        small = f.prim(lambda n: n <= 2, "n", name="le2")
        with f.if_(small):
            f.return_(f.const(1))
        with f.else_():
            a = f.call(fib, f.prim(lambda n: n - 1, "n", name="dec1"))
            b = f.call(fib, f.prim(lambda n: n - 2, "n", name="dec2"))
            f.return_(f.prim(add, a, b))
    return mb.program("fib")


def fib_one(n: int) -> int:
    a, b = 1, 1
    for _ in range(max(int(n) - 2, 0)):
        a, b = b, a + b
    return b


def build_collatz() -> Program:
    """The number of Collatz steps from ``x`` to 1: a data-dependent loop."""
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",), returns=1) as f:
        f.copy("x", out="cur")
        f.const(0, out="steps")
        with f.loop():
            f.break_unless(f.prim(lambda c: c != 1, "cur", name="not_one"))
            f.prim(lambda c: np.where(c % 2 == 0, c // 2, 3 * c + 1), "cur", out="cur", name="step")
            f.prim(lambda s: s + 1, "steps", out="steps", name="inc")
        f.return_("steps")
    return mb.program("main")


def collatz_one(x: int) -> int:
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def _leaf(x):
    return (x * 1103 + 12345) % MOD


def _stops(v):
    return v % 7 == 0


def build_nuts_tree() -> Program:
    """A program shaped like NUTS: a doubly recursive tree build with a data-dependent
    early stop, inside a loop that runs a per-example number of trajectories."""
    mb = dsl.ModuleBuilder()
    build = mb.declare("build", params=("depth", "x"), returns=2)
    with mb.define(build) as f:
        with f.if_(f.prim(lambda d: d == 0, "depth", name="is_leaf")):
            value = f.prim(_leaf, "x", name="leaf")
            f.return_(value, f.prim(_stops, value, name="stops"))
        d1 = f.prim(lambda d: d - 1, "depth", name="dec")
        v1, s1 = f.call(build, d1, "x")
        with f.if_(s1):
            f.return_(v1, s1)
        x2 = f.prim(lambda x, v: (x + v) % MOD, "x", v1, name="advance")
        v2, s2 = f.call(build, d1, x2)
        total = f.prim(lambda a, b: (a + 3 * b) % MOD, v1, v2, name="combine")
        stop = f.prim(lambda s, t: s | (t % 11 == 0), s2, total, name="u_turn")
        f.return_(total, stop)
    with mb.define("main", params=("x", "n_traj"), returns=2) as f:
        f.const(0, out="i")
        f.const(0, out="acc")
        with f.loop():
            f.break_unless(f.prim(np.less, "i", "n_traj"))
            depth = f.prim(lambda i: i % 4, "i", name="depth_of")
            value, _ = f.call(build, depth, "x")
            f.prim(lambda a, v: (a + v) % MOD, "acc", value, out="acc", name="accumulate")
            f.prim(lambda x, v: (x + v + 1) % MOD, "x", value, out="x", name="move")
            f.prim(lambda i: i + 1, "i", out="i", name="inc")
        f.return_("acc", "x")
    return mb.program("main")


def nuts_tree_one(x: int, n_traj: int) -> tuple:
    def build(depth, x):
        if depth == 0:
            v = _leaf(x)
            return v, bool(_stops(v))
        v1, s1 = build(depth - 1, x)
        if s1:
            return v1, s1
        v2, s2 = build(depth - 1, (x + v1) % MOD)
        total = (v1 + 3 * v2) % MOD
        return total, bool(s2 or total % 11 == 0)

    acc = 0
    for i in range(n_traj):
        value, _ = build(i % 4, x)
        acc = (acc + value) % MOD
        x = (x + value + 1) % MOD
    return acc, x


# ---------------------------------------------------------------------------
# The same programs written as ordinary Python, batched by the frontend.

from pcbatch.api import Context  # noqa: E402 - the DSL programs above need no frontend

context = Context()


@context.batch
def fib(n):
    """The seed's Fibonacci, written plainly."""
    if n <= 1:
        return n
    return fib(n - 1) + fib(n - 2)


@context.batch
def collatz(x):
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


@context.batch
def build_tree(depth, x):
    """A doubly recursive tree build with a data-dependent early stop, like NUTS's."""
    if depth == 0:
        value = (x * 1103 + 12345) % MOD
        return value, value % 7 == 0
    left, stop = build_tree(depth - 1, x)
    if stop:
        return left, stop
    right, stop = build_tree(depth - 1, (x + left) % MOD)
    total = (left + 3 * right) % MOD
    return total, stop or total % 11 == 0


@context.batch
def trajectories(x, n_traj):
    """A loop of tree builds of growing depth: NUTS's shape, one chain per batch member."""
    acc = 0
    for i in range(n_traj):
        value, _ = build_tree(i % 4, x)
        acc = (acc + value) % MOD
        x = (x + value + 1) % MOD
    return acc, x


@context.batch
def fib_peer(n):
    """Fibonacci with the seed peer's base case (n <= 2 gives 1), for like-for-like timing."""
    if n <= 2:
        return 1
    return fib_peer(n - 1) + fib_peer(n - 2)


@context.batch
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@context.batch
def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)

"""A corpus of hand-built programs, written with `pcbatch.dsl`, for differential tests.

Each `CorpusProgram` builds a structured program (no types yet) and makes
random batched arguments for it. Tests compare every execution strategy with
`pcbatch.vm.reference.run_batch`; ``reference``, where given, is plain Python
computing one example's result, checking the IR itself.

``max_stack_depth`` is enough for the arguments ``make_args`` produces
(``tail_sum`` relies on tail calls being optimized for its depth of 3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch import dsl
from pcbatch.examples import (
    MOD as _MOD,
)
from pcbatch.examples import (
    build_collatz,
    build_fib,
    build_nuts_tree,
)
from pcbatch.examples import (
    collatz_one as _collatz,
)
from pcbatch.examples import (
    fib_one as _fib,
)
from pcbatch.examples import (
    nuts_tree_one as _nuts_tree,
)
from pcbatch.ir.nodes import Program


@dataclasses.dataclass(frozen=True)
class CorpusProgram:
    """One corpus entry.

    Attributes:
      name: a unique identifier (used as the pytest id).
      build: makes the (untyped, structured) program.
      make_args: ``(rng, batch_size) -> list of arrays``, each with a leading
        batch dimension.
      max_stack_depth: a stack depth sufficient for those arguments.
      reference: optional plain-Python ``(*example_args) -> result`` for one
        example (a scalar/array, or a tuple when main returns several values).
      needs_tail_calls: ``max_stack_depth`` suffices only once tail calls are
        optimized.
    """

    name: str
    build: Callable[[], Program]
    make_args: Callable[[np.random.RandomState, int], list]
    max_stack_depth: int
    reference: Callable[..., Any] | None = None
    needs_tail_calls: bool = False


def _ints(rng: np.random.RandomState, low: int, high: int, batch_size: int) -> np.ndarray:
    """Uniform int64 in [low, high] (inclusive)."""
    return rng.randint(low, high + 1, size=batch_size).astype(np.int64)


# ---------------------------------------------------------------------------
# Straight-line and branching programs


def build_constant() -> Program:
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",), returns=1) as f:
        f.return_(f.const(42))
    return mb.program("main")


def build_single_if() -> Program:
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",), returns=1) as f:
        positive = f.prim(lambda x: x > 0, "x", name="positive")
        with f.if_(positive):
            f.prim(lambda x: x * 2.0, "x", out="r", name="double")
        with f.else_():
            f.prim(np.negative, "x", out="r")
        f.return_("r")
    return mb.program("main")


def build_nested_patterns() -> Program:
    mb = dsl.ModuleBuilder()
    divmod_ = mb.declare("divmod", params=("a", "b"), returns=2)
    with mb.define(divmod_) as f:
        f.prim(lambda a, b: (a // b, a % b), "a", "b", out=("q", "r"), name="divmod")
        f.return_("q", "r")
    with mb.define("main", params=("x",), returns=2) as f:
        f.prim(lambda x: (x, (x + 1, x * 2)), "x", out=("a", ("b", "c")), name="spread")
        # ``p`` holds a whole nested pattern in one variable.
        f.prim(lambda x: (x + 3, (x - 1, x * x)), "x", out="p", name="pack")
        f.prim(lambda p: p[1][0] + p[1][1] + p[0], "p", out="s", name="unpack")
        q, r = f.call(divmod_, "s", "b")
        f.prim(lambda a, c, q: a + c + q, "a", "c", q, out="total", name="sum3")
        f.return_("total", r)
    return mb.program("main")


def _nested_patterns_reference(x):
    s = (x - 1) + x * x + (x + 3)
    q, r = divmod(s, x + 1)
    return x + 2 * x + q, r


# ---------------------------------------------------------------------------
# Recursion


def build_even_odd() -> Program:
    mb = dsl.ModuleBuilder()
    even = mb.declare("even", params=("n",), returns=1)
    odd = mb.declare("odd", params=("n",), returns=1)
    for this, other, base in ((even, odd, True), (odd, even, False)):
        with mb.define(this) as f:
            zero = f.prim(lambda n: n == 0, "n", name="is_zero")
            with f.if_(zero):
                f.return_(f.const(base))
            f.return_(f.call(other, f.prim(lambda n: n - 1, "n", name="dec")))
    return mb.program("even")


def build_gcd_mod() -> Program:
    mb = dsl.ModuleBuilder()
    gcd = mb.declare("gcd", params=("a", "b"), returns=1)
    with mb.define(gcd) as f:
        done = f.prim(lambda b: b == 0, "b", name="is_zero")
        with f.if_(done):
            f.return_("a")
        rem = f.prim(np.mod, "a", "b")
        f.return_(f.call(gcd, "b", rem))
    return mb.program("gcd")


def build_gcd_swap() -> Program:
    mb = dsl.ModuleBuilder()
    gcd = mb.declare("gcd", params=("a", "b"), returns=1)
    with mb.define(gcd) as f:
        done = f.prim(lambda b: b == 0, "b", name="is_zero")
        with f.if_(done):
            f.return_("a")
        smaller = f.prim(np.less, "a", "b")
        with f.if_(smaller):
            f.return_(f.call(gcd, "b", "a"))
        f.return_(f.call(gcd, f.prim(np.subtract, "a", "b"), "b"))
    return mb.program("gcd")


def build_tail_sum() -> Program:
    mb = dsl.ModuleBuilder()
    sum_ = mb.declare("sum", params=("n", "acc"), returns=1)
    with mb.define(sum_) as f:
        done = f.prim(lambda n: n == 0, "n", name="is_zero")
        with f.if_(done):
            f.return_("acc")
        n1 = f.prim(lambda n: n - 1, "n", name="dec")
        acc1 = f.prim(np.add, "acc", "n")
        f.return_(f.call(sum_, n1, acc1))
    with mb.define("main", params=("n",), returns=1) as f:
        f.return_(f.call(sum_, "n", f.const(0)))
    return mb.program("main")


def build_ackermann() -> Program:
    mb = dsl.ModuleBuilder()
    ack = mb.declare("ack", params=("m", "n"), returns=1)
    with mb.define(ack) as f:
        with f.if_(f.prim(lambda m: m == 0, "m", name="m_is_zero")):
            f.return_(f.prim(lambda n: n + 1, "n", name="inc"))
        m1 = f.prim(lambda m: m - 1, "m", name="dec")
        with f.if_(f.prim(lambda n: n == 0, "n", name="n_is_zero")):
            f.return_(f.call(ack, m1, f.const(1)))
        inner = f.call(ack, "m", f.prim(lambda n: n - 1, "n", name="dec"))
        f.return_(f.call(ack, m1, inner))
    return mb.program("ack")


def _ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return _ack(m - 1, 1)
    return _ack(m - 1, _ack(m, n - 1))


def build_live_across_recursion() -> Program:
    """``sq_sum(n) = n*n + sq_sum(n - 1)``: ``n`` must survive the recursive call."""
    mb = dsl.ModuleBuilder()
    sq_sum = mb.declare("sq_sum", params=("n",), returns=1)
    with mb.define(sq_sum) as f:
        with f.if_(f.prim(lambda n: n == 0, "n", name="is_zero")):
            f.return_("n")
        rest = f.call(sq_sum, f.prim(lambda n: n - 1, "n", name="dec"))
        f.return_(f.prim(lambda n, r: n * n + r, "n", rest, name="sq_add"))
    return mb.program("sq_sum")


def build_two_call_sites() -> Program:
    """``x`` is live across two calls of the same function."""
    mb = dsl.ModuleBuilder()
    with mb.define("poly", params=("y",), returns=1) as f:
        f.return_(f.prim(lambda y: y * y - 3 * y, "y", name="poly"))
    with mb.define("main", params=("x",), returns=1) as f:
        a = f.call("poly", "x")
        b = f.call("poly", f.prim(lambda a, x: a + x, a, "x", name="shift"))
        f.return_(f.prim(lambda a, b, x: a + 2 * b - x, a, b, "x", name="mix"))
    return mb.program("main")


def _two_call_sites(x):
    def poly(y):
        return y * y - 3 * y

    a = poly(x)
    b = poly(a + x)
    return a + 2 * b - x


def build_self_update() -> Program:
    """``x = f(x)`` for a primitive and for a call."""
    mb = dsl.ModuleBuilder()
    with mb.define("bump", params=("x",), returns=1) as f:
        f.return_(f.prim(lambda x: x + 7, "x", name="add7"))
    with mb.define("main", params=("x",), returns=1) as f:
        f.prim(lambda x: x * 3, "x", out="x", name="triple")
        f.call("bump", "x", out="x")
        f.prim(lambda x: x - 1, "x", out="x", name="dec")
        f.return_("x")
    return mb.program("main")


# ---------------------------------------------------------------------------
# Loops


def build_halve_vector() -> Program:
    """Float64 vectors of shape [3]: halve until the norm drops below 1."""
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("v",), returns=2) as f:
        f.const(0, out="count")
        with f.loop():
            big = f.prim(lambda v: np.linalg.norm(v, axis=-1) >= 1.0, "v", name="norm_ge1")
            f.break_unless(big)
            f.prim(lambda v: v * 0.5, "v", out="v", name="halve")
            f.prim(lambda c: c + 1, "count", out="count", name="inc")
        f.return_("v", "count")
    return mb.program("main")


def _halve_vector(v):
    count = 0
    while np.linalg.norm(v) >= 1.0:
        v = v * 0.5
        count += 1
    return v, count


# A NUTS-shaped program: a loop of trajectories, each a doubly-recursive tree
# build with a data-dependent early stop, over integer "states" so results
# are exact.
# ---------------------------------------------------------------------------
# The corpus


def _one_int(low: int, high: int):
    return lambda rng, n: [_ints(rng, low, high, n)]


CORPUS = [
    CorpusProgram("constant", build_constant, _one_int(-5, 5), 1, reference=lambda x: 42),
    CorpusProgram(
        "single_if",
        build_single_if,
        lambda rng, n: [rng.normal(size=n)],
        1,
        reference=lambda x: x * 2.0 if x > 0 else -x,
    ),
    CorpusProgram(
        "nested_patterns",
        build_nested_patterns,
        _one_int(1, 20),
        2,
        reference=_nested_patterns_reference,
    ),
    CorpusProgram("fib", build_fib, _one_int(1, 12), 12, reference=_fib),
    CorpusProgram("even_odd", build_even_odd, _one_int(0, 30), 32, reference=lambda n: n % 2 == 0),
    CorpusProgram(
        "gcd_mod",
        build_gcd_mod,
        lambda rng, n: [_ints(rng, 1, 200, n), _ints(rng, 0, 200, n)],
        16,
        reference=np.gcd,
    ),
    CorpusProgram(
        "gcd_swap",
        build_gcd_swap,
        lambda rng, n: [_ints(rng, 1, 20, n), _ints(rng, 1, 20, n)],
        48,
        reference=np.gcd,
    ),
    CorpusProgram(
        "tail_sum",
        build_tail_sum,
        _one_int(0, 50),
        3,
        reference=lambda n: n * (n + 1) // 2,
        needs_tail_calls=True,
    ),
    CorpusProgram(
        "ackermann",
        build_ackermann,
        lambda rng, n: [_ints(rng, 0, 2, n), _ints(rng, 0, 3, n)],
        16,
        reference=_ack,
    ),
    CorpusProgram(
        "live_across_recursion",
        build_live_across_recursion,
        _one_int(0, 20),
        22,
        reference=lambda n: n * (n + 1) * (2 * n + 1) // 6,
    ),
    CorpusProgram(
        "two_call_sites", build_two_call_sites, _one_int(-10, 10), 2, reference=_two_call_sites
    ),
    CorpusProgram(
        "self_update", build_self_update, _one_int(-100, 100), 2, reference=lambda x: 3 * x + 6
    ),
    CorpusProgram("collatz", build_collatz, _one_int(1, 30), 1, reference=_collatz),
    CorpusProgram(
        "halve_vector",
        build_halve_vector,
        lambda rng, n: [rng.normal(scale=10.0, size=(n, 3))],
        1,
        reference=_halve_vector,
    ),
    CorpusProgram(
        "nuts_tree",
        build_nuts_tree,
        lambda rng, n: [_ints(rng, 0, _MOD - 1, n), _ints(rng, 1, 5, n)],
        6,
        reference=_nuts_tree,
    ),
]

CORPUS_BY_NAME = {p.name: p for p in CORPUS}

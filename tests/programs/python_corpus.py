"""A corpus of plain-Python programs for differential tests of the ``ctx.batch`` frontend.

Every program is written for ONE example and decorated with ``@ctx.batch``.
Control flow is per example. Straight-line code is written to be right under
either view of a value: per example (no batch dimension, as ``dry_run`` and the
frontend's `BatchedArray` primitives present it) or batch-major (a leading batch
dimension of size 1 or B). So event components are read with ``x[..., i]`` (or
`take` for a per-example index), event reductions use ``axis=-1``, per-example
scalars broadcast against events through ``s[..., None]``, and nothing uses
``len``, ``x[0]`` or ``axis=0`` on a batched value.

Each `PyProgram` names the decorated entry function, makes random batched
arguments, gives a stack depth sufficient for them, and optionally a plain
Python ``reference`` for one example (independent of pcbatch) that checks the
program itself. The comment above each program lists the constructs it covers;
the module docstring of ``tests/test_frontend_corpus.py`` says what is compared.

While ``pcbatch.Context`` does not exist yet, ``ctx.batch`` is the identity so
this module still imports (the frontend tests skip themselves).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

import pcbatch
from pcbatch import examples

Context = getattr(pcbatch, "Context", None)


class _NoContext:
    """Stands in for `pcbatch.Context` before the frontend exists."""

    def batch(self, fn):
        return fn


def _new_context():
    return Context() if Context is not None else _NoContext()


ctx = _new_context()
# A second context: programs decorated here must not see (or clash with) ``ctx``'s.
ctx_aux = _new_context()


@dataclasses.dataclass(frozen=True)
class PyProgram:
    """One corpus entry.

    Attributes:
      name: a unique identifier (the pytest id).
      fn: the decorated entry function; tests call ``fn(*args)`` positionally.
      make_args: ``(rng, batch_size) -> list of arrays``, each with a leading
        batch dimension (entries with defaults may pass fewer than all params).
      max_stack_depth: a stack depth sufficient for those arguments (measured
        as the deepest nesting of decorated calls, entry included, plus slack).
      reference: optional plain Python ``(*example_args) -> result`` for one
        example, given each argument's row ``a[i]``.
    """

    name: str
    fn: Callable[..., Any]
    make_args: Callable[[np.random.RandomState, int], list]
    max_stack_depth: int = 15
    reference: Optional[Callable[..., Any]] = None


# ---------------------------------------------------------------------------
# Argument makers


def _ints(rng: np.random.RandomState, low: int, high: int, batch_size: int) -> np.ndarray:
    """Uniform int64 in [low, high] (inclusive)."""
    return rng.randint(low, high + 1, size=batch_size).astype(np.int64)


def _floats(rng, low, high, batch_size, event=()) -> np.ndarray:
    return rng.uniform(low, high, size=(batch_size, *event)).astype(np.float64)


def _int_args(*ranges):
    return lambda rng, n: [_ints(rng, lo, hi, n) for lo, hi in ranges]


def _float_args(*ranges):
    return lambda rng, n: [_floats(rng, lo, hi, n) for lo, hi in ranges]


# ---------------------------------------------------------------------------
# Plain (undecorated) helpers: they receive batched values.


def take(v, i):
    """``v[..., i]`` per example, ``i`` a Python int or a per-example int.

    A one-hot select rather than ``np.take_along_axis``, so it is fast whether
    values carry their batch dimension or hide it (per-example semantics).
    """
    hit = np.arange(v.shape[-1]) == np.add(i, 0)[..., None]
    return np.sum(np.where(hit, v, 0.0), axis=-1)


def safe_lookup(v, i):
    """``v[..., i]`` for events of size 3; raises, like Python indexing, if any ``i`` is out
    of range. Under batching it must only ever see the examples that reach it."""
    if np.any((i < 0) | (i >= 3)):
        raise IndexError("safe_lookup: index out of range")
    return take(v, i)


def checked_floordiv(a, b):
    """``a // b``, raising like Python ints do when any divisor is zero."""
    if np.any(b == 0):
        raise ZeroDivisionError("checked_floordiv by zero")
    return a // b


def minmax(a, b):
    return np.minimum(a, b), np.maximum(a, b)


def divmod_helper(a, b):
    return a // b, a % b


def norm3(v):
    return np.sqrt(np.sum(v * v, axis=-1))


def normalize(v):
    return v / norm3(v)[..., None]


def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def cubic(x, c):
    return x * x * x + x - c


# Module globals read by decorated functions.
OFFSET = 7
TOL = 1e-9
MAX_NEWTON = 8
LIMIT = 1000
WEIGHTS = np.array([1.0, 2.0, 4.0])
NUTS_MOD = examples.MOD
# `shadow_global`'s parameter `n` shadows this global; `add_global_n` reads it.
n = 100

Oscillator = collections.namedtuple("Oscillator", ["pos", "vel", "steps"])
Interval = collections.namedtuple("Interval", ["lo", "hi"])


# ===========================================================================
# Straight-line code and branches


# straight-line arithmetic; int literals mixed with arrays; module global constant
@ctx.batch
def affine(x):
    y = 3 * x + OFFSET
    return y - x // 2


# if/else; a variable first assigned inside both branches; float literal
@ctx.batch
def abs_branch(x):
    if x < 0:
        y = -x
    else:
        y = x
    return y * 2.0


# if/elif/else chain; return in every branch; int literals as return values
@ctx.batch
def sign_elif(x):
    if x > 0.5:
        return 1
    elif x < -0.5:
        return -1
    elif x > 0.0:
        return 2
    else:
        return 0


# nested if inside if/else; plain numpy call (np.sqrt) in a branch
@ctx.batch
def piecewise(x, y):
    if x > 0:
        if y > 0:
            r = x + y
        else:
            r = x - y
    else:
        r = x * y
        if r > 1.0:
            r = np.sqrt(r)
    return r


# conditional expressions, nested, with literal arms
@ctx.batch
def cond_expr(x, y):
    m = x if x > y else y
    s = -1.0 if x < 0 else (0.0 if x == 0 else 1.0)
    return m * s + (y if m > 1.0 else 0.0)


# chained comparisons in if/elif and inside a conditional expression
@ctx.batch
def chained_cmp(x, lo, hi):
    if lo <= x < hi:
        region = 1
    elif x < lo <= hi:
        region = 2
    elif lo <= hi <= x:
        region = 3
    else:
        region = 4
    return region * 10 + (1 if 0 < x < 10 else 0)


# and / or / not in conditions (incl. a three-way `and` and `not (...)`); `+=` on a counter
@ctx.batch
def bool_ops(x, y):
    count = 0
    if x > 0 and y > 0:
        count += 1
    if x > 0 or y > 0:
        count += 10
    if not x > y:
        count += 100
    if not (x > 0 and y > 0) or x == y:
        count += 1000
    if x > 0 and y > 0 and x + y > 5:
        count += 10000
    return count


# and / or / not as VALUES on bool operands; tuple return of bools
@ctx.batch
def bool_values(x, y):
    both = x > 0 and y > 0
    either = x > 0 or y > 0
    neither = not either
    mixed = (x > y or y > 3) and not x == y
    return both, either, neither, mixed


# and / or as VALUES on int operands (Python truthiness: nonzero), e.g. `a or b`
@ctx.batch
def or_default_int(a, b):
    first = a or b
    second = a and b
    return first * 100 + second


# short-circuit that matters: the helper raises on examples Python never passes to it
@ctx.batch
def guarded_lookup(v, count):
    hits = 0
    for i in range(0, count):
        if i < 3 and safe_lookup(v, i) > 0.0:
            hits += 1
        if i >= 3 or safe_lookup(v, i) < -0.5:
            hits += 100
    return hits


# short-circuit guarding a division by zero, in an `if` and as a bool value
@ctx.batch
def guarded_div(a, d):
    if d != 0 and checked_floordiv(a, d) > 2:
        return checked_floordiv(a, d)
    ok = d == 0 or checked_floordiv(a, d) < 0
    return -1 if ok else 0


# short-circuit `and` in a while condition; the counter starts as a Python int literal
@ctx.batch
def first_big(v, thr):
    i = 0
    while i < 3 and safe_lookup(v, i) < thr:
        i += 1
    return i


# augmented assignment: += -= *= //= %= /= **= on fresh locals
@ctx.batch
def aug_assign(x, y):
    acc = x * 1
    acc += y
    acc *= 3
    acc -= x
    acc //= 2
    acc %= 97
    r = 1.5 * y
    r /= 2.0
    r **= 2
    return acc, r


# tuple unpacking from a plain helper, nested unpacking, swap, nested tuple return
@ctx.batch
def tuple_unpack(x, y, z):
    lo, hi = minmax(x, y)
    (p, q), r = (hi, lo), z
    a, (b, c) = p - q, (r, p + r)
    a, b = b, a
    return a, (b, c)


# `_` dummies: in unpacking (first, last, nested) and as a loop variable
@ctx.batch
def dummies(x, k):
    q, _ = divmod_helper(x, k)
    _, r = divmod_helper(x, k)
    total = 0
    for _ in range(0, k):
        total += q
    (_, s), _ = (r, q + r), q
    return total + s


# plain helpers calling helpers; numpy calls with keyword arguments; x[..., i]; np.where;
# a vector-valued leaf in the returned tuple
@ctx.batch
def helper_calls(v, t):
    u = normalize(v)
    c = np.clip(t, a_min=-1.0, a_max=1.0)
    s = softplus(c * u[..., 0]) + np.sum(u * u, axis=-1, keepdims=False)
    w = np.where(t > 0, u[..., 1], u[..., 2])
    return s + w, np.maximum(u, 0.0)


# closure constants (scale, power), a constant-bound range, a module global; second Context
def _make_closure_poly(scale, power):
    @ctx_aux.batch
    def closure_poly(x):
        acc = 0.0
        for _ in range(0, power):
            acc = acc * x + scale
        return acc + OFFSET

    return closure_poly


closure_poly = _make_closure_poly(0.5, 4)


@ctx.batch
def add_global_n(x):
    return x + n


# a parameter shadowing the module global `n`; a local (LIMIT) shadowing a module global;
# a callee that reads the global `n`
@ctx.batch
def shadow_global(n):
    total = 0
    while n > 0:
        total += n
        n = n - 1
    LIMIT = total * 2  # deliberately shadows the module global
    return add_global_n(total) + LIMIT


@ctx.batch
def scaled(x, scale=2.0, shift=0.0):
    return x * scale + shift


# keyword arguments and defaults of a batched callee, in every calling form
@ctx.batch
def kw_defaults(x):
    return scaled(x, scale=3.0) + scaled(x) + scaled(shift=1.0, x=x) + scaled(x, 0.5, shift=-1.0)


# the entry function itself has defaults; it is called with only `x`
@ctx.batch
def default_entry(x, k=3, bias=0.25):
    return x * k + bias


# int `/` giving floats; bool from a comparison; np.where over int arms
@ctx.batch
def dtype_mix(k, x):
    ratio = k / 4
    flag = x > ratio
    bonus = np.where(flag, k, -k)
    return ratio * x + bonus, flag


# ===========================================================================
# Loops


# while loop; counters first bound to Python int literals
@ctx.batch
def while_sum(limit):
    i = 0
    s = 0
    while i < limit:
        i += 1
        s += i
    return s


# for over range(a, b) with per-example bounds (possibly empty)
@ctx.batch
def for_range_batched(a, b):
    s = 0
    for i in range(a, b):
        s += i * i
    return s


# range with constant positive and negative steps and per-example bounds
@ctx.batch
def for_range_step(a, b):
    up = 0
    for i in range(a, b, 2):
        up += i
    down = 0
    for j in range(b, a, -3):
        down = down * 2 + j
    return up, down


# range with a per-example step of either sign
@ctx.batch
def for_range_batched_step(a, b, step):
    s = 0
    count = 0
    for i in range(a, b, step):
        s += i
        count += 1
    return s, count


# continue and break in a for loop
@ctx.batch
def break_continue(count, limit):
    s = 0
    for i in range(0, count):
        if i % 3 == 0:
            continue
        s += i
        if s > limit:
            break
    return s


# `while True` with break and continue; a parameter reassigned in the loop
@ctx.batch
def while_true(x):
    steps = 0
    while True:
        steps += 1
        if x % 2 == 0:
            x = x // 2
            continue
        if x % 5 == 0 or steps > 40:
            break
        x = 3 * x + 5
    return x, steps


# return inside a for loop (constant bounds); fall-through return after the loop
@ctx.batch
def linear_search(v, target):
    for i in range(0, 8):
        if take(v, i) >= target:
            return i
    return -1


# return of a tuple from inside a for nested in a while; break out of the inner loop
@ctx.batch
def find_factor_pair(target, limit):
    i = 1
    while i <= limit:
        for j in range(i, limit + 1):
            if i * j == target:
                return i, j
            if i * j > target:
                break
        i += 1
    return 0, 0


# nested for loops, inner bound from the outer loop variable; continue in the inner loop
@ctx.batch
def nested_loops(count):
    total = 0
    for i in range(0, count):
        for j in range(0, i):
            if (i + j) % 3 == 0:
                continue
            total += i * j
    return total


# variables first assigned inside a loop and inside a branch, read after the loop
@ctx.batch
def first_assigned_in_loop(count):
    found = False
    for i in range(1, count + 1):
        last = i * i
        if last % 5 == 4:
            witness = i
            found = True
    if found:
        return last + witness * 1000
    return last


# loop-carried tuple assignment `a, b = b, a + b`
@ctx.batch
def iter_fib(count):
    a, b = 0, 1
    for _ in range(0, count):
        a, b = b, a + b
    return a


# Collatz step counts: while with a conditional expression (the program lives in
# pcbatch.examples, in that module's Context)
collatz = examples.collatz


# bisection root finding with a tolerance (module global TOL); plain helper; tuple return
@ctx.batch
def bisection(c):
    lo = 0.0
    hi = np.maximum(c, 1.0)
    iters = 0
    while hi - lo > TOL:
        mid = 0.5 * (lo + hi)
        if cubic(mid, c) > 0.0:
            hi = mid
        else:
            lo = mid
        iters += 1
    return 0.5 * (lo + hi), iters


# Newton iteration for sqrt: tolerance, max-iteration guard, return from inside a for loop
@ctx.batch
def newton_sqrt(a, x0):
    x = x0
    for it in range(0, MAX_NEWTON):
        fx = x * x - a
        if np.abs(fx) <= TOL * a:
            return x, it
        x = x - fx / (2.0 * x)
    return x, MAX_NEWTON


# Newton for cube roots: `while ... and ...` with builtin abs; guard as part of the condition
@ctx.batch
def newton_cbrt(a):
    x = np.maximum(a, 1.0)
    it = 0
    while abs(x * x * x - a) > TOL * a and it < 60:
        x = x - (x * x * x - a) / (3.0 * x * x)
        it += 1
    return x, it


# float vector event [3]: gradient descent; per-example scalar broadcast with [..., None];
# reductions over axis=-1; guard in the loop condition
@ctx.batch
def descend3(x, lr):
    steps = 0
    grad = WEIGHTS * x
    while norm3(grad) > 1e-6 and steps < 100:
        x = x - lr[..., None] * grad
        grad = WEIGHTS * x
        steps += 1
    return x, steps, 0.5 * np.sum(WEIGHTS * x * x, axis=-1)


# float vector event [3]: halve while large; event components via x[..., i]
@ctx.batch
def vector_halve(v):
    count = 0
    while norm3(v) >= 1.0:
        v = v * 0.5
        count += 1
    return v, count, v[..., 0] + v[..., 2]


# ===========================================================================
# Recursion


# Fibonacci, base case `n <= 2 -> 1`
@ctx.batch
def fib(k):
    if k <= 2:
        return 1
    return fib(k - 1) + fib(k - 2)


# Fibonacci variant: `if k > 1: ... else: return k`
@ctx.batch
def fib_else(k):
    if k > 1:
        return fib_else(k - 1) + fib_else(k - 2)
    else:
        return k


# mutual recursion between decorated functions; bool literals returned (the program
# lives in pcbatch.examples, in that module's Context)
is_even = examples.is_even


# gcd by subtraction with a swapped-argument self-call `gcd_sub(b, a)`
@ctx.batch
def gcd_sub(a, b):
    if b == 0:
        return a
    if a < b:
        return gcd_sub(b, a)
    return gcd_sub(a - b, b)


# gcd by remainder: the recursive call sits in one arm of a conditional expression
@ctx.batch
def gcd_mod(a, b):
    return a if b == 0 else gcd_mod(b, a % b)


# Ackermann: nested recursion (a recursive call as an argument of a recursive call)
@ctx.batch
def ackermann(m, k):
    if m == 0:
        return k + 1
    if k == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, k - 1))


# three-way mutual recursion through conditional expressions
@ctx.batch
def mod3_zero(k):
    return 0 if k == 0 else mod3_two(k - 1)


@ctx.batch
def mod3_two(k):
    return 2 if k == 0 else mod3_one(k - 1)


@ctx.batch
def mod3_one(k):
    return 1 if k == 0 else mod3_zero(k - 1)


# a local live across a recursive call
@ctx.batch
def sum_squares(k):
    if k <= 0:
        return 0
    sq = k * k
    rest = sum_squares(k - 1)
    return sq + rest


# recursion passing a keyword argument; the entry relies on that argument's default
@ctx.batch
def power_acc(base, exp, acc=1.0):
    if exp == 0:
        return acc
    if exp % 2 == 1:
        return power_acc(base, exp - 1, acc=acc * base)
    return power_acc(base * base, exp // 2, acc=acc)


# doubly recursive (Hanoi) returning tuples, unpacked at each call site
@ctx.batch
def hanoi(k, src, dst):
    if k == 0:
        return 0, 0
    spare = 3 - src - dst
    m1, w1 = hanoi(k - 1, src, spare)
    m2, w2 = hanoi(k - 1, spare, dst)
    return m1 + 1 + m2, w1 + w2 + (src * 3 + dst)


# a loop inside recursion: loop variable and accumulator live across the recursive call;
# a range bound computed by a numpy call; `+=` of a call result
@ctx.batch
def partitions(k, largest):
    if k == 0:
        return 1
    total = 0
    for part in range(1, np.minimum(k, largest) + 1):
        total += partitions(k - part, part)
    return total


@ctx.batch
def count_partitions(k):
    return partitions(k, k)


# short-circuit around a recursive call: without it, k == 0 would recurse forever
@ctx.batch
def is_pow2(k):
    return k == 1 or (k % 2 == 0 and k > 0 and is_pow2(k // 2))


# recursive binary search over a sorted vector event [16] with per-example indices;
# literal arguments at the entry's call site
@ctx.batch
def bsearch(v, target, lo, hi):
    if lo >= hi:
        return lo
    mid = (lo + hi) // 2
    if take(v, mid) < target:
        return bsearch(v, target, mid + 1, hi)
    else:
        return bsearch(v, target, lo, mid)


@ctx.batch
def search_sorted(v, target):
    return bsearch(v, target, 0, 16)


# recursive tree-structured computation: sum over a binary heap encoded in a vector
# event [15] by per-example index arithmetic (children 2k+1, 2k+2)
@ctx.batch
def heap_sum(v, k, size):
    if k >= size:
        return 0.0
    return take(v, k) + heap_sum(v, 2 * k + 1, size) + heap_sum(v, 2 * k + 2, size)


@ctx.batch
def tree_sum(v, size):
    return heap_sum(v, 0, size)


# recursive bisection of a vector event [8] over per-example index ranges
@ctx.batch
def range_sum(v, lo, hi):
    if hi - lo <= 0:
        return 0.0
    if hi - lo == 1:
        return take(v, lo)
    mid = (lo + hi) // 2
    return range_sum(v, lo, mid) + range_sum(v, mid, hi)


@ctx.batch
def bisect_sum(v, hi):
    whole = range_sum(v, 0, hi)
    return whole, range_sum(v, hi // 2, hi)


# `x = f(x)` with a decorated f, in a loop and nested f(f(x))
@ctx.batch
def poly_step(x):
    return (x * x + 1) % 1009


@ctx.batch
def self_update_call(x, count):
    for _ in range(0, count):
        x = poly_step(x)
    x = poly_step(poly_step(x))
    return x


# a while loop around a recursive call: `x = digit_sum(x)`
@ctx.batch
def digit_sum(x):
    if x < 10:
        return x
    return x % 10 + digit_sum(x // 10)


@ctx.batch
def digital_root(x):
    while x >= 10:
        x = digit_sum(x)
    return x


# NUTS-shaped: a loop of trajectories around a doubly recursive tree build with a
# data-dependent early return; `_` dummy; `or` as a bool value. The program lives in
# pcbatch.examples (the demo runs it too), batched in that module's own Context.
nuts_trajectories = examples.trajectories


# ===========================================================================
# Namedtuples


# namedtuple state (keyword and positional construction, attribute reads) in a loop;
# a Python literal as an initial field; namedtuple return value
@ctx.batch
def leapfrog_oscillator(pos, vel, n_steps, dt):
    state = Oscillator(pos=pos, vel=vel, steps=0)
    while state.steps < n_steps:
        half = state.vel - 0.5 * dt * state.pos
        new_pos = state.pos + dt * half
        state = Oscillator(new_pos, half - 0.5 * dt * new_pos, state.steps + 1)
    return state


# namedtuples passed to and returned from decorated callees; namedtuple entry result
@ctx.batch
def interval_width(iv):
    return iv.hi - iv.lo


@ctx.batch
def split_interval(iv, x):
    if x < iv.lo or x > iv.hi:
        return iv, iv
    return Interval(iv.lo, x), Interval(lo=x, hi=iv.hi)


@ctx.batch
def interval_ops(lo, width, x):
    iv = Interval(lo, lo + width)
    left, right = split_interval(iv, x)
    return Interval(interval_width(left), interval_width(right))


# ===========================================================================
# Plain-Python references for one example (independent of pcbatch)


def _ref_chained(x, lo, hi):
    if lo <= x and x < hi:
        region = 1
    elif x < lo and lo <= hi:
        region = 2
    elif lo <= hi and hi <= x:
        region = 3
    else:
        region = 4
    return region * 10 + int(0 < x and x < 10)


def _ref_bool_ops(x, y):
    return (
        int(x > 0 and y > 0)
        + 10 * int(x > 0 or y > 0)
        + 100 * int(x <= y)
        + 1000 * int(not (x > 0 and y > 0) or x == y)
        + 10000 * int(x > 0 and y > 0 and x + y > 5)
    )


def _ref_bool_values(x, y):
    either = bool(x > 0 or y > 0)
    return bool(x > 0 and y > 0), either, not either, bool((x > y or y > 3) and x != y)


def _ref_guarded_lookup(v, count):
    hits = 0
    for i in range(count):
        if i < 3 and v[i] > 0.0:
            hits += 1
        if i >= 3 or v[i] < -0.5:
            hits += 100
    return hits


def _ref_guarded_div(a, d):
    a, d = int(a), int(d)
    if d != 0 and a // d > 2:
        return a // d
    return -1 if d == 0 or a // d < 0 else 0


def _ref_first_big(v, thr):
    for i in range(3):
        if v[i] >= thr:
            return i
    return 3


def _ref_aug(x, y):
    x, y = int(x), int(y)
    return ((3 * (x + y) - x) // 2) % 97, (1.5 * y / 2.0) ** 2


def _ref_tuple_unpack(x, y, z):
    lo, hi = min(x, y), max(x, y)
    return z, (hi - lo, hi + z)


def _ref_dummies(x, k):
    q, r = divmod(int(x), int(k))
    return q * k + q + r


def _ref_helper_calls(v, t):
    u = v / math.sqrt(sum(c * c for c in v))
    c = min(max(t, -1.0), 1.0)
    z = c * u[0]
    s = math.log1p(math.exp(-abs(z))) + max(z, 0.0) + sum(c * c for c in u)
    return s + (u[1] if t > 0 else u[2]), np.maximum(u, 0.0)


def _ref_closure(x):
    acc = 0.0
    for _ in range(4):
        acc = acc * x + 0.5
    return acc + 7


def _ref_shadow(k):
    t = k * (k + 1) // 2 if k > 0 else 0
    return 3 * t + 100


def _ref_for_range_step(a, b):
    down = 0
    for j in range(b, a, -3):
        down = down * 2 + j
    return sum(range(a, b, 2)), down


def _ref_batched_step(a, b, step):
    r = range(a, b, step)
    return sum(r), len(r)


def _ref_break_continue(count, limit):
    s = 0
    for i in range(count):
        if i % 3:
            s += i
            if s > limit:
                break
    return s


def _ref_while_true(x):
    x = int(x)
    steps = 0
    while True:
        steps += 1
        if x % 2 == 0:
            x //= 2
        elif x % 5 == 0 or steps > 40:
            return x, steps
        else:
            x = 3 * x + 5


def _ref_linear_search(v, target):
    hits = np.flatnonzero(v >= target)
    return int(hits[0]) if hits.size else -1


def _ref_factor_pair(target, limit):
    for i in range(1, limit + 1):
        for j in range(i, limit + 1):
            if i * j == target:
                return i, j
    return 0, 0


def _ref_nested_loops(count):
    return sum(i * j for i in range(count) for j in range(i) if (i + j) % 3)


def _ref_first_assigned(count):
    witnesses = [i for i in range(1, count + 1) if i * i % 5 == 4]
    return count * count + (1000 * witnesses[-1] if witnesses else 0)


def _ref_iter_fib(count):
    return round(((1 + 5**0.5) / 2) ** count / 5**0.5)


def _ref_collatz(x):
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def _ref_bisection(c):
    lo, hi, iters = 0.0, max(float(c), 1.0), 0
    while hi - lo > TOL:
        mid = 0.5 * (lo + hi)
        if mid * mid * mid + mid - c > 0.0:
            hi = mid
        else:
            lo = mid
        iters += 1
    return 0.5 * (lo + hi), iters


def _ref_newton_sqrt(a, x0):
    x = float(x0)
    for it in range(MAX_NEWTON):
        if abs(x * x - a) <= TOL * a:
            return x, it
        x = x - (x * x - a) / (2.0 * x)
    return x, MAX_NEWTON


def _ref_newton_cbrt(a):
    x, it = max(float(a), 1.0), 0
    while abs(x * x * x - a) > TOL * a and it < 60:
        x = x - (x * x * x - a) / (3.0 * x * x)
        it += 1
    return x, it


def _ref_descend3(x, lr):
    w = np.array([1.0, 2.0, 4.0])
    steps = 0
    while np.sqrt(np.sum((w * x) ** 2)) > 1e-6 and steps < 100:
        x = x - lr * (w * x)
        steps += 1
    return x, steps, 0.5 * float(np.dot(w, x * x))


def _ref_vector_halve(v):
    count = 0
    while np.sqrt(np.sum(v * v)) >= 1.0:
        v = v * 0.5
        count += 1
    return v, count, v[0] + v[2]


def _ref_fib(k):
    a, b = 0, 1
    for _ in range(k):
        a, b = b, a + b
    return a if k > 0 else 0


def _ref_ackermann(m, k):
    return [k + 1, k + 2, 2 * k + 3][m]


def _ref_power(base, exp):
    acc = 1.0
    while exp:
        if exp % 2 == 1:
            acc, exp = acc * base, exp - 1
        else:
            base, exp = base * base, exp // 2
    return acc


def _ref_hanoi(k, src, dst):
    if k == 0:
        return 0, 0
    spare = 3 - src - dst
    m1, w1 = _ref_hanoi(k - 1, src, spare)
    m2, w2 = _ref_hanoi(k - 1, spare, dst)
    return m1 + 1 + m2, w1 + w2 + src * 3 + dst


def _ref_partitions(k):
    ways = [1] + [0] * k
    for part in range(1, k + 1):
        for total in range(part, k + 1):
            ways[total] += ways[total - part]
    return ways[k]


def _ref_heap_sum(v, size):
    return v[:size].sum()


def _ref_bisect_sum(v, hi):
    return v[:hi].sum(), v[hi // 2 : hi].sum()


def _ref_self_update(x, count):
    for _ in range(count + 2):
        x = (x * x + 1) % 1009
    return x


def _ref_digital_root(x):
    return 0 if x == 0 else 1 + (x - 1) % 9


def _ref_leapfrog(pos, vel, n_steps, dt):
    for _ in range(n_steps):
        half = vel - 0.5 * dt * pos
        pos = pos + dt * half
        vel = half - 0.5 * dt * pos
    return Oscillator(pos, vel, n_steps)


def _ref_interval(lo, width, x):
    hi = lo + width
    if x < lo or x > hi:
        return Interval(hi - lo, hi - lo)
    return Interval(x - lo, hi - x)


# ---------------------------------------------------------------------------
# Argument makers for programs with structured inputs


def _sorted16(rng, batch_size):
    return [
        np.sort(rng.normal(size=(batch_size, 16)), axis=-1),
        rng.normal(scale=1.5, size=batch_size),
    ]


def _hanoi_args(rng, batch_size):
    src = _ints(rng, 0, 2, batch_size)
    dst = (src + _ints(rng, 1, 2, batch_size)) % 3
    return [_ints(rng, 0, 6, batch_size), src, dst]


def _step_args(rng, batch_size):
    sign = np.where(rng.rand(batch_size) < 0.5, -1, 1)
    step = (sign * _ints(rng, 1, 3, batch_size)).astype(np.int64)
    return [_ints(rng, -8, 8, batch_size), _ints(rng, -8, 8, batch_size), step]


def _vec(rng, batch_size, size, scale=1.0):
    return rng.normal(scale=scale, size=(batch_size, size))


# ---------------------------------------------------------------------------
# Item assignment: per-thread buffers filled by data-dependent loops (in place)


# Covers: buf[i] = v in a loop with a per-example trip count, += on an item, a negative index.
@ctx.batch
def running_maxima(x, n):
    out = np.zeros(8)
    best = -1e30
    for i in range(n):
        best = np.maximum(best, np.take(x, i, axis=-1))
        out[i] = best
    out[-1] += n
    return out


def _ref_running_maxima(x, n):
    out, best = [0.0] * 8, -1e300
    for i in range(int(n)):
        best = max(best, float(x[i]))
        out[i] = best
    out[-1] += int(n)
    return np.array(out)


# Covers: a column slice (grid[:, 0] = 1), two per-example indices, reads of other items.
@ctx.batch
def pascal_rows(n):
    grid = np.zeros((6, 6), dtype=np.int64)
    grid[:, 0] = 1
    for i in range(1, n):
        for j in range(1, i + 1):
            grid[i, j] = grid[i - 1, j - 1] + grid[i - 1, j]
    return grid


def _ref_pascal(n):
    grid = np.zeros((6, 6), dtype=np.int64)
    for i in range(6):
        grid[i, 0] = 1
    for i in range(1, int(n)):
        for j in range(1, i + 1):
            grid[i, j] = grid[i - 1, j - 1] + grid[i - 1, j]
    return grid


# Covers: item assignment to a local buffer that a recursive call must save (a stack top).
@ctx.batch
def digit_frames(n, depth):
    buf = np.zeros(4, dtype=np.int64)
    buf[0] = n % 10
    if depth > 0 and n >= 10:
        inner = digit_frames(n // 10, depth - 1)
        buf[1] = inner[0]
        buf[2] = inner[1] + inner[2]
    buf[3] = depth
    return buf


def _ref_digit_frames(n, depth):
    n, depth = int(n), int(depth)
    buf = [n % 10, 0, 0, depth]
    if depth > 0 and n >= 10:
        inner = _ref_digit_frames(n // 10, depth - 1)
        buf[1], buf[2] = inner[0], inner[1] + inner[2]
    return np.array(buf, dtype=np.int64)


# ---------------------------------------------------------------------------
# The corpus

PY_CORPUS = [
    # Straight-line code and branches
    PyProgram("affine", affine, _int_args((-50, 50)), 2, lambda x: 3 * x + OFFSET - x // 2),
    PyProgram("abs_branch", abs_branch, _float_args((-3, 3)), 2, lambda x: abs(x) * 2.0),
    PyProgram(
        "sign_elif",
        sign_elif,
        lambda rng, b: [np.concatenate([[0.0], rng.normal(size=b - 1)])],
        2,
        lambda x: 1 if x > 0.5 else (-1 if x < -0.5 else (2 if x > 0 else 0)),
    ),
    PyProgram(
        "piecewise",
        piecewise,
        _float_args((-3, 3), (-3, 3)),
        2,
        lambda x, y: (x + abs(y)) if x > 0 else (math.sqrt(x * y) if x * y > 1 else x * y),
    ),
    PyProgram(
        "cond_expr",
        cond_expr,
        lambda rng, b: [np.where(rng.rand(b) < 0.2, 0.0, rng.normal(size=b)), rng.normal(size=b)],
        2,
        lambda x, y: max(x, y) * float(np.sign(x)) + (y if max(x, y) > 1.0 else 0.0),
    ),
    PyProgram("chained_cmp", chained_cmp, _int_args((-5, 15), (-3, 8), (-3, 8)), 2, _ref_chained),
    PyProgram("bool_ops", bool_ops, _int_args((-5, 5), (-5, 5)), 2, _ref_bool_ops),
    PyProgram("bool_values", bool_values, _int_args((-5, 5), (-5, 5)), 2, _ref_bool_values),
    PyProgram(
        "or_default_int",
        or_default_int,
        _int_args((-2, 2), (-2, 2)),
        2,
        lambda a, b: (a if a else b) * 100 + (b if a else a),
    ),
    PyProgram(
        "guarded_lookup",
        guarded_lookup,
        lambda rng, b: [_vec(rng, b, 3), _ints(rng, 0, 5, b)],
        2,
        _ref_guarded_lookup,
    ),
    PyProgram("guarded_div", guarded_div, _int_args((-20, 20), (-3, 3)), 2, _ref_guarded_div),
    PyProgram(
        "first_big",
        first_big,
        lambda rng, b: [_vec(rng, b, 3), rng.normal(size=b)],
        2,
        _ref_first_big,
    ),
    PyProgram("aug_assign", aug_assign, _int_args((-30, 30), (-10, 10)), 2, _ref_aug),
    PyProgram(
        "tuple_unpack", tuple_unpack, _int_args((-9, 9), (-9, 9), (-9, 9)), 2, _ref_tuple_unpack
    ),
    PyProgram("dummies", dummies, _int_args((0, 50), (1, 6)), 2, _ref_dummies),
    PyProgram(
        "helper_calls",
        helper_calls,
        lambda rng, b: [_vec(rng, b, 3), rng.normal(scale=2.0, size=b)],
        2,
        _ref_helper_calls,
    ),
    PyProgram("closure_poly", closure_poly, _float_args((-2, 2)), 2, _ref_closure),
    PyProgram("shadow_global", shadow_global, _int_args((-3, 20)), 4, _ref_shadow),
    PyProgram(
        "kw_defaults",
        kw_defaults,
        _float_args((-5, 5)),
        4,
        lambda x: (3.0 * x) + (2.0 * x) + (2.0 * x + 1.0) + (0.5 * x - 1.0),
    ),
    PyProgram("default_entry", default_entry, _float_args((-5, 5)), 2, lambda x: 3 * x + 0.25),
    PyProgram(
        "dtype_mix",
        dtype_mix,
        lambda rng, b: [_ints(rng, -8, 8, b), rng.normal(scale=2.0, size=b)],
        2,
        lambda k, x: (k / 4 * x + (k if x > k / 4 else -k), bool(x > k / 4)),
    ),
    # Loops
    PyProgram("while_sum", while_sum, _int_args((-2, 30)), 2, lambda m: max(m, 0) * (m + 1) // 2),
    PyProgram(
        "for_range_batched",
        for_range_batched,
        _int_args((-5, 5), (-5, 10)),
        2,
        lambda a, b: sum(i * i for i in range(a, b)),
    ),
    PyProgram(
        "for_range_step", for_range_step, _int_args((-8, 8), (-8, 8)), 2, _ref_for_range_step
    ),
    PyProgram("for_range_batched_step", for_range_batched_step, _step_args, 2, _ref_batched_step),
    PyProgram(
        "break_continue", break_continue, _int_args((0, 20), (0, 60)), 2, _ref_break_continue
    ),
    PyProgram("while_true", while_true, _int_args((1, 100)), 2, _ref_while_true),
    PyProgram(
        "linear_search",
        linear_search,
        lambda rng, b: [_vec(rng, b, 8), rng.normal(loc=1.0, size=b)],
        2,
        _ref_linear_search,
    ),
    PyProgram(
        "find_factor_pair", find_factor_pair, _int_args((1, 40), (1, 10)), 2, _ref_factor_pair
    ),
    PyProgram("nested_loops", nested_loops, _int_args((0, 12)), 2, _ref_nested_loops),
    PyProgram(
        "first_assigned_in_loop",
        first_assigned_in_loop,
        _int_args((1, 12)),
        2,
        _ref_first_assigned,
    ),
    PyProgram("iter_fib", iter_fib, _int_args((0, 40)), 2, _ref_iter_fib),
    PyProgram("collatz", collatz, _int_args((1, 30)), 2, _ref_collatz),
    PyProgram("bisection", bisection, _float_args((0.5, 20.0)), 2, _ref_bisection),
    PyProgram(
        "newton_sqrt", newton_sqrt, _float_args((0.01, 100.0), (0.1, 10.0)), 2, _ref_newton_sqrt
    ),
    PyProgram("newton_cbrt", newton_cbrt, _float_args((0.01, 50.0)), 2, _ref_newton_cbrt),
    PyProgram(
        "descend3",
        descend3,
        lambda rng, b: [_vec(rng, b, 3, scale=3.0), _floats(rng, 0.1, 0.45, b)],
        2,
        _ref_descend3,
    ),
    PyProgram(
        "vector_halve",
        vector_halve,
        lambda rng, b: [_vec(rng, b, 3, scale=10.0)],
        2,
        _ref_vector_halve,
    ),
    # Recursion
    PyProgram("fib", fib, _int_args((1, 12)), 13, _ref_fib),
    PyProgram("fib_else", fib_else, _int_args((0, 12)), 14, _ref_fib),
    PyProgram("even_odd", is_even, _int_args((0, 25)), 28, lambda k: k % 2 == 0),
    PyProgram("gcd_sub", gcd_sub, _int_args((1, 15), (1, 15)), 21, math.gcd),
    PyProgram("gcd_mod", gcd_mod, _int_args((0, 200), (0, 200)), 14, math.gcd),
    PyProgram("ackermann", ackermann, _int_args((0, 2), (0, 3)), 12, _ref_ackermann),
    PyProgram("mod3", mod3_zero, _int_args((0, 30)), 33, lambda k: (-k) % 3),
    PyProgram(
        "sum_squares",
        sum_squares,
        _int_args((-1, 20)),
        23,
        lambda k: max(k, 0) * (k + 1) * (2 * k + 1) // 6,
    ),
    PyProgram(
        "power_acc",
        power_acc,
        lambda rng, b: [_floats(rng, 0.5, 1.5, b), _ints(rng, 0, 20, b)],
        10,
        _ref_power,
    ),
    PyProgram("hanoi", hanoi, _hanoi_args, 9, _ref_hanoi),
    PyProgram("partitions", count_partitions, _int_args((0, 10)), 14, _ref_partitions),
    PyProgram("is_pow2", is_pow2, _int_args((0, 70)), 9, lambda k: k > 0 and (k & (k - 1)) == 0),
    PyProgram(
        "search_sorted",
        search_sorted,
        _sorted16,
        9,
        lambda v, t: int(np.searchsorted(v, t, side="left")),
    ),
    PyProgram(
        "tree_sum",
        tree_sum,
        lambda rng, b: [_vec(rng, b, 15), _ints(rng, 0, 15, b)],
        8,
        _ref_heap_sum,
    ),
    PyProgram(
        "bisect_sum",
        bisect_sum,
        lambda rng, b: [_vec(rng, b, 8), _ints(rng, 0, 8, b)],
        7,
        _ref_bisect_sum,
    ),
    PyProgram(
        "self_update_call", self_update_call, _int_args((0, 1008), (0, 6)), 4, _ref_self_update
    ),
    PyProgram("digital_root", digital_root, _int_args((0, 10**9)), 13, _ref_digital_root),
    PyProgram(
        "nuts_trajectories",
        nuts_trajectories,
        _int_args((0, NUTS_MOD - 1), (1, 6)),
        7,
        examples.nuts_tree_one,
    ),
    # Namedtuples
    PyProgram(
        "leapfrog_oscillator",
        leapfrog_oscillator,
        lambda rng, b: [
            rng.normal(size=b),
            rng.normal(size=b),
            _ints(rng, 0, 30, b),
            _floats(rng, 0.05, 0.3, b),
        ],
        2,
        _ref_leapfrog,
    ),
    PyProgram(
        "interval_ops",
        interval_ops,
        lambda rng, b: [rng.normal(size=b), _floats(rng, 0.0, 3.0, b), rng.normal(loc=1.0, size=b)],
        4,
        _ref_interval,
    ),
]

PY_CORPUS += [
    PyProgram(
        "running_maxima",
        running_maxima,
        lambda rng, b: [_vec(rng, b, 8), _ints(rng, 0, 8, b)],
        1,
        _ref_running_maxima,
    ),
    PyProgram("pascal_rows", pascal_rows, _int_args((1, 6)), 1, _ref_pascal),
    PyProgram(
        "digit_frames", digit_frames, _int_args((0, 10**6), (0, 5)), 7, _ref_digit_frames
    ),
]

# Plain helpers that branch in Python on values run one example at a time on NumPy;
# vmap cannot do that, so on compiled backends these programs are rejected (tested in
# tests/frontend/test_errors.py).
NUMPY_ONLY = {"guarded_lookup", "guarded_div", "first_big"}

PY_CORPUS_BY_NAME = {p.name: p for p in PY_CORPUS}
assert len(PY_CORPUS_BY_NAME) == len(PY_CORPUS), "duplicate corpus names"

"""Random programs in the batchable subset, as Python source, for differential testing.

Contract: `generate(chooser)` returns a `FuzzProgram`: the source of a module that
defines ``ctx = pcbatch.Context()`` and functions ``f0 .. fK`` decorated with
``@ctx.batch``, each ``fJ(n, x, d) -> (int, float)`` where ``n`` is an int64
scalar, ``x`` a float64 value of the program's event shape and ``d`` the
recursion budget. Every program terminates on every input: ``while`` loops carry
a counter bounded by a constant, ``for`` loops run over ``range`` of a clipped
bound, and each call passes ``d - 1`` to a function that returns at once when
``d <= 0``. Every variable read is assigned on every path before it, and float
arithmetic is exact (halving, adding quarters, min/max/abs), so a batched run
must equal the per-example run bit for bit, whatever order it computes in.

Covered: nested if/elif/else, while and for-range loops (with bound and step
variables rebound in the body, and the loop variable read after the loop), for loops
over items (``np.array(v)``, the buffer ``u`` while the body assigns its items, a tuple
of int expressions, ``enumerate``, ``zip``, ``reversed``, ``reversed(range(...))``,
``zip(range(k), u)``), break,
continue, early return, short-circuit ``and``/``or``/``not`` (as conditions and as
int values), conditional expressions, chained comparisons, guarded operations that
raise or warn where the guard fails (``a // n if n != 0 else a``, ``0 <= n < 5 and
2 ** n > 3``), int8 arithmetic with Python ints (``x.astype(np.int8) + i``, in range),
calls, self and mutual recursion,
tuple results and unpacking, ``sum``/``any``/``all``/``max``/``min`` of comprehensions
over per-example items (filtered too; ``max``/``min`` with ``default=``), ``if`` tests
on shapes whose taken side indexes what only those shapes have, int scalars,
an int array ``v`` of event shape (2,) (indexed, reversed, summed) and float arrays of
several event shapes.
Item assignment: ``v[i] = e`` and ``v[i] += e`` on the int64 ``v``, and on two
buffers made in each function, ``w`` of a narrow int dtype (int8, int16 or uint8) and
``u`` of float32 or float64 (``w[i] = np.clip(e, -100, 100)``, ``w[i] += 2``,
``u[i] += np.sum(...)``), with constant indices (negative too) and per-example ones
(``np.clip(e, 0, 1)``, ``i1 % 2``), always in range; a strong int64 stored into the
narrow buffer wraps as NumPy's cast does, a Python int stored there is small enough to
fit (NumPy 2 raises otherwise). The buffers are read back by ``int(w[i])`` and
``u[i]``, and rebound to copies (``w = np.array(w)``). Slice assignment with constant
bounds: ``v[1:] = v[:1]``, ``u[-1:3:2] = np.sum(...)``, ``u[::-1] += 0.25``, ``w[::-1] = w``;
through a boolean mask: ``u[u < np.sum(...)] = 0.5``, ``w[w > 1] = 3``.

The ``chooser`` makes every random decision: ``chooser.integer(lo, hi)`` returns an
int in ``[lo, hi]``. `RandomChooser` wraps `random.Random`; the test suite adapts
Hypothesis's ``data.draw`` so failing programs shrink. `load` writes the source
to a file and imports it (pcbatch compiles functions from their source file).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import random
import sys
from typing import Any

import numpy as np

__all__ = [
    "FuzzProgram",
    "RandomChooser",
    "ReplayChooser",
    "compare",
    "generate",
    "load",
    "mismatch",
    "unload",
]

INT_VARS = ("n", "a", "b")
NARROW_INTS = ("int8", "int16", "uint8")  # the dtypes of the item-assigned buffer ``w``
BUFFER_FLOATS = ("float32", "float64")  # and of ``u``
FLOAT_VARS = ("x", "y")
EVENT_SHAPES = ((), (3,), (2, 2))
MAX_FUNCTIONS = 3
MAX_DEPTH_ARG = 3  # the recursion budget ``d`` of main's inputs
MAX_TRIPS = 3  # the most iterations of any one loop
VEC_SIZE = 2  # the event size of the int array ``v`` every function keeps
INDENT = "    "
#: tests on ``x``'s event shape, each with an item of ``x`` that exists where it holds
SHAPE_TESTS = (
    ("x.ndim >= 1", "x[0]"),
    ("np.ndim(x) == 2", "x[1, 0]"),
    ("len(np.shape(x)) > 0 and x.shape[0] == 3", "x[2]"),
    ("x.size > 1", "np.ravel(x)[1]"),
    ("not x.ndim", "x * 0.5"),
)
HEADER = "import numpy as np\n\nimport pcbatch\n\nctx = pcbatch.Context()\n"


@dataclasses.dataclass(frozen=True)
class FuzzProgram:
    """A generated module's source and what its inputs look like."""

    source: str
    event_shape: tuple
    n_functions: int

    def make_args(self, rng: np.random.RandomState, batch_size: int) -> list:
        """Random ``(n, x, d)`` batches; floats are multiples of 0.25, so exact."""
        n = rng.randint(-3, 7, size=batch_size).astype(np.int64)
        x = rng.randint(-8, 9, size=(batch_size, *self.event_shape)) * 0.25
        d = rng.randint(0, MAX_DEPTH_ARG + 1, size=batch_size).astype(np.int64)
        return [n, x.astype(np.float64), d]


class RandomChooser:
    """Decisions from a seeded `random.Random`; ``drawn`` records them for `ReplayChooser`."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)
        self.drawn: list = []

    def integer(self, lo: int, hi: int) -> int:
        value = self.random.randint(lo, hi)
        self.drawn.append(value - lo)
        return value


class ReplayChooser:
    """Replays recorded decisions (each an offset above its ``lo``), clipped to the
    range asked for, and the lowest choice once they run out: any list of offsets
    makes a valid program, which is what lets `shrink` edit them freely."""

    def __init__(self, offsets):
        self.offsets = list(offsets)
        self.drawn: list = []

    def integer(self, lo: int, hi: int) -> int:
        k = len(self.drawn)
        offset = min(self.offsets[k], hi - lo) if k < len(self.offsets) else 0
        self.drawn.append(offset)
        return lo + offset


def generate(chooser) -> FuzzProgram:
    """A random program; see the module docstring."""
    shape = EVENT_SHAPES[chooser.integer(0, len(EVENT_SHAPES) - 1)]
    count = chooser.integer(1, MAX_FUNCTIONS)
    functions = [_Function(chooser, k, count).source() for k in range(count)]
    return FuzzProgram("\n\n".join([HEADER, *functions]) + "\n", shape, count)


class _Function:
    """Writes one function ``f<index>``; ``count`` functions exist to call."""

    def __init__(self, chooser, index: int, count: int):
        self.c = chooser
        self.index = index
        self.count = count
        self.lines: list = []
        self.loops = 0  # loop counters and loop variables made so far (unique names)
        self.calls_left = 2
        # Parameters only, until the locals are first assigned.
        self.int_names, self.float_names = ("n",), ("x",)
        self.vector = False  # whether the int event ``v`` and the buffers are assigned yet
        self.narrow = "int8"  # ``w``'s dtype

    def pick(self, options):
        return options[self.c.integer(0, len(options) - 1)]

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def source(self) -> str:
        self.emit(0, "@ctx.batch")
        self.emit(0, f"def f{self.index}(n, x, d):")
        self.emit(1, "if d <= 0:")
        self.emit(2, f"return {self.int_expr((), 1)}, {self.float_expr((), 1)}")
        self.emit(1, f"a = {self.int_expr((), 1)}")
        self.emit(1, "b = 0")
        self.emit(1, f"y = {self.float_expr((), 1)}")
        self.emit(1, f"v = np.arange({VEC_SIZE}) + a")
        self.narrow = self.pick(NARROW_INTS)
        self.emit(1, f"w = np.zeros({VEC_SIZE}, dtype=np.{self.narrow})")
        self.emit(1, f"u = np.zeros({VEC_SIZE}, dtype=np.{self.pick(BUFFER_FLOATS)})")
        self.int_names, self.float_names = INT_VARS, FLOAT_VARS
        self.vector = True
        self.block(1, (), loop=False, size=self.c.integer(1, 4))
        self.emit(1, f"return {self.int_expr((), 2)}, {self.float_expr((), 2)}")
        return "\n".join(self.lines)

    # -- expressions -------------------------------------------------------------------
    def int_expr(self, scope: tuple, depth: int) -> str:
        """An int64 scalar expression; ``scope`` holds loop variables readable here."""
        leaves = [*self.int_names, *scope, str(self.c.integer(-2, 3))]
        if self.vector:
            leaves += ["np.sum(v)", f"v[{self.c.integer(-VEC_SIZE, VEC_SIZE - 1)}]",
                       f"int(w[{self.c.integer(-VEC_SIZE, VEC_SIZE - 1)}])"]
        if depth <= 0 or self.c.integer(0, 2) == 0:
            return self.pick(leaves)
        op = self.pick(["+", "-", "*", "clip", "min", "guarded", "ifexp", "or", "and",
                        "narrow"])
        left, right = self.int_expr(scope, depth - 1), self.int_expr(scope, depth - 1)
        if op == "narrow":  # an int8 array made in the line meets a Python int (NEP 50)
            return self.narrow_int(scope, left)
        if op == "guarded":
            return self.guarded_int(scope, left)
        if op == "ifexp":
            return f"({left} if {self.cond(scope, 0)} else {right})"
        if op in ("or", "and"):  # Python's value: the operand that decides, an int
            return f"({left} {op} {right})"
        if op == "clip":  # keeps values small, so products never overflow
            return f"np.clip({left}, -20, 20)"
        if op == "min":
            return f"np.minimum({left}, {right})"
        if op == "*":
            return f"np.clip({left} * {right}, -50, 50)"
        return f"({left} {op} {right})"

    def narrow_int(self, scope: tuple, left: str) -> str:
        """``left`` made int8 in the line, plus a Python int (a loop counter or a literal,
        in -3..47): the sum stays in int8's range, which a batched run must compute in
        int8 as per example, and a compiled one must check by its overflow probe
        (`pcbatch.backends.weak.overflow_probe`) without stopping any thread."""
        weak = self.pick([*scope, str(self.c.integer(-3, 3))])
        return f"(np.clip({left}, -80, 80).astype(np.int8) + {weak}).astype(np.int64)"

    def guarded_int(self, scope: tuple, left: str) -> str:
        """An operation that raises (or warns) for some operands, behind a short-circuit
        that Python evaluates it only past: a batched run must not compute it for the
        threads the guard turns away."""
        name = self.pick([*self.int_names, *scope])
        form = self.c.integer(0, 2)
        if form == 0:
            return f"({left} // {name} if {name} != 0 else {left})"
        if form == 1:
            return f"({left} % {name} if {name} != 0 else 0)"
        return f"(2 ** {name} if 0 <= {name} < 5 else {left})"

    def float_expr(self, scope: tuple, depth: int) -> str:
        """A float64 expression of the event shape: always built on a float variable."""
        base = self.pick(self.float_names)
        if depth <= 0 or self.c.integer(0, 2) == 0:
            return base
        other = self.float_expr(scope, depth - 1)
        form = self.c.integer(0, 6 if self.vector else 5)
        if form == 6:  # an item of the float buffer: float32 meets float64, as per example
            return f"({other} + u[{self.item_index(scope)}])"
        if form == 0:
            return f"({other} * 0.5)"
        if form == 1:
            return f"({other} + {self.pick(['0.25', '-0.5', '1.0'])})"
        if form == 2:
            return f"np.maximum({base}, {other})"
        if form == 3:
            return f"np.abs({other})"
        if form == 4:  # an int joins the floats (broadcast over the event)
            return f"np.clip({other} + {self.int_expr(scope, 1)}, -8.0, 8.0)"
        return f"np.minimum({base}, {other}) - 0.25"

    def cond(self, scope: tuple, depth: int) -> str:
        """A per-example bool; ``and``/``or``/``not`` short-circuit per thread."""
        form = self.c.integer(0, 6 if depth > 0 else 4)
        if form == 0:
            op = self.pick(["<", "<=", ">", "==", "!="])
            return f"{self.int_expr(scope, 1)} {op} {self.int_expr(scope, 1)}"
        if form == 1:
            op = self.pick(["<", ">", ">="])
            return f"np.sum({self.float_expr(scope, 1)}) {op} {self.pick(['0.0', '1.0', '-0.5'])}"
        if form == 2:  # the middle operand (often a call) evaluated once
            left, middle, right = (self.int_expr(scope, 1) for _ in range(3))
            return f"{left} <= {middle} < {right}"
        if form in (3, 4):  # guards that Python evaluates the right side only past
            name = self.pick([*self.int_names, *scope])
            if form == 3:
                return f"({name} != 0 and {self.int_expr(scope, 1)} % {name} == 0)"
            return f"(0 <= {name} < 5 and 2 ** {name} > {self.c.integer(0, 9)})"
        if form == 5:
            return f"not ({self.cond(scope, depth - 1)})"
        op = self.pick(["and", "or"])
        return f"({self.cond(scope, depth - 1)} {op} {self.cond(scope, depth - 1)})"

    # -- statements --------------------------------------------------------------------
    def block(self, depth: int, scope: tuple, loop: bool, size: int) -> None:
        for _ in range(size):
            self.statement(depth, scope, loop)

    def statement(self, depth: int, scope: tuple, loop: bool) -> None:
        nested = depth < 4
        kinds = ["int", "float", "int", "float", "vec", "item", "item", "reduce"]
        if nested:
            kinds += ["if", "if", "while", "for", "shape"]
        if self.calls_left and len(scope) <= 1:  # calls in nested loops would multiply
            kinds.append("call")
        if loop:
            kinds += ["break", "continue"]
        if depth > 1:
            kinds.append("return")
        kind = self.pick(kinds)
        getattr(self, f"stmt_{kind}")(depth, scope, loop)

    def stmt_int(self, depth, scope, loop) -> None:
        self.emit(depth, f"{self.pick(INT_VARS[1:])} = {self.int_expr(scope, 2)}")

    def stmt_vec(self, depth, scope, loop) -> None:
        if self.c.integer(0, 1):
            self.emit(depth, f"v = np.clip(v * {self.int_expr(scope, 1)} + 1, -20, 20)")
        else:
            self.emit(depth, "v = v[::-1]")

    def item_index(self, scope: tuple) -> str:
        """An index of a ``VEC_SIZE`` vector, in range: a constant (negative too) or a
        per-example value."""
        form = self.c.integer(0, 2 if scope else 1)
        if form == 0:
            return str(self.c.integer(-VEC_SIZE, VEC_SIZE - 1))
        if form == 1:
            return f"np.clip({self.int_expr(scope, 1)}, {-VEC_SIZE}, {VEC_SIZE - 1})"
        return f"{self.pick(scope)} % {VEC_SIZE}"

    def stmt_item(self, depth, scope, loop) -> None:
        """Item assignment into ``v``, ``w`` or ``u``, or ``w`` rebound to a copy."""
        index = self.item_index(scope)
        form = self.c.integer(0, 7)
        if form == 7:
            self.stmt_slice(depth, scope)
        elif form == 0:
            self.emit(depth, f"v[{index}] = {self.int_expr(scope, 1)}")
        elif form == 1:
            self.emit(depth, f"v[{index}] += np.clip({self.int_expr(scope, 1)}, -20, 20)")
        elif form == 2:  # a strong int64 into the narrow buffer: NumPy's cast wraps it
            self.emit(depth, f"w[{index}] = np.clip({self.int_expr(scope, 1)}, -100, 100)")
        elif form == 3:  # a Python int (NEP 50: computed in w's dtype), small enough to fit
            self.emit(depth, f"w[{index}] += {self.c.integer(0, 3)}")
        elif form == 4:
            self.emit(depth, f"u[{index}] = np.sum({self.float_expr(scope, 1)})")
        elif form == 5:
            self.emit(depth, f"u[{index}] += {self.pick(['0.25', 'np.sum(x)', 'np.max(y)'])}")
        else:
            self.emit(depth, "w = np.array(w)")

    def static_slice(self) -> str:
        """A slice of a ``VEC_SIZE`` vector with constant bounds (empty, reversed, past
        the end too)."""
        bound = lambda: self.pick(["", "0", "1", "-1", str(VEC_SIZE + 1), str(-VEC_SIZE - 2)])
        return f"{bound()}:{bound()}:{self.pick(['', '1', '2', '-1', '-2'])}"

    def stmt_slice(self, depth, scope) -> None:
        """Assignment to a static slice (a shift of ``v``, a scalar broadcast into ``u``,
        ``w`` reversed, an augmented slice of ``u``) or through a boolean mask."""
        form = self.c.integer(0, 5)
        if form == 4:  # a boolean mask, a float into the float buffer
            self.emit(depth, f"u[u < np.sum({self.float_expr(scope, 1)})] = 0.5")
        elif form == 5:  # a Python int that fits, into the narrow buffer
            self.emit(depth, f"w[w > {self.c.integer(-2, 2)}] = {self.c.integer(0, 3)}")
        elif form == 0:
            k = self.c.integer(0, VEC_SIZE)
            self.emit(depth, f"v[{k}:] = v[:{VEC_SIZE - k}]")
        elif form == 1:
            self.emit(depth, f"u[{self.static_slice()}] = np.sum({self.float_expr(scope, 1)})")
        elif form == 2:
            self.emit(depth, "w[::-1] = w")
        else:
            self.emit(depth, f"u[{self.static_slice()}] += 0.25")

    def stmt_float(self, depth, scope, loop) -> None:
        self.emit(depth, f"{self.pick(FLOAT_VARS[1:])} = {self.float_expr(scope, 2)}")

    def stmt_if(self, depth, scope, loop) -> None:
        self.emit(depth, f"if {self.cond(scope, 2)}:")
        self.block(depth + 1, scope, loop, self.c.integer(1, 2))
        for _ in range(self.c.integer(0, 1)):
            self.emit(depth, f"elif {self.cond(scope, 1)}:")
            self.block(depth + 1, scope, loop, self.c.integer(1, 2))
        if self.c.integer(0, 1):
            self.emit(depth, "else:")
            self.block(depth + 1, scope, loop, self.c.integer(1, 2))

    def stmt_shape(self, depth, scope, loop) -> None:
        """An ``if`` on the event shape of ``x``, whose taken side reads an item that only
        exists on the shapes it tests (``x[0]`` of a number is an error): a batched run
        must compile that side alone (`pcbatch.passes.shape_branches`)."""
        test, item = self.pick(SHAPE_TESTS)
        self.emit(depth, f"if {test}:")
        self.emit(depth + 1, f"y = y + {item}")
        if self.c.integer(0, 1):
            self.block(depth + 1, scope, loop, 1)
        if self.c.integer(0, 1):
            self.emit(depth, "else:")
            self.block(depth + 1, scope, loop, self.c.integer(1, 2))

    def stmt_while(self, depth, scope, loop) -> None:
        self.loops += 1
        counter = f"c{self.loops}"
        self.emit(depth, f"{counter} = 0")
        trips = self.c.integer(1, MAX_TRIPS)
        self.emit(depth, f"while {counter} < {trips} and {self.cond(scope, 1)}:")
        # The counter steps first, so a later continue cannot skip it.
        self.emit(depth + 1, f"{counter} = {counter} + 1")
        self.block(depth + 1, (*scope, counter), True, self.c.integer(1, 3))

    def stmt_for(self, depth, scope, loop) -> None:
        self.loops += 1
        var = f"i{self.loops}"
        stop = f"np.clip({self.int_expr(scope, 1)}, 0, {MAX_TRIPS})"
        start = self.pick(["", "0, ", "-1, ", f"np.clip({self.int_expr(scope, 0)}, -1, 1), "])
        form = self.c.integer(0, 2 if self.vector else 1)
        if form == 2:
            self.for_items(depth, scope, var)
            return
        if form == 0:
            self.emit(depth, f"for {var} in range({start}{stop}):")
            self.block(depth + 1, (*scope, var), True, self.c.integer(1, 3))
            return
        # range() reads its bound variables once: the body rebinds them (and the loop
        # variable) without changing the trips; after the loop the variable holds its
        # last value (the one bound before, if the loop ran no trip).
        bound, step = f"s{self.loops}", f"t{self.loops}"
        self.emit(depth, f"{var} = {self.int_expr(scope, 0)}")
        self.emit(depth, f"{bound} = {stop}")
        self.emit(depth, f"{step} = np.clip({self.int_expr(scope, 0)}, 1, 2)")
        self.emit(depth, f"for {var} in range({start}{bound}, {step}):")
        self.emit(depth + 1, f"{bound} = {bound} + 1")
        self.emit(depth + 1, f"{step} = {step} - 1")
        self.block(depth + 1, (*scope, var), True, self.c.integer(1, 3))
        if self.c.integer(0, 1):
            self.emit(depth + 1, f"{var} = {var} * 2")
        self.emit(depth, f"b = b + {var}")

    def for_items(self, depth: int, scope: tuple, var: str) -> None:
        """A loop over items: of a copy of ``v`` (bound once), of the float buffer ``u``
        (iterated live: the body may assign its items), of a tuple built before the first
        trip, through ``enumerate``, ``zip`` and ``reversed``; ``var`` is an int."""
        item = f"e{self.loops}"
        form = self.c.integer(0, 5)
        if form == 4:
            start, step = self.c.integer(-1, 2), self.pick(["1", "2", "-1"])
            stop = f"np.clip({self.int_expr(scope, 1)}, -4, 6)"
            self.emit(depth, f"{var} = 0")  # the range may have no item
            self.emit(depth, f"for {var} in reversed(range({start}, {stop}, {step})):")
        elif form == 5:
            self.emit(depth, f"{var} = 0")
            self.emit(depth, f"for {var}, {item} in zip(range({self.c.integer(0, 3)}), u):")
        elif form == 0:
            self.emit(depth, f"for {var} in np.array(v):")
        elif form == 1:
            self.emit(depth, f"for {var}, {item} in enumerate(u):")
        elif form == 2:
            self.emit(depth, f"for {var}, {item} in zip(reversed(np.array(v)), u):")
        else:
            parts = f"{self.int_expr(scope, 1)}, {self.int_expr(scope, 0)}, {self.c.integer(-2, 3)}"
            self.emit(depth, f"for {var} in ({parts}):")
        if form in (1, 2, 5):
            self.emit(depth + 1, f"y = y + {item}")
        self.block(depth + 1, (*scope, var), True, self.c.integer(1, 3))
        self.emit(depth, f"b = b + {var}")  # the last item, or the 0 before an empty range

    def stmt_reduce(self, depth, scope, loop) -> None:
        """``sum``, ``any``, ``all``, ``max`` or ``min`` of a comprehension over
        per-example items (``v``'s, a counted ``range``'s, the float buffer ``u``'s), with
        or without a filter; ``max``/``min`` with a ``default=`` where a filter may leave
        no item."""
        self.loops += 1
        var = f"k{self.loops}"
        inner = (*scope, var)
        form = self.c.integer(0, 4)
        if form == 4:  # floats: the buffer's items, float32 or float64
            start = self.pick(["", ", y", ", 0.5"])
            self.emit(depth, f"y = y + sum(({var} * 0.5 for {var} in u){start})")
            return
        source = self.pick(["v", "np.array(v)",
                            f"range(np.clip({self.int_expr(scope, 1)}, 0, {MAX_TRIPS}))"])
        items = f"{self.int_expr(inner, 1)} for {var} in {source}"
        if self.c.integer(0, 1):
            items += f" if {self.cond(inner, 0)}"
        if form == 0:
            brackets = self.pick([("", ""), ("[", "]")])  # a generator or a list
            self.emit(depth, f"b = sum({brackets[0]}{items}{brackets[1]})")
        elif form == 1:
            extreme = self.pick(["max", "min"])
            self.emit(depth, f"a = {extreme}(({items}), default={self.c.integer(-2, 3)})")
        else:
            test = f"{self.cond(inner, 0)} for {var} in {source}"
            self.emit(depth, f"if {self.pick(['any', 'all'])}({test}):")
            self.block(depth + 1, scope, loop, self.c.integer(1, 2))

    def stmt_call(self, depth, scope, loop) -> None:
        self.calls_left -= 1
        callee = self.c.integer(0, self.count - 1)
        target = self.pick([("a", "y"), ("b", "x"), ("a", "x")])
        args = f"{self.int_expr(scope, 1)}, {self.float_expr(scope, 1)}, d - 1"
        self.emit(depth, f"{target[0]}, {target[1]} = f{callee}({args})")

    def stmt_break(self, depth, scope, loop) -> None:
        self.emit(depth, f"if {self.cond(scope, 1)}:")
        self.emit(depth + 1, self.pick(["break", "continue"]))

    stmt_continue = stmt_break

    def stmt_return(self, depth, scope, loop) -> None:
        self.emit(depth, f"return {self.int_expr(scope, 1)}, {self.float_expr(scope, 1)}")


def load(program: FuzzProgram, directory: str) -> Any:
    """Writes the program's source under ``directory`` and imports it as a new module."""
    digest = hashlib.sha1(program.source.encode()).hexdigest()[:16]
    name = f"pcbatch_fuzz_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write(program.source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def unload(module: Any) -> None:
    """Forgets a module of `load`'s, so that its Context and what was compiled for it can
    be freed (a long fuzz run would otherwise keep every program's compiled code)."""
    sys.modules.pop(module.__name__, None)


def mismatch(program: FuzzProgram, module: Any, args: list, **options) -> str | None:
    """Runs ``module.f0`` batched (with ``options``) and per example; describes any
    difference in structure, dtype or value (bit for bit: the arithmetic is exact)."""
    problem, _ = compare(module.f0, args, **options)
    return problem


def compare(function: Any, args: list, **options) -> tuple:
    """``(problem, rows)``: how ``function``'s batched run differs from its per-example
    run (None if it does not) and the batch rows that differ (all, when the results'
    structure, dtype or shape differ)."""
    expected = function(*args, dry_run=True)
    actual = function(*args, **options)
    everything = np.arange(len(args[0]))
    if not isinstance(actual, tuple) or len(actual) != len(expected):
        name = type(actual).__name__
        return f"result structure {name} differs from {len(expected)}-tuple", everything
    for k, (got, want) in enumerate(zip(actual, expected)):
        got, want = np.asarray(got), np.asarray(want)
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"result {k}: {got.dtype}{got.shape} != {want.dtype}{want.shape}", everything
        same = got == want
        if got.dtype.kind == "f":
            same |= np.isnan(got) & np.isnan(want)
        rows = np.flatnonzero(~same.reshape(len(same), -1).all(axis=1))
        if rows.size:
            return (
                f"result {k}, rows {rows.tolist()}: batched {got[rows].tolist()} "
                f"!= per-example {want[rows].tolist()}",
                rows,
            )
    return None, np.arange(0)

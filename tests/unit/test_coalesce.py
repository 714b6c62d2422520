"""Copy coalescing (`pcbatch.passes.coalesce`): which moves go, which must stay, and that
the results do not change on any backend."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch import dsl
from pcbatch.ir.nodes import PrimOp
from pcbatch.ir.types import TensorType, flatten
from pcbatch.passes import pipeline
from pcbatch.vm import runner
from tests.backends import backend, backend_param

INT = TensorType(np.dtype(np.int64), ())


def tree(n):
    """A recursive call's result returned as it is on one path, combined on the other:
    NUTS's ``build_tree`` in small."""
    if n <= 0:
        return n + 1
    first = tree(n - 1)
    if first > 6:
        return first
    kept = 2 * first  # only this is live across the second call, as in NUTS
    return kept + tree(n - 2)


def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def first_positive(xs_len, seed):
    found = -1
    i = 0
    while i < xs_len:
        candidate = (seed * (i + 3)) % 7 - 2
        if candidate > 0:
            found = candidate
            break
        i += 1
    return found


def _lowered(function, args):
    ctx = pcbatch.Context()
    ctx.batch(function)
    return ctx.lowered_for_args(function.__name__, args)


def _moves(program) -> list:
    """(source, destination) of every move of the lowered program."""
    pairs = []
    for block in program.graph.blocks:
        for op in block.instructions:
            if isinstance(op, PrimOp) and op.is_copy:
                pairs.extend(zip(op.vars_in, flatten(op.vars_out)))
    return pairs


def test_a_recursive_result_returned_as_it_is_needs_no_move():
    program = _lowered(tree, [np.arange(5)])
    assert "tree.first" not in program.var_types  # it is tree.__ret0 now
    assert not [p for p in _moves(program) if "tree.__ret0" in p]


def _swapping_gcd():
    """gcd with the parallel move ``a, b = b, a % b`` as one copy (the frontend makes a
    tuple primitive of it; the DSL can write the copy itself)."""
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("a", "b"), returns=1) as f:
        with f.loop():
            f.break_unless(f.prim(lambda b: b != 0, "b", name="nonzero"))
            rest = f.prim(np.remainder, "a", "b", name="rem")
            f.copy("b", rest, out=("a", "b"))
        f.return_("a")
    return mb.program("main")


def test_a_parallel_swap_keeps_both_registers():
    program = _swapping_gcd()
    lowered = pipeline.compile_program(program, [INT, INT], pcbatch.NumpyBackend())
    assert {"main.a", "main.b"} <= set(lowered.var_types)
    assert ("main.b", "main.a") in _moves(lowered)
    a, b = np.array([12, 7, 35, 1]), np.array([18, 21, 14, 0])
    result = runner.run(program, [a, b])
    np.testing.assert_array_equal(np.asarray(result), np.gcd(a, b))


def test_a_value_live_across_a_call_keeps_its_own_register():
    program = _lowered(fib, [np.arange(5)])
    saved = {v for v, a in program.var_alloc.items() if a.name == "FULL"}
    # n, and the first call's result, saved across the second: not merged into the
    # result register, which the second call overwrites
    assert len(saved) == 2 and "fib.n" in saved and "fib.__ret0" not in saved


@backend_param
def test_coalesced_programs_compute_what_python_does(backend_name):
    ctx = pcbatch.Context()
    batched = {f.__name__: ctx.batch(f) for f in (tree, gcd, fib, first_positive)}
    n = np.arange(-1, 9)
    a, b = np.array([12, 7, 0, 35, 1]), np.array([18, 21, 5, 14, 0])
    cases = {
        "tree": ([n], [tree(int(x)) for x in n]),
        "gcd": ([a, b], [gcd(int(x), int(y)) for x, y in zip(a, b)]),
        "fib": ([n], [fib(int(x)) for x in n]),
        "first_positive": ([np.array([0, 1, 4, 6]), np.array([1, 2, 3, 5])], None),
    }
    for name, (args, expected) in cases.items():
        if expected is None:
            expected = [first_positive(*map(int, row)) for row in zip(*args)]
        got = batched[name](*args, backend=backend(backend_name), max_stack_depth=32)
        np.testing.assert_array_equal(np.asarray(got), expected, err_msg=name)


@pytest.mark.parametrize("function", [tree, fib])
def test_the_pass_drops_moves(function):
    """Against the pipeline without the pass."""
    with_pass = _moves(_lowered(function, [np.arange(5)]))
    passes = tuple(p for p in pipeline.PASSES if p[0] != "coalesce")
    original = pipeline.PASSES
    pipeline.PASSES = passes
    try:
        without = _moves(_lowered(function, [np.arange(5)]))
    finally:
        pipeline.PASSES = original
    assert len(with_pass) < len(without)

"""Tests of the hand-written IR builder, pcbatch.dsl."""

import dataclasses
import os
import sys

import numpy as np
import pytest

from pcbatch import dsl
from pcbatch.ir.nodes import (
    BranchOp,
    FunctionCallOp,
    GotoOp,
    Module,
    PrimOp,
    Program,
    ReturnOp,
)


def _line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def _build_fib():
    mb = dsl.ModuleBuilder()
    fib = mb.declare("fib", params=("n",), returns=1)
    lines = {}
    with mb.define(fib) as f:
        c = f.prim(lambda n: n <= 2, "n")
        lines["cond"] = _line() - 1
        with f.if_(c):
            f.return_(f.const(1))
        with f.else_():
            a = f.call(fib, f.prim(lambda n: n - 1, "n"))
            lines["call"] = _line() - 1
            b = f.call(fib, f.prim(lambda n: n - 2, "n"))
            f.prim(np.add, a, b, out="s")
            f.return_("s")
    return mb, lines


def test_fib_structure():
    mb, _ = _build_fib()
    program = mb.program("fib")
    assert isinstance(program, Program)
    fn = program.function("fib")
    assert fn.vars_in == ("fib.n",)
    assert fn.vars_out == ("fib.__ret0",)
    assert program.vars_in == ("fib.n",) and program.vars_out == ("fib.__ret0",)
    assert [b.label for b in fn.graph] == ["fib.entry", "fib.then1", "fib.else1"]
    entry = fn.graph.block("fib.entry")
    assert entry.instructions[0].vars_in == ("fib.n",)
    assert entry.instructions[0].vars_out == "fib.t0"
    assert entry.terminator == BranchOp("fib.t0", "fib.then1", "fib.else1", entry.terminator.loc)
    other = fn.graph.block("fib.else1")
    calls = [op for op in other.instructions if isinstance(op, FunctionCallOp)]
    assert [c.function for c in calls] == ["fib", "fib"]
    assert all(len(c.vars_out) == 1 for c in calls)
    add = [op for op in other.instructions if isinstance(op, PrimOp) and op.label == "add"]
    assert add[0].vars_out == "fib.s"
    last = other.instructions[-1]
    assert last.is_copy and last.vars_in == ("fib.s",) and last.vars_out == "fib.__ret0"
    assert isinstance(other.terminator, ReturnOp)


def test_source_locations_point_at_the_user_code():
    mb, lines = _build_fib()
    fn = mb.program("fib").function("fib")
    cond = fn.graph.block("fib.entry").instructions[0]
    assert os.path.basename(cond.loc.file) == "test_dsl.py"
    assert cond.loc.line == lines["cond"]
    assert cond.loc.function == "_build_fib"
    call = next(
        op for op in fn.graph.block("fib.else1").instructions if isinstance(op, FunctionCallOp)
    )
    assert call.loc.line == lines["call"]
    for block in fn.graph:
        for op in (*block.instructions, block.terminator):
            assert op.loc is not None and op.loc.file == __file__


def test_output_is_immutable():
    mb, _ = _build_fib()
    module = mb.module()
    assert isinstance(module, Module)
    fn = module.functions[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fn.name = "other"
    assert isinstance(fn.graph.blocks, tuple)
    assert isinstance(fn.graph.blocks[0].instructions, tuple)


def test_define_without_declare_and_multiple_returns():
    mb = dsl.ModuleBuilder()
    with mb.define("swap", params=("a", "b"), returns=2) as f:
        f.return_("b", "a")
    with mb.define("main", params=("x", "y"), returns=2) as f:
        p, q = f.call("swap", "x", "y")
        f.return_(p, q)
    program = mb.program("main")
    assert program.function("swap").vars_out == ("swap.__ret0", "swap.__ret1")
    call = program.function("main").graph.blocks[0].instructions[0]
    assert call.vars_out == ("main.t0", "main.t1")


def test_nested_output_pattern_and_explicit_out():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        out = f.prim(lambda x: (x, (x, x)), "x", out=("a", ("b", "c")))
        assert out == ("a", ("b", "c"))
        f.copy("a", "b", out=("y", "z"))
        f.return_("z")
    ops = mb.program("main").function("main").graph.blocks[0].instructions
    assert ops[0].vars_out == ("main.a", ("main.b", "main.c"))
    assert ops[1].is_copy and ops[1].vars_out == ("main.y", "main.z")
    # A user's copy writes like any primitive: the allocator decides on pushes.
    assert ops[1].skip_push_mask == frozenset()


def test_temporaries_skip_names_the_user_chose():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("t0",)) as f:
        t = f.prim(np.negative, "t0")
        f.return_(t)
    assert t == "t1"


def test_code_after_return_is_dropped():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with f.if_(f.prim(lambda x: x > 0, "x")):
            f.return_("x")
            f.prim(np.negative, "x", out="dead")
        f.return_(f.prim(np.negative, "x"))
    fn = mb.program("main").function("main")
    assert [b.label for b in fn.graph] == ["main.entry", "main.then1", "main.endif1"]
    assert all("main.dead" not in str(op.vars_out) for b in fn.graph for op in b.instructions)


def test_both_branches_return_so_the_join_is_dropped():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with f.if_(f.prim(lambda x: x > 0, "x")):
            f.return_("x")
        with f.else_():
            f.return_(f.const(0))
    labels = [b.label for b in mb.program("main").function("main").graph]
    assert labels == ["main.entry", "main.then1", "main.else1"]


def test_if_without_else_falls_through_to_the_join():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        f.copy("x", out="y")
        with f.if_(f.prim(lambda x: x > 0, "x")):
            f.prim(np.negative, "x", out="y")
        f.return_("y")
    fn = mb.program("main").function("main")
    branch = fn.graph.blocks[0].terminator
    # The empty else block is bypassed: false goes straight to the join.
    assert (branch.true_target, branch.false_target) == ("main.then1", "main.endif1")
    assert fn.graph.block("main.then1").terminator.target == "main.endif1"


def test_loop_back_edge_and_exits():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with f.loop():
            f.break_unless(f.prim(lambda x: x > 1, "x"))
            f.prim(lambda x: x // 2, "x", out="x")
            with f.if_(f.prim(lambda x: x == 7, "x")):
                f.break_()
            with f.if_(f.prim(lambda x: x == 5, "x")):
                f.continue_()
            f.break_if(f.prim(lambda x: x == 3, "x"))
        f.return_("x")
    graph = mb.program("main").function("main").graph
    labels = [b.label for b in graph]
    head = "main.loop1"
    assert labels[:2] == ["main.entry", head]
    assert graph.block("main.entry").terminator == GotoOp(head, graph.blocks[0].terminator.loc)
    exit_ = "main.endloop1"
    assert graph.block(head).terminator.false_target == exit_
    preds = graph.predecessors()
    # Back edges: the continue and the end of the body both reach the head.
    assert len(preds[head]) == 3
    assert len(preds[exit_]) == 3
    assert isinstance(graph.block(exit_).terminator, ReturnOp)


def test_empty_infinite_loop_is_kept():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f, f.loop():
        pass
    # The function never returns, but never falls off its end either.
    graph = mb.program("main").function("main").graph
    assert [b.label for b in graph] == ["main.entry", "main.loop1"]
    assert graph.block("main.loop1").terminator.target == "main.loop1"


def test_mutual_recursion_with_forward_declarations():
    mb = dsl.ModuleBuilder()
    even = mb.declare("even", params=("n",))
    odd = mb.declare("odd", params=("n",))
    for this, other in ((even, odd), (odd, even)):
        with mb.define(this) as f:
            f.return_(f.call(other, "n"))
    assert mb.module().function_names() == ("even", "odd")


def test_return_arity_error():
    mb = dsl.ModuleBuilder()
    with (
        mb.define("main", params=("x",), returns=2) as f,
        pytest.raises(ValueError, match="gives 1 values, but the function returns 2"),
    ):
        f.return_("x")


def test_falling_off_the_end_is_an_error_at_module_time():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f, f.if_(f.prim(lambda x: x > 0, "x")):
        f.return_("x")
    with pytest.raises(ValueError, match="'main'.*without returning"):
        mb.module()


def test_calling_an_undeclared_function():
    mb = dsl.ModuleBuilder()
    with (
        mb.define("main", params=("x",)) as f,
        pytest.raises(ValueError, match="undeclared function 'nope'"),
    ):
        f.call("nope", "x")


def test_call_argument_and_result_counts():
    mb = dsl.ModuleBuilder()
    g = mb.declare("g", params=("a", "b"), returns=2)
    with mb.define("main", params=("x",)) as f:
        with pytest.raises(ValueError, match="passes 1 arguments, but it takes 2"):
            f.call(g, "x")
        with pytest.raises(ValueError, match="binds 1 results, but it returns 2"):
            f.call(g, "x", "x", out="r")


def test_reading_an_undefined_local():
    mb = dsl.ModuleBuilder()
    with (
        mb.define("main", params=("x",)) as f,
        pytest.raises(ValueError, match="'y' is read at .*test_dsl.py"),
    ):
        f.prim(np.negative, "y")


def test_bad_names():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with pytest.raises(ValueError, match="may not contain"):
            f.prim(np.negative, "x", out="a.b")
        with pytest.raises(ValueError, match="reserved"):
            f.prim(np.negative, "x", out="__ret0")
        with pytest.raises(ValueError, match="twice"):
            f.prim(lambda x: (x, x), "x", out=("a", "a"))


def test_else_must_follow_an_if():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with pytest.raises(ValueError, match="directly follow"):
            f.else_()
        with f.if_(f.prim(lambda x: x > 0, "x")):
            pass
        f.copy("x", out="y")
        with pytest.raises(ValueError, match="directly follow"):
            f.else_()
        f.return_("y")


def test_break_outside_a_loop():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f, pytest.raises(ValueError, match="not inside"):
        f.break_()


def test_declaration_errors():
    mb = dsl.ModuleBuilder()
    mb.declare("f", params=("a",), returns=1)
    with pytest.raises(ValueError, match="declared differently"):
        mb.declare("f", params=("a", "b"), returns=1)
    with pytest.raises(ValueError, match="returns 2 != 1"):
        mb.define("f", returns=2)
    with pytest.raises(ValueError, match="declared but never defined: f"):
        mb.module()
    with mb.define("f") as f:
        f.return_("a")
    with pytest.raises(ValueError, match="defined twice"):
        mb.define("f")
    with pytest.raises(ValueError, match="no function named 'g'"):
        mb.program("g")


def test_labels_are_unique_across_the_program():
    mb = dsl.ModuleBuilder()
    for name in ("f", "g"):
        with mb.define(name, params=("x",)) as f:
            with f.if_(f.prim(lambda x: x > 0, "x")):
                f.return_("x")
            f.return_(f.const(0))
    labels = [b.label for fn in mb.module().functions for b in fn.graph]
    assert len(labels) == len(set(labels))


def test_constant_labels_show_small_values():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        f.const(2.5, out="a")
        f.const(np.zeros(3), out="b")
        f.return_("a")
    ops = mb.program("main").function("main").graph.blocks[0].instructions
    assert ops[0].label == "const[2.5]" and ops[0].vars_in == ()
    assert ops[1].label == "const"
    np.testing.assert_array_equal(ops[1].function(), np.zeros(3))
